"""`python -m harness gpu-study --out DIR`: the whole GPU half in one command, for the rare
minutes a GPU is at hand, on a server with no package index.

Steps, in order (each a subprocess, recorded in the manifest; a failure never stops the next):
doctor; gpu-floor (the hardware's probes: bus round trip, copies, launches, FMA peak); verify on the
GPU (every level, variant and dtype it offers); verify-train; the GPU
cells of every study; explain for the GPU ladders; kernels (where the GPU time goes);
kernel-stages (inside the cluster kernel); pytest -m gpu; the GPU labs graded as staff grade them
(harness.lab.term.gpu_labs, run as a subprocess: the lab wing sits beside this one). Then one
archive under the size cap.
`--quick` is the first smoke: doctor, verify on 1,000 images, api_levels' GPU cells with few calls.
`--steps` runs some steps only (the full set rarely fits in one 10-minute call: split it in two).
`--levels` spends the device's time on some levels only (those whose code changed): verify's and
verify-train's implementations, the kernels steps' targets and the labs graded are those of the
levels listed; a step left with none is recorded as skipped (planned out), not run. Such a campaign
measures those levels' targets first (FOCUSED: kernel-stages and the resident call's row, the floor,
verify, api_levels, kernels, batch 512, batch_sweep, pytest -m gpu, then the rest), so a budget that
runs out cuts what matters least. The studies stay whole (every GPU level): the report answers with
a machine's newest run of a study, so a run of some levels only would hide the others' rows.
`--plan` (step_plan) prints the steps in order with each one's seconds in the newest manifest that
ran it (reports/results/campaigns) and where the budget ends, without a GPU.
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
# batch2: the caller's array registered, read across the bus; batch2_device: copied in, its kernel's time
# the device-resident throughput (gpu_floor_section's batch targets)
KERNELS_BATCH = ("cuda/graph,cuda/cluster,cuda/mapped,cuda/batch,cuda/batch2,cuda/batch2_device,cudnn/graph,"
                 "cudnn/frontend", 512, 50)

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
# others after, in plan order (a budget that runs out cuts those)
FOCUSED = ("kernel-stages", "gpu-floor", "verify", "cudnn-device", "study-api_levels", "kernels",
           "kernels-512", "study-batch_sweep", "pytest-gpu")


def in_focus(todo: list[steps.Step], levels: list[str] | None) -> list[steps.Step]:
    """The plan's steps; with --levels, FOCUSED's first, in its order, then the rest as planned."""
    if levels is None:
        return todo
    first = sorted((s for s in todo if s.name in FOCUSED), key=lambda s: FOCUSED.index(s.name))
    return first + [s for s in todo if s.name not in FOCUSED]


def plan(out: Path, run_id: str, quick: bool, write: bool = True,
         levels: list[str] | None = None) -> list[steps.Step]:
    """The steps in order. write=False only names them (no quick study files are written).
    levels (checked by check_levels; None: all) restricts verify, verify-train, kernels and labs."""
    res = out / "results"
    host = results.short_hostname()
    impls, train_impls = of_levels(GPU_IMPLS, levels), of_levels(GPU_TRAIN_IMPLS, levels)
    verify = ["-m", "harness", "verify", "--implementations", impls, "--device", "gpu",
              "--dtypes", "float32,float64", "--json", str(res / f"verify-gpu-{host}.json")]
    # verify took 150 s on the H100 machine for 10,000 images x 2 dtypes of every GPU level
    todo = [python_step("doctor", ["-m", "harness", "doctor"], 90)]
    if not quick:  # the hardware's probes first: no level is needed, and every GPU target is judged by them
        todo.append(python_step("gpu-floor", ["-m", "harness", "gpu-floor", "--out", str(res)], 60))
    todo.append(limited(python_step("verify", verify + (["--limit", "1000"] if quick else []),
                                    90 if quick else 300, ok_codes=(0, 3)), impls, levels))
    if not quick:
        todo.append(limited(python_step("verify-train", [
            "-m", "harness", "verify-train", "--implementations", train_impls, "--device", "gpu",
            "--json", str(res / f"verify-train-gpu-{host}.json")], 150, ok_codes=(0, 3)),
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
    return todo if quick else in_focus(todo, levels)


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


def step_plan(todo: list[steps.Step], measured: dict[str, dict[str, Any]], budget_s: float) -> list[str]:
    """The steps in order, each with its seconds in the newest manifest that ran it (never: its
    limit, said), the running sum, and the first step the budget would not start."""
    lines, total = [], 0.0
    for s in todo:
        if s.skip:
            lines.append(f"  {s.name:<20} planned out: {s.skip}")
            continue
        last = measured.get(s.name)
        seconds = last["seconds"] if last else s.timeout_s
        if last is None:
            said = f"{seconds:6.1f} s  (never ran: its limit)"
        else:
            how = "at least: stopped by its limit" if last["status"] == "timeout" else "last"
            other = "" if last["same_levels"] else ", other levels"
            said = f"{seconds:6.1f} s  ({how}{other}, {last['manifest']})"
        total += seconds
        over = "  <- past the budget" if total > budget_s else ""
        lines.append(f"  {s.name:<20} {said}; {total:6.1f} s in all{over}")
    return lines


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
                 levels: list[str] | None = None) -> tuple[dict[str, Any], Path]:
    """Run the steps into out/, then pack out/<name>.tar.gz. Returns (manifest, archive path)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results").mkdir(exist_ok=True)
    manifest = {"campaign": name, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "budget_s": budget_s, "levels": levels or gpu_levels(), "levels_all": levels is None,
                "steps": []}
    steps.run_all(todo, out, manifest, budget_s, say)
    return manifest, archive.pack(out, name, cap_bytes, say)


def gpu_study(out: Path, quick: bool, only: list[str] | None = None, budget_s: float | None = None,
              say: Callable[[str], None] = print,
              levels: list[str] | None = None) -> tuple[dict[str, Any], Path]:
    run_id = results.new_run_id()
    name = f"gpu-study-{results.short_hostname()}-{run_id}"
    out = Path(out)
    levels = check_levels(levels)  # a bad --levels or --steps fails before anything runs
    select(plan(out, run_id, quick, write=False, levels=levels), only)
    if (out / "manifest.json").exists():  # its results would ride along in this archive, its manifest lost
        raise HarnessError(f"--out {out} already holds a campaign ({out / 'manifest.json'}); "
                           "give each gpu-study a new folder")
    out.mkdir(parents=True, exist_ok=True)
    todo = select(plan(out, run_id, quick, levels=levels), only)
    return run_campaign(out, name, todo, budget_s or BUDGET_S["quick" if quick else "full"], say=say,
                        levels=levels)
