"""`python -m harness gpu-study --out DIR`: the whole GPU half in one command, for the rare
minutes a GPU is at hand, on a server with no package index.

Steps, in order (each a subprocess, recorded in the manifest; a failure never stops the next):
doctor; bundle (the offline bundle's distributions found: without it no Keras row, no
cudnn/frontend, no labs); smoke (SMOKE_TARGETS, the variants no GPU has run yet, each dtype in a
process of its own under SMOKE_CAP_S: one that hangs or faults costs only its process, and every
later step refuses it by name: harness.frameworks.gpu_fault); gpu-floor (the hardware's probes: bus
round trip, copies, launches, FMA peak); verify on the GPU (every level, variant and dtype it offers,
a process per level and dtype); verify-train; the GPU cells of every study; training (training.toml's
GPU cells); explain for the GPU ladders; kernels (where the GPU time goes); kernel-stages (inside the
cluster kernel); pytest -m gpu; the GPU labs graded as staff grade them (harness.lab.term.gpu_labs, run
as a subprocess: the lab wing sits beside this one).
What finishes comes back: the results, logs and manifest go to a work folder (--work, default
build/gpu-study/<campaign>/), and after each step one archive of them is packed whole (a temporary
file renamed) into --out, beside the console log: two files, the folder a borrowed machine returns;
a command cut off after step k brings back steps 1..k, importable.
`--part 1|2`: one command of a loan (PARTS, PART_BUDGET_S): the first verifies what changed and
measures the headline's GPU cells, the second, on the same warm machine, training and the kernels
(its smoke planned out where the first's verdicts are still here, SMOKE_FILE).
`--quick` is the first smoke: doctor, verify on 1,000 images, api_levels' GPU cells with few calls.
`--steps` runs some steps only (the full set rarely fits in one 10-minute call: split it in two).
`--levels` spends the device's time on some levels only (those whose code changed): verify's and
verify-train's implementations, the kernels steps' targets and the labs graded are those of the
levels listed; a step left with none is recorded as skipped (planned out), not run. Such a campaign
measures those levels' targets first (FOCUSED: the smoke, kernel-stages and the resident call's row,
verify, batch 512 with the newest kernels first, the floor, api_levels, kernels, batch_sweep, pytest
-m gpu, then the rest), so a budget that runs out cuts what matters least. The studies stay whole
(every GPU level): the report answers with a machine's newest run of a study, so a run of some levels
only would hide the others' rows.
`--plan` (step_plan) prints the steps in order with each one's seconds in the newest manifest that
ran it (reports/results/campaigns), or as stated for a step never run, and where the budget ends,
without a GPU; bare, it prints the loan (loan_plan): both commands, each one's total against its
budget, the loan's, and what it leaves out.
"""

import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from harness import ROOT, registry
from harness.campaign import archive, steps
from harness.campaign.steps import python_step
from harness.errors import HarnessError
from harness.frameworks import gpu_fault
from harness.machine.files import write_atomic
from harness.measure.plan import study
from harness.measure.store import results

# From the registry, bottom rung first (a level whose framework is absent, TF on many GPU servers, is a
# row saying so): every GPU level; those with a trainer; the explain targets and the traced ones its
# entries opt into (ImplSpec.explain, ImplSpec.trace)
GPU_IMPLS = ",".join(registry.on_device("gpu"))
GPU_TRAIN_IMPLS = ",".join(registry.trainers("gpu"))
STUDIES = ("api_levels", "overhead", "backends", "batch_sweep", "precision")
EXPLAIN = ",".join(registry.targets("explain", "gpu"))
KERNELS = ",".join(registry.targets("trace", "gpu"))
STAGES_TARGET = "cuda/cluster"  # kernel-stages stamps the cluster kernel inside the level's cluster call
# (and cuda/resident's call, attributed part by part: kernel_stages' second row)
# batch 512: how much of a call is the copy of the images (1.6 MB in float32): targets, images, calls
# overlap: its copy overlapped inside the kernel (cp.async), never measured yet: first, beside the
# batch2 pair it would replace; batch2: the caller's array registered, read across the bus;
# batch2_device: copied in, its kernel's time the device-resident throughput (gpu_floor_section's
# batch targets)
KERNELS_BATCH = ("cuda/overlap,cuda/batch2,cuda/batch2_device,cuda/batch,cuda/graph,cuda/cluster,cuda/mapped,"
                 "cudnn/graph,cudnn/frontend", 512, 50)

# api_levels times each cell in 3 fresh processes: on the H100 one process's set-up of every GPU level
# took 63 s of its 81 s (2026-11-27), so three take about 200 s before their calls
STUDY_LIMIT_S = {"api_levels": 360}
# One command may run 10 minutes on the borrowed machine; a cold start's first imports are slow
# (doctor took 82 s on a fresh H100 machine before its probes ran in parallel).
BUDGET_S = {"quick": 240, "full": 540}
QUICK_MEASURE = {"calls": 100, "rounds": 3, "warmup": 5, "max_cell_seconds": 2}
# the labs step: each GPU lab's examples graded in the sandbox (harness.lab.term.gpu_labs), both in 150 s
GPU_LABS = ("cuda", "cudnn")
LABS_LIMIT_S = 150

# The smoke: the variants no GPU has run yet (or whose code changed most since), each dtype in a process of
# its own under SMOKE_CAP_S, on 1,000 images, first in a campaign: one that hangs or faults costs its own
# process, and the steps after it skip it by name (harness.frameworks.gpu_fault's quarantine). Its verify
# JSON lives in SMOKE_FILE (git-ignored, in the checkout: a second command on the same warm machine reads
# it) and goes into the archive as results/smoke-gpu-<host>-<run-id>.json.
SMOKE_TARGETS = "cuda/rows,cuda/resident_rows,cuda/overlap,cuda/resident,cudnn/frontend"
SMOKE_CAP_S = 45
SMOKE_FILE = ROOT / "build" / "gpu-smoke" / "verify-smoke.json"
# training on the GPU: studies/training.toml's GPU cells (every level with a trainer there), at the batch
# sizes the CPU is measured at
TRAINING_LIMIT_S = 240
# batch_sweep's GPU cells at batch 1 and 512 only (the headline's two): the first command of a loan
SWEEP_BATCHES = (1, 512)
# The offline bundle a GPU run carries (make offline-bundle BUNDLE_PY=3.12): checked installed first
BUNDLE = Path("dist") / "offline-bundle-py3.12"

# A loan of a GPU machine (~15 minutes, ~90 s of it starting and idling): two commands on the machine
# while it stays warm, each at most 10 minutes, what comes back at most 8 files. PARTS lists each
# command's steps in order; PART_BUDGET_S its seconds, the bundle's install and the packing counted in.
# The first verifies what changed (PART_LEVELS) and measures the headline's GPU cells; the second
# times training and where the kernels' time goes; the labs and `kernels` only if time remains.
PARTS = {1: ("bundle", "smoke", "gpu-floor", "verify", "study-api_levels", "batch_sweep-1-512"),
         2: ("bundle", "smoke", "training", "kernel-stages", "kernels-512", "pytest-gpu", "labs", "kernels")}
PART_BUDGET_S = {1: 470, 2: 330}
OPTIONAL = ("labs", "kernels")  # a command's last steps, run only if time remains (not in its total)
PART_LEVELS = ["cuda", "cudnn"]
# what a command spends outside gpu-study's steps (stated: nothing has timed them yet): the bundle's
# install (pip --no-index of 13 wheels) and each packing of the archive (gzip of a few MiB of rows)
BUNDLE_INSTALL_S = 15.0
PACK_S = 1.5
# the seconds of a step no manifest has timed, as stated (the plan says so): the smoke's 10 processes
# of ~7 s (import CuPy, compile, 1,000 images); training's ~35 GPU cells in ~10 processes; batch_sweep's
# GPU cells at two batch sizes of four (its whole study took 179 s on the H100 machine, 2026-11-27)
STATED_S = {"bundle": 3.0, "smoke": 70.0, "training": 150.0, "batch_sweep-1-512": 95.0}


def lab_rung(lab: str) -> str:
    """The level a lab's students implement (labs/<lab>.toml's rung): --levels picks labs by it."""
    return str(tomllib.loads((ROOT / "labs" / f"{lab}.toml").read_text())["lab"]["rung"])


def gpu_levels() -> list[str]:
    """Every registered level that runs on the GPU, bottom rung first (`harness list --device gpu`)."""
    return registry.on_device("gpu")


def check_levels(names: list[str] | None) -> list[str] | None:
    """--levels: None (every level) or the names, each a GPU level; an unknown one is an error
    listing them."""
    if not names:
        return None
    known = gpu_levels()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise HarnessError(f"--levels: no GPU level named {', '.join(unknown)}; the GPU levels are "
                           f"{','.join(known)} (python -m harness list --device gpu)")
    return list(dict.fromkeys(names))


def of_levels(targets: str, levels: list[str] | None) -> str:
    """The comma-separated targets (level or level/variant) whose level is listed, in their order."""
    if levels is None:
        return targets
    return ",".join(t for t in targets.split(",") if t.split("/")[0] in levels)


def planned_out(levels: list[str] | None) -> str:
    return f"none of --levels {','.join(levels or [])} has a target in this step"


def quick_study(name: str, out: Path) -> Path:
    """A copy of studies/<name>.toml with few calls (same study name, so the report reads it)."""
    text = study.path_of(name).read_text()
    for key, value in QUICK_MEASURE.items():
        text, n = re.subn(rf"(?m)^{key}\s*=.*$", f"{key} = {value}", text)
        if n == 0:
            text = text.replace("[measure]\n", f"[measure]\n{key} = {value}\n", 1)
    study.parse(text, f"quick {name}")  # still a valid study
    return write_atomic(out / f"quick-{name}.toml", text)


def limited(step: steps.Step, targets: str, levels: list[str] | None) -> steps.Step:
    """The step, or (none of its targets among the levels) a skipped record of it."""
    return step if targets else replace(step, skip=planned_out(levels))


# A campaign of some levels (--levels): the steps that measure their targets first, in this order; the
# others after, in plan order (a budget that runs out cuts those). The variants new since the last GPU
# (KERNELS_BATCH's first) are verified and timed at batch 512 within the first two minutes.
FOCUSED = ("bundle", "smoke", "kernel-stages", "verify", "kernels-512", "gpu-floor", "cudnn-device",
           "study-api_levels", "kernels", "study-batch_sweep", "pytest-gpu")


def in_focus(todo: list[steps.Step], levels: list[str] | None) -> list[steps.Step]:
    """The plan's steps; with --levels, FOCUSED's first, in its order, then the rest as planned."""
    if levels is None:
        return todo
    first = sorted((s for s in todo if s.name in FOCUSED), key=lambda s: FOCUSED.index(s.name))
    return first + [s for s in todo if s.name not in FOCUSED]


def sweep_study(out: Path, batches: tuple[int, ...] = SWEEP_BATCHES) -> Path:
    """A copy of studies/batch_sweep.toml with batch_sizes = batches (same study name, so the report
    reads it; its GPU cells are the headline's throughput)."""
    text = study.path_of("batch_sweep").read_text()
    text, n = re.subn(r"(?m)^batch_sizes\s*=.*$", f"batch_sizes = {list(batches)}", text, count=1)
    if n == 0:
        raise HarnessError(f"{study.path_of('batch_sweep')}: no batch_sizes line to narrow")
    study.parse(text, "batch_sweep at batch " + " and ".join(map(str, batches)))  # still a valid study
    return write_atomic(out / ("batch_sweep-" + "-".join(map(str, batches)) + ".toml"), text)


def smoke_step() -> steps.Step:
    """The smoke (SMOKE_TARGETS, each dtype a process under SMOKE_CAP_S) into SMOKE_FILE. Exit 1 (a
    variant wrong, hung or faulted) is what it is for: recorded, not a failed step."""
    command = ["-m", "harness", "verify", "--implementations", SMOKE_TARGETS, "--device", "gpu",
               "--dtypes", "float32,float64", "--limit", "1000", "--child-timeout-s", str(SMOKE_CAP_S),
               "--json", str(SMOKE_FILE)]
    return python_step("smoke", command, 240, ok_codes=(0, 1, 3), estimate_s=STATED_S["smoke"])


def quarantined(todo: list[steps.Step]) -> list[steps.Step]:
    """Every step after the smoke (or every step, where the smoke's verdicts are already there: a second
    command) names the smoke's verdicts to the levels (gpu_fault.QUARANTINE_ENV): a variant that hung or
    faulted there is refused, by name, instead of run again."""
    names = [s.name for s in todo]
    first = names.index("smoke") + 1 if "smoke" in names else 0
    env = ((gpu_fault.QUARANTINE_ENV, str(SMOKE_FILE)),)
    return todo[:first] + [replace(s, env=s.env + env) for s in todo[first:]]


def plan(out: Path, run_id: str, quick: bool, write: bool = True, levels: list[str] | None = None,
         part: int | None = None, warm: bool | None = None) -> list[steps.Step]:
    """The steps in order. write=False only names them (no quick study files are written).
    levels (checked by check_levels; None: all) restricts verify, verify-train, kernels and labs.
    part (1 or 2): one command of a loan (PARTS), its verify of PART_LEVELS; the second's smoke is
    planned out on a warm machine (warm; None: where the first's verdicts are here, SMOKE_FILE)."""
    res = out / "results"
    host = results.short_hostname()
    if part is not None:
        levels = levels or PART_LEVELS
    impls, train_impls = of_levels(GPU_IMPLS, levels), of_levels(GPU_TRAIN_IMPLS, levels)
    # keyed by the run: a second machine's (or campaign's) check never replaces the first's
    verify = ["-m", "harness", "verify", "--implementations", impls, "--device", "gpu",
              "--dtypes", "float32,float64", "--json", str(res / f"verify-gpu-{host}-{run_id}.json")]
    # verify took 150 s on the H100 machine for 10,000 images x 2 dtypes of every GPU level
    todo = [python_step("doctor", ["-m", "harness", "doctor"], 90)]
    if not quick:
        todo.append(python_step("bundle", ["scripts/offline_bundle.py", "installed", "--bundle", str(BUNDLE)],
                                30, estimate_s=STATED_S["bundle"]))
        todo.append(smoke_step())
        # the hardware's probes first: no level is needed, and every GPU target is judged by them
        todo.append(python_step("gpu-floor", ["-m", "harness", "gpu-floor", "--out", str(res)], 60))
    todo.append(limited(python_step("verify", verify + (["--limit", "1000"] if quick else []),
                                    90 if quick else 300, ok_codes=(0, 3)), impls, levels))
    if not quick:
        todo.append(limited(python_step("verify-train", [
            "-m", "harness", "verify-train", "--implementations", train_impls, "--device", "gpu",
            "--json", str(res / f"verify-train-gpu-{host}-{run_id}.json")], 150, ok_codes=(0, 3)),
            train_impls, levels))
        # this GPU's cuDNN device properties: cudnn/frontend's graphs planned without a GPU (3: none)
        recorded = of_levels("cudnn", levels)
        todo.append(limited(python_step("cudnn-device", ["-m", "lenet_cudnn.frontend_device", "record",
                                                         "--out", str(res)], 60, ok_codes=(0, 3)),
                            recorded, levels))
    for name in ("api_levels",) if quick else STUDIES:
        source = str(quick_study(name, out)) if quick and write else name
        todo.append(python_step(f"study-{name}", ["-m", "harness", "run", source, "--devices", "gpu",
                                                  "--out", str(res), "--run-id", run_id],
                                STUDY_LIMIT_S.get(name, 240)))
    if not quick:
        sweep = str(sweep_study(out)) if write else "batch_sweep-1-512.toml"
        todo.append(python_step("batch_sweep-1-512", ["-m", "harness", "run", sweep, "--devices", "gpu",
                                                      "--out", str(res), "--run-id", run_id], 180,
                                estimate_s=STATED_S["batch_sweep-1-512"]))
        todo.append(python_step("training", ["-m", "harness", "run", "training", "--devices", "gpu",
                                             "--out", str(res), "--run-id", run_id], TRAINING_LIMIT_S,
                                estimate_s=STATED_S["training"]))
        todo.append(python_step("explain", ["-m", "harness", "explain", EXPLAIN, "--device", "gpu",
                                            "--calls", "40", "--rounds", "4", "--out", str(res)], 120,
                                ok_codes=(0, 3)))  # 3: a target's framework is not on this server
        kernels = of_levels(KERNELS, levels)
        todo.append(limited(python_step("kernels", ["-m", "harness", "kernels", kernels, "--calls", "200",
                                                    "--out", str(res)], 240), kernels, levels))
        targets, batch, calls = KERNELS_BATCH
        targets = of_levels(targets, levels)
        big = ["-m", "harness", "kernels", targets, "--batch", str(batch), "--calls", str(calls),
               "--out", str(res)]
        todo.append(limited(python_step(f"kernels-{batch}", big, 170), targets, levels))  # 7 processes
        stamps = ["-m", "harness", "kernel-stages", "--calls", "200", "--dtypes", "float32,float64",
                  "--out", str(res)]
        stamped = of_levels(STAGES_TARGET, levels)
        todo.append(limited(python_step("kernel-stages", stamps, 90), stamped, levels))
        todo.append(python_step("pytest-gpu", ["-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
                                               "--junitxml", str(res.parent / "logs" / "pytest-gpu.xml"),
                                               "tests"], 150))
        graded = ",".join(lab for lab in GPU_LABS if levels is None or lab_rung(lab) in levels)
        # results/labs-gpu/<run-id>/<lab>/: imported as it is, beside the run folders
        todo.append(limited(python_step("labs", ["-m", "harness.lab.term.gpu_labs", "--labs", graded,
                                                 "--out", str(res / "labs-gpu" / run_id),
                                                 "--budget-s", str(LABS_LIMIT_S - 10)],
                                        LABS_LIMIT_S), graded, levels))
    if quick:
        return todo
    if part is not None:
        return quarantined(in_part(todo, part, warm))
    return quarantined([s for s in in_focus(todo, levels) if s.name != "batch_sweep-1-512"])


def in_part(todo: list[steps.Step], part: int, warm: bool | None = None) -> list[steps.Step]:
    """The steps of one command of a loan (PARTS[part]), in its order; the second's smoke planned out
    on a warm machine (warm; None: where the first's verdicts are here, SMOKE_FILE)."""
    if part not in PARTS:
        raise HarnessError(f"--part: expected one of {', '.join(map(str, PARTS))}, found {part}")
    by_name = {s.name: s for s in todo}
    chosen = [by_name[name] for name in PARTS[part]]
    if part != 1 and (SMOKE_FILE.exists() if warm is None else warm):
        here = SMOKE_FILE.relative_to(ROOT) if SMOKE_FILE.is_relative_to(ROOT) else SMOKE_FILE
        chosen = [replace(s, skip=f"the first command's verdicts are here ({here})")
                  if s.name == "smoke" else s for s in chosen]
    return chosen


def left_out(todo: list[steps.Step]) -> list[str]:
    """The steps of the full plan that neither command of a loan runs (PARTS), in plan order."""
    taken = {name for names in PARTS.values() for name in names}
    return [s.name for s in todo if s.name not in taken]


def measured_seconds(campaigns: Path, levels: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Each step's seconds in the newest manifest (by its start) that ran it (ok, or stopped by its
    limit: then its seconds are a floor), a manifest of the same --levels before any other; from the
    manifests import-results keeps. A manifest that cannot be read is passed by, named."""
    records = []
    for path in sorted(Path(campaigns).glob("*.manifest.json")):
        try:
            manifest = json.loads(path.read_text())
            every = manifest.get("levels_all", "levels" not in manifest)  # older manifests: every level
            wanted = None if levels is None else sorted(levels)
            same = (None if every else sorted(manifest["levels"])) == wanted
            records += [(same, str(manifest["started"]), path.name, step) for step in manifest["steps"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"gpu-study --plan: {path} passed by ({type(exc).__name__}: {exc})", file=sys.stderr)
    found: dict[str, dict[str, Any]] = {}
    for same, _, name, step in sorted(records, key=lambda r: (r[0], r[1])):  # the best last
        seconds = step.get("seconds")
        if step.get("status") in ("ok", "timeout") and isinstance(seconds, (int, float)) and seconds >= 0:
            found[step["name"]] = {"seconds": float(seconds), "status": step["status"], "manifest": name,
                                   "same_levels": same}
    return found


def estimate(s: steps.Step, measured: dict[str, dict[str, Any]]) -> tuple[float, str]:
    """(seconds, how they are known) of one step: the newest manifest that ran it, else its estimate
    as stated (Step.estimate_s), else its limit."""
    last = measured.get(s.name)
    if last is not None:
        how = "at least: stopped by its limit" if last["status"] == "timeout" else "last"
        other = "" if last["same_levels"] else ", other levels"
        return last["seconds"], f"{how}{other}, {last['manifest']}"
    if s.estimate_s is not None:
        return s.estimate_s, "never ran: stated"
    return s.timeout_s, "never ran: its limit"


def step_plan(todo: list[steps.Step], measured: dict[str, dict[str, Any]], budget_s: float,
              spent_s: float = 0.0, pack_s: float = 0.0) -> list[str]:
    """The steps in order, each with its seconds (estimate), the running sum (from spent_s: what the
    command spends before its first step; pack_s after each step), and the first step the budget
    would not start."""
    lines, total = [], spent_s
    for s in todo:
        if s.skip:
            lines.append(f"  {s.name:<20} planned out: {s.skip}")
            continue
        seconds, how = estimate(s, measured)
        total += seconds + pack_s
        over = "  <- past the budget" if total > budget_s else ""
        lines.append(f"  {s.name:<20} {seconds:6.1f} s  ({how}); {total:6.1f} s in all{over}")
    return lines


def part_seconds(todo: list[steps.Step], measured: dict[str, dict[str, Any]]) -> float:
    """One command's seconds: the bundle's install, each step it runs but OPTIONAL's (estimate) and
    each one's packing."""
    run = [s for s in todo if not s.skip and s.name not in OPTIONAL]
    return BUNDLE_INSTALL_S + sum(estimate(s, measured)[0] + PACK_S for s in run)


def loan_plan(measured: dict[str, dict[str, Any]], full: list[steps.Step]) -> tuple[list[str], bool]:
    """The loan's two commands (PARTS), each step's estimate, each command's total against its budget
    (PART_BUDGET_S: the bundle's install and the packing counted in), the loan's total, and what it
    leaves out. (lines, whether both commands fit.)"""
    lines, fits, total = [], True, 0.0
    for part, budget in PART_BUDGET_S.items():
        todo = plan(Path("."), "plan", False, write=False, part=part, warm=True)
        seconds = part_seconds(todo, measured)
        total += seconds
        fits = fits and seconds <= budget
        lines.append(f"command {part} (gpu-study --part {part}), budget {budget} s: the bundle's install "
                     f"{BUNDLE_INSTALL_S:g} s (stated), then each step and {PACK_S:g} s packing it (stated)"
                     + ("; on a warm machine (a cold one runs the smoke again)" if part != 1 else ""))
        required = [s for s in todo if s.name not in OPTIONAL]
        lines += step_plan(required, measured, budget, BUNDLE_INSTALL_S, PACK_S)
        extra = [s for s in todo if s.name in OPTIONAL]
        if extra:
            lines.append("  only if time remains (the budget starts a step with 30 s left, its rows kept "
                         "where it is cut):")
            lines += step_plan(extra, measured, budget, seconds, PACK_S)
        lines.append(f"  command {part}: {seconds:.0f} s of {budget} s "
                     + ("(fits)" if seconds <= budget else "(OVER: the last steps are cut, their rows kept)"))
    budget = sum(PART_BUDGET_S.values())
    lines.append(f"the loan: {total:.0f} s of commands of {budget} s "
                 f"({' + '.join(map(str, PART_BUDGET_S.values()))}); left out: {', '.join(left_out(full))}")
    return lines, fits


def select(todo: list[steps.Step], names: list[str] | None) -> list[steps.Step]:
    """The steps named (in plan order); an unknown name is an error that lists the known ones."""
    if not names:
        return todo
    known = [s.name for s in todo]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise HarnessError(f"--steps: no step named {', '.join(unknown)}; the steps are {', '.join(known)}")
    return [s for s in todo if s.name in names]


def run_campaign(out: Path, name: str, todo: list[steps.Step], budget_s: float,
                 cap_bytes: int = archive.CAP_BYTES,
                 say: Callable[[str], None] = print,
                 levels: list[str] | None = None, into: Path | None = None,
                 part: int | None = None) -> tuple[dict[str, Any], Path]:
    """Run the steps into out/ (results/, logs/, manifest.json), packing into/<name>.tar.gz (into: out
    where not given) after each step, whole (a command cut off after step k brings back steps 1..k),
    and once more at the end. The smoke's verdicts (SMOKE_FILE) go into results/ after its step, or
    at the start where a second command reads them. Returns (manifest, archive path)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results").mkdir(exist_ok=True)
    if into is not None:
        Path(into).mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"campaign": name, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                "budget_s": budget_s, "levels": levels or gpu_levels(),
                                "levels_all": levels is None, "steps": []}
    if part is not None:
        manifest["part"] = part
    kept = out / "results" / f"smoke-gpu-{name.removeprefix('gpu-study-')}.json"

    def keep_verdicts() -> None:
        if SMOKE_FILE.is_file():
            write_atomic(kept, SMOKE_FILE.read_text())

    if any(s.name == "smoke" and s.skip for s in todo):
        keep_verdicts()

    def after(step: steps.Step, record: dict[str, Any]) -> None:
        if step.name == "smoke" and not step.skip:
            keep_verdicts()
        started = time.monotonic()
        archive.pack(out, name, cap_bytes, say, into)
        record["packed_s"] = round(time.monotonic() - started, 2)

    steps.run_all(todo, out, manifest, budget_s, say, after)
    return manifest, archive.pack(out, name, cap_bytes, say, into)


def gpu_study(out: Path, quick: bool, only: list[str] | None = None, budget_s: float | None = None,
              say: Callable[[str], None] = print,
              levels: list[str] | None = None, part: int | None = None,
              work: Path | None = None) -> tuple[dict[str, Any], Path]:
    """A campaign: its results, logs and manifest in `work` (default build/gpu-study/<name>/, beside
    the checkout's other machine-local files), its archive and console log in `out`, the folder a
    borrowed machine returns: two files a command."""
    run_id = results.new_run_id()
    name = f"gpu-study-{results.short_hostname()}-{run_id}"
    out = Path(out)
    levels = check_levels(levels)  # a bad --levels or --steps fails before anything runs
    if part is not None:
        levels = levels or PART_LEVELS  # as plan() takes them: the manifest says so
    select(plan(out, run_id, quick, write=False, levels=levels, part=part), only)
    if (out / "manifest.json").exists():  # its results would ride along in this archive, its manifest lost
        raise HarnessError(f"--out {out} already holds a campaign ({out / 'manifest.json'}); "
                           "give each gpu-study a new folder")
    work = Path(work) if work is not None else ROOT / "build" / "gpu-study" / name
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    console = out / f"{name}.log"  # the console's lines, as they come: beside the archive

    def said(line: str) -> None:
        say(line)
        with open(console, "a") as f:
            f.write(line + "\n")

    todo = select(plan(work, run_id, quick, levels=levels, part=part), only)
    if any(s.name == "smoke" and not s.skip for s in todo):
        SMOKE_FILE.unlink(missing_ok=True)  # an older smoke's verdicts never stand in for this one's
    budget = budget_s or (PART_BUDGET_S[part] - BUNDLE_INSTALL_S if part is not None
                          else BUDGET_S["quick" if quick else "full"])
    said(f"{name}: {len(todo)} steps, budget {budget:g} s; results, logs and manifest in {work}, "
         f"the archive and this log in {out}")
    return run_campaign(work, name, todo, budget, say=said, levels=levels, into=out, part=part)
