"""What each command does; harness.cli holds the command table and turns errors into exit codes.

Each command imports its wing inside the function, so `--help` and the light commands start fast
and no command imports a framework it does not use.
"""

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import DEFAULT_RESULTS, DEFAULT_WEIGHTS, registry
from harness.errors import HarnessError, Unavailable
from harness.machine import procenv
from harness.machine.files import write_atomic

if TYPE_CHECKING:  # the report wing is imported by the commands that need it
    from harness.lab.judge.slurm import Options
    from harness.report.claims import rundata

# A quick run's results (run --implementations/--rounds/--processes) go here unless --out names a folder:
# a try is kept out of reports/results (per user: /tmp is shared)
QUICK_OUT = os.path.join(tempfile.gettempdir(), f"lenet-quick-{os.getuid()}")


def log(line: str) -> None:
    """Progress and messages go to stderr, so stdout carries only results (tables, JSON)."""
    print(line, file=sys.stderr, flush=True)


def split_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def write_json(target: str, data: dict[str, Any]) -> None:
    """--json FILE (its folder created), or a bare --json: stdout."""
    text = json.dumps(data, indent=2)
    if target == "-":
        print(text)
    else:
        write_atomic(target, text + "\n")


def cmd_verify(args: argparse.Namespace) -> int:
    from harness.check import verify
    from harness.data import weights

    names = split_list(args.implementations) if args.implementations else registry.on_device(args.device)
    verify.require_known(names)
    weights.read(args.weights)  # an unusable file fails here, in one line, before any work
    procenv.apply(procenv.settings(args.threads, 1, args.device))
    log(verify.HEADER)
    dtypes = split_list(args.dtypes)
    for dtype in dtypes:
        if dtype not in ("float32", "float64"):
            raise HarnessError(f"--dtypes: unknown dtype {dtype!r}; allowed: float32, float64")
    def save(rows: list[dict[str, Any]], code: int | None = None) -> None:
        """Called after every row: a run stopped half-way keeps what it checked."""
        if args.json:
            write_json(args.json, {"rows": rows, "exit_code": code, "complete": code is not None,
                                   "weights": str(args.weights), "tolerance": verify.TOLERANCE})

    rows = verify.verify(names, args.device, args.weights, args.data_dir, args.limit,
                         progress=log, dtypes=dtypes, on_row=save if args.json != "-" else None)
    code = verify.exit_code(rows)
    save(rows, code)
    verdict = {0: "all implementations agree", 1: "DISAGREEMENT: see FAIL rows",
               3: "some implementations could not run here (see reasons)"}[code]
    log(verdict)
    return code


def cmd_verify_train(args: argparse.Namespace) -> int:
    from harness.check import train_verify, verify
    from harness.data import init_weights, weights

    names = split_list(args.implementations) if args.implementations else registry.trainers(args.device)
    verify.require_known(names)
    for field, value in (("--steps", args.steps), ("--batch", args.batch)):
        if value < 1:
            raise HarnessError(f"{field}: expected a positive number, found {value}")
    weights_path = args.weights or init_weights.DEFAULT_INIT
    weights.read(weights_path)  # an unusable file fails here, in one line, before any work
    procenv.apply(procenv.settings(args.threads, 1, args.device))
    log(train_verify.HEADER)
    rows = train_verify.verify_train(names, args.device, weights_path, args.steps, args.batch,
                                     args.dtype, args.data_dir, progress=log)
    code = train_verify.exit_code(rows)
    if args.json:
        write_json(args.json, {"rows": rows, "exit_code": code, "weights": str(weights_path),
                               "steps": args.steps, "batch": args.batch, "dtype": args.dtype,
                               "loss_tolerance": train_verify.LOSS_TOLERANCE,
                               "weight_tolerance": train_verify.WEIGHT_TOLERANCE})
    ties = sum(row["status"] == "tie" for row in rows)
    untrained = train_verify.no_trainer(rows)
    could_not = any(row["status"] == "unavailable" for row in rows)
    verdict = {0: "every training step agrees with the oracle" + (
                   f" ({ties} row(s) up to a max-pool near-tie, then another valid path)" if ties else ""),
               1: "DRIFT: see FAIL rows",
               3: "some implementations could not run here (see reasons)" if could_not
               else "no level named has a trainer: nothing was checked"}[code]
    if untrained:
        verdict += f"; {', '.join(untrained)}: no trainer (inference only)"
    log(verdict)
    return code


def cmd_run(args: argparse.Namespace) -> int:
    import dataclasses

    from harness.data import init_weights, weights
    from harness.machine import gpu
    from harness.measure import runner, summary
    from harness.measure.plan import narrow, study
    from harness.measure.store import results

    quick = args.implementations is not None or args.rounds is not None or args.processes is not None
    if quick and args.resume:
        raise HarnessError("--resume completes a run as it was planned (its study.toml): "
                           "leave out --implementations, --rounds and --processes")
    args.out = args.out or (Path(QUICK_OUT) if quick else DEFAULT_RESULTS)
    if args.resume:
        run_dir = results.find_run_dir(args.out, study.path_of(args.study).stem, args.run_id)
        plan = study.parse((run_dir / "study.toml").read_text(), str(run_dir / "study.toml"))
        args.run_id = run_dir.name
    else:
        plan = narrow.narrow(study.load(args.study), args.implementations, args.rounds, args.processes)
        if plan.narrowed:
            log(f"a quick run ({plan.narrowed}) into {args.out}: a try, never a machine's answer")
    if args.weights is None:  # training starts from the seeded initial weights, inference from trained ones
        args.weights = init_weights.DEFAULT_INIT if plan.mode == "train" else DEFAULT_WEIGHTS
    weights.read(args.weights)  # an unusable weights file stops here, not in every worker
    if args.devices:
        devices = split_list(args.devices)
        for device in devices:
            if device not in registry.DEVICES:
                raise HarnessError(f"--devices: unknown device {device!r}; "
                                   f"allowed: {', '.join(registry.DEVICES)}")
        plan = dataclasses.replace(plan, cells=tuple(c for c in plan.cells if c.device in devices))
        if not plan.cells:
            raise HarnessError(f"--devices {args.devices}: no cell of study {plan.name!r} left")
        absent = gpu.absent_reason() if "gpu" in devices else None
        if absent:
            raise Unavailable(f"--devices {args.devices}: {absent}")
    try:
        run_dir, states = runner.start_run(plan, args.out, args.run_id, args.resume, args.weights,
                                           log, args.lock_timeout)
    except KeyboardInterrupt:
        print("interrupted: finished rows are kept; complete the run with "
              f"python -m harness run {args.study} --resume" +
              (f" --run-id {args.run_id}" if args.run_id else ""), file=sys.stderr)
        return 130
    for line in summary.lines(states, plan):
        print(line)
    print(f"results: {run_dir}")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    """The study again in fresh processes, each cell held against the newest run of it on this
    machine (harness.report.claims.reproduce); the result is a row in RESULTS/reproduce/<run-id>/."""
    from harness.data import init_weights, weights
    from harness.machine import env
    from harness.measure import runner
    from harness.measure.plan import study
    from harness.measure.store import results, runfolder
    from harness.report.claims import drift, hosts, reproduce, rundata

    name = study.load(args.study).name
    identity = env.collect_identity()
    runs = rundata.load_runs(args.results)
    here = hosts.name_of(runs, identity) or hosts.base_name(identity)
    first = reproduce.reference(runs, name, hosts.key(identity))
    if first is None:
        raise HarnessError(f"no run of study {name!r} on this machine ({here}) in {args.results}: "
                           f"run `python -m harness run {args.study}` first, then reproduce it")
    plan = study.parse((first["dir"] / "study.toml").read_text(), str(first["dir"] / "study.toml"))
    if args.weights is None:
        args.weights = init_weights.DEFAULT_INIT if plan.mode == "train" else DEFAULT_WEIGHTS
    weights.read(args.weights)
    run_id = results.new_run_id()
    folder = results.create_run_dir(args.results, reproduce.FOLDER, run_id)
    log(f"reproducing {name}: a second run in fresh processes against {first['run_id']}")
    try:
        run_dir, _ = runner.start_run(plan, folder, run_id, weights=args.weights, report=log)
    except KeyboardInterrupt:
        print(f"interrupted: the second run's rows are kept in {folder}", file=sys.stderr)
        return 130
    earlier = {device: found for (machine, device), found in drift.of_machines(runs).items()
               if machine == here}  # the drift an earlier reproduce of this machine measured
    result = reproduce.compare(first["rows"], results.read_rows(run_dir), plan.baseline,
                               earlier)
    for line in reproduce.lines(result):
        print(line)
    write_atomic(folder / "env.json", (run_dir / "env.json").read_text())
    writer = results.RowWriter(folder, run_id)
    try:
        writer.write({"kind": "reproduce", "study": name, "reference_run": first["run_id"], "run": run_id,
                      "machine": here, "fingerprint": identity.get("fingerprint"),
                      "host_key": hosts.key(identity), **result})
    finally:
        writer.close()
    runfolder.mark_complete(folder, "finished")
    print(f"results: {folder}")
    return 0


def cmd_loc(args: argparse.Namespace) -> int:
    from harness.report.claims import loc

    rows = loc.count()
    path = loc.write_csv(rows, args.out)
    print("\n".join(loc_lines(loc.totals(rows))))
    print(f"wrote {path}")
    return 0


def loc_lines(totals: dict[str, int]) -> list[str]:
    """One line a package, its name and its count each in a column as wide as the longest."""
    name = max((len(package) for package in totals), default=0)
    count = max((len(f"{code:,}") for code in totals.values()), default=0)
    return [f"{package:<{name}}  {code:>{count},} code lines" for package, code in totals.items()]


def load_results(args: argparse.Namespace, every_run: bool = False) -> "rundata.ReportData":
    """The report's data (rundata.ReportData) from --results; every_run: every run's cells too."""
    from harness.report.claims import loc, rundata

    if not Path(args.results).is_dir():
        raise HarnessError(f"{args.results}: no results folder (run make run-all, or --results DIR)")
    return rundata.load_report(args.results, loc.current_rows(), every_run, getattr(args, "machine", None))


def cmd_figures(args: argparse.Namespace) -> int:
    from harness.report import figures

    for path in figures.draw_all(load_results(args), args.out, report=log):
        print(f"wrote {path}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """REPORT.md at --out, and DETAILS.md beside it."""
    from harness.report import details, markdown

    data = load_results(args, every_run=True)  # every committed run, for repeatability
    for line in markdown.stale_lines(data.frame, data.answer):
        log(f"WARNING: a number in the headline was measured on older code: {line}")
    for line in markdown.partial_lines(data.partial):
        log(f"WARNING: {line}")
    out = Path(args.out)
    if out.is_dir():  # a folder: REPORT.md and DETAILS.md inside it
        out = out / "REPORT.md"
    print(f"wrote {markdown.write(markdown.build(data), out)}")
    detail_path = out.with_name("DETAILS.md")
    print(f"wrote {markdown.write(details.build(data), detail_path)}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Median of each cell in run B over run A: how repeatable a study is."""
    from harness.measure.store import rowfile
    from harness.report.claims import rundata

    frames = []
    for run_dir in (args.run_a, args.run_b):
        runs = [r for r in rundata.load_runs(Path(run_dir).parent.parent)
                if r["dir"].resolve() == Path(run_dir).resolve()]
        if not runs and rowfile.has_rows(Path(run_dir)):
            raise HarnessError(f"{run_dir}: a partial run (no completion marker: killed, or still running); "
                               "finish it with `python -m harness run STUDY --resume --run-id ID` first")
        if not runs:
            raise HarnessError(f"{run_dir}: not a run folder (expected <out>/<study>/<run-id>/results.jsonl, "
                               "or results.jsonl.gz once complete)")
        frames.append(rundata.cells_frame(runs).set_index("cell_id"))
    a, b = frames
    print(f"{'cell':<40} {'median A':>10} {'median B':>10} {'B / A':>7}  flags")
    worst = 0.0
    for cell in a.index.intersection(b.index):
        ra, rb = a.loc[cell], b.loc[cell]
        if ra["status"] != "ok" or rb["status"] != "ok":
            continue
        r = rb["median_ms"] / ra["median_ms"]
        noisy = bool(ra["noisy"] or rb["noisy"])
        if not noisy:
            worst = max(worst, abs(r - 1))
        print(f"{cell:<40} {ra['median_ms']:>9.4f}m {rb['median_ms']:>9.4f}m {r:>7.3f}  "
              f"{'noisy' if noisy else ''}")
    print(f"largest change among cells not flagged noisy: {100 * worst:.1f}%")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from harness.explain import ladder

    rows, skipped = [], []
    for target in split_list(args.targets):
        log(f"explaining {target} on {args.device} ({args.calls} calls per step, {args.rounds} rounds)")
        try:
            row = ladder.explain(target, args.device, args.calls, args.rounds, args.weights)
        except Unavailable as exc:  # its framework is not here: said, and the other targets still run
            log(f"{target}: not explained here: {exc}")
            skipped.append(target)
            continue
        print("\n".join(ladder.table(row)) + "\n")
        rows.append(row)
    if args.out and rows:
        print(f"results: {ladder.write(rows, args.out)}")
    if skipped:
        log(f"could not run here: {', '.join(skipped)}")
    return 3 if skipped else 0


def cmd_gpu_explain(args: argparse.Namespace) -> int:
    """The CUDA kernels' static work, registers and spills (NVRTC, no GPU); without NVRTC exit 3."""
    from harness.explain import gpu_static

    found = gpu_static.rows(args.arch)
    print("\n".join(gpu_static.lines(found)))
    if args.out:
        print(f"results: {gpu_static.write(found, args.out)}")
    return 0


def cmd_arithmetic(args: argparse.Namespace) -> int:
    """The core's peak and the C call by layer against it; a machine where the C level cannot build
    gets a row saying why (as a skipped cell does), so `make run-all` goes on."""
    from harness.explain import c_layers

    if args.calls < 1 or args.rounds < 1 or args.processes < 1:
        raise HarnessError(f"--calls, --rounds and --processes: expected positive numbers, "
                           f"found {args.calls}, {args.rounds} and {args.processes}")
    # the C level runs on the calling thread alone: no thread settings to apply (nor to leak)
    log(f"measuring this core's multiply-add peak and the C call by layer "
        f"({args.processes} processes, each {args.rounds} rounds of {args.calls} calls)")
    try:
        row = c_layers.in_processes("fused", args.calls, args.rounds, args.weights, args.processes)
        print("\n".join(c_layers.lines(row)) + "\n")
        if row["contended"]:
            log(f"WARNING: the machine was busy while it measured ({row['contended']}): run it again")
    except HarnessError as exc:  # Unavailable (no compiler) above all: the reason and the fix
        log(f"arithmetic: {exc}")
        row = {"kind": c_layers.STUDY, "implementation": c_layers.LEVEL, "variant": "fused",
               "device": "cpu", "status": "unavailable", "reason": str(exc)}
    if args.out:
        print(f"results: {c_layers.write([row], args.out)}")
    return 0


def needs_gpu_and_calls(command: str, calls: int) -> None:
    """A GPU command's checks before it starts: Unavailable without a GPU, --calls positive."""
    from harness.machine import gpu

    absent = gpu.absent_reason()
    if absent:
        raise Unavailable(f"{command} needs a GPU: {absent}")
    if calls < 1:
        raise HarnessError(f"--calls: expected a positive number, found {calls}")


def each_on_its_own(items: list[str], measure: Callable[[str], dict], failed: Callable[[str, str], dict],
                    show: Callable[[dict], list[str]]) -> list[dict]:
    """measure(item) for each item in turn; one that cannot run (HarnessError, Unavailable too) is
    failed(item, reason), a row saying why, and the others still run. show(row): its lines."""
    rows = []
    for item in items:
        try:
            row = measure(item)
            print("\n".join(show(row)) + "\n")
        except HarnessError as exc:
            log(f"{item}: {exc}")
            row = failed(item, str(exc))
        rows.append(row)
    return rows


def cmd_kernels(args: argparse.Namespace) -> int:
    """Each target on its own: one that cannot run is a row saying why, the others still run."""
    from harness.explain import kernels

    needs_gpu_and_calls("kernels", args.calls)

    def measure(target: str) -> dict:
        log(f"profiling {target} on {args.device} ({args.calls} calls of {args.batch} images)")
        return {**kernels.profile(target, args.device, args.calls, args.weights, args.batch), "status": "ok"}

    def failed(target: str, reason: str) -> dict:
        name, _, variant = target.partition("/")
        return {"kind": "kernels", "implementation": name, "variant": variant or "-", "device": args.device,
                "batch": args.batch, "status": "failed", "reason": reason}

    rows = each_on_its_own(split_list(args.targets), measure, failed, kernels.table)
    if args.out:
        print(f"results: {kernels.write(rows, args.out)}")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


def cmd_kernel_stages(args: argparse.Namespace) -> int:
    """Per dtype a row of the cluster kernel's stages and one of the resident call attributed; a dtype
    that cannot run (a GPU before sm_90) is a row saying why."""
    from harness.explain import kernel_stages

    needs_gpu_and_calls("kernel-stages", args.calls)

    def measure(dtype: str) -> dict:
        log(f"stamping {kernel_stages.KERNEL}'s stages ({args.calls} calls, {dtype})")
        return kernel_stages.row(args.weights, args.calls, dtype)

    def measure_resident(item: str) -> dict:  # "variant dtype"
        variant, dtype = item.split()
        log(f"attributing cuda/{variant}'s call ({args.calls} calls, {dtype})")
        return kernel_stages.resident_row(args.weights, args.calls, dtype, variant)

    def resident_failed(item: str, reason: str) -> dict:
        variant, dtype = item.split()
        return kernel_stages.resident_failed(dtype, variant, reason)

    rows = each_on_its_own(split_list(args.dtypes), measure, kernel_stages.failed, kernel_stages.lines)
    items = [f"{v} {d}" for v in kernel_stages.RESIDENT_KERNELS for d in split_list(args.dtypes)]
    rows += each_on_its_own(items, measure_resident, resident_failed, kernel_stages.resident_lines)
    if args.out:
        print(f"results: {kernel_stages.write(rows, args.out)}")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


def cmd_gpu_floor(args: argparse.Namespace) -> int:
    """One row of probes; a GPU where they cannot run gets a row saying why."""
    from harness.explain import gpu_floor

    needs_gpu_and_calls("gpu-floor", args.calls)
    rows = each_on_its_own(["probes"], lambda _: gpu_floor.measure(args.calls),
                           lambda _, reason: gpu_floor.failed(reason), gpu_floor.lines)
    if args.out:
        print(f"results: {gpu_floor.write(rows, args.out)}")
    return 0 if rows[0]["status"] == "ok" else 1


def cmd_crosscheck(args: argparse.Namespace) -> int:
    from harness.check import crosscheck
    from harness.machine import env

    procenv.apply(procenv.settings(1, 1, "cpu"))  # one thread, as in every study
    result = crosscheck.crosscheck(args.implementation, args.calls, args.rounds, args.weights, log)
    system = env.collect_system()
    result["env"] = {k: system[k] for k in ("hostname", "cpu", "cpus_usable", "loadavg", "python")}
    low, high = result["ratio_ci95"]
    print(f"harness / timeit, mean per call: {result['ratio_median']:.3f} "
          f"[95% CI {low:.3f}-{high:.3f}] over {result['rounds']} rounds ({args.implementation})")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """The report's levels (registry.levels: bottom rung first), on one device or all, one line; --explain:
    their explain targets (level/variant)."""
    if args.explain and args.device is None:
        raise HarnessError("list --explain: which device's targets? add --device cpu or --device gpu")
    names = registry.targets("explain", args.device) if args.explain else registry.on_device(args.device)
    print(",".join(names))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from harness.machine import doctor

    names = split_list(args.implementations) if args.implementations else None
    return doctor.report(args.weights, names)


def cmd_gpu_study(args: argparse.Namespace) -> int:
    from harness.campaign import gpu_study
    from harness.machine import gpu

    levels = gpu_study.check_levels(args.levels)  # a typo is said before the GPU is looked for
    if args.plan:  # no GPU needed: the steps, in order, with their last measured seconds
        budget = args.budget_s or gpu_study.BUDGET_S["quick" if args.quick else "full"]
        todo = gpu_study.select(gpu_study.plan(Path(args.out or "."), "plan", args.quick, write=False,
                                               levels=levels), args.steps)
        print(f"gpu-study{' --levels ' + ','.join(levels) if levels else ''}: the steps in order, "
              f"budget {budget:g} s (seconds from {DEFAULT_RESULTS / 'campaigns'})")
        measured = gpu_study.measured_seconds(DEFAULT_RESULTS / "campaigns", levels)
        print("\n".join(gpu_study.step_plan(todo, measured, budget)))
        return 0
    if args.out is None:
        raise HarnessError("gpu-study: --out DIR is needed (a new folder for the campaign's results)")
    absent = gpu.absent_reason()
    if absent:
        raise Unavailable(f"gpu-study needs a GPU: {absent}")
    manifest, archive = gpu_study.gpu_study(args.out, args.quick, args.steps, args.budget_s, say=log,
                                            levels=levels)
    failed = [s["name"] for s in manifest["steps"] if s["status"] != "ok" and not s.get("planned_out")]
    print(f"manifest: {Path(args.out) / 'manifest.json'}")
    print(f"archive: {archive} ({archive.stat().st_size / 2**20:.1f} MiB)")
    if failed:
        log(f"steps not ok: {', '.join(failed)} (see the manifest; the others' results are in the archive)")
    return 1 if failed else 0


def cmd_campaign(args: argparse.Namespace) -> int:
    from harness.campaign import slurm

    quick = tuple(part for flag in ("implementations", "rounds", "processes")
                  if getattr(args, flag) is not None for part in (f"--{flag}", str(getattr(args, flag))))
    options = slurm.Options(partition=args.partition, account=args.account, qos=args.qos, gres=args.gres,
                            time=args.time, quick=quick)
    return slurm.submit(args.out, args.constraint, args.gpu_constraint,
                        args.studies or list(slurm.DEFAULT_STUDIES), options, args.into,
                        args.report, say=log)


def cmd_campaign_job(args: argparse.Namespace) -> int:
    from harness.campaign import slurm

    return slurm.job(args.out, args.type, say=log)


def cmd_campaign_merge(args: argparse.Namespace) -> int:
    from harness.campaign import slurm

    return slurm.merge(args.out, args.into, args.report, say=log)


def cmd_import_results(args: argparse.Namespace) -> int:
    from harness.campaign import archive

    archive.import_results(args.archive, args.into, say=print)
    return 0


def cmd_lab_grade(args: argparse.Namespace) -> int:
    from harness.lab.term import commands

    return commands.lab_grade(
        str(args.lab), args.submissions, args.out, log, resume=args.resume,
        only=split_list(args.only) if args.only else None, no_report=args.no_report, weights=args.weights,
        slurm=slurm_options(args) if args.slurm else None, dry_run=args.dry_run, no_sandbox=args.no_sandbox,
        lock_timeout=args.lock_timeout)


def slurm_options(args: argparse.Namespace) -> "Options":
    from harness.lab.judge import slurm

    return slurm.Options(partition=args.partition, account=args.account, qos=args.qos,
                         constraint=args.constraint, gres=args.gres, time=args.time,
                         cpus_per_task=args.cpus_per_task, max_parallel=args.max_parallel,
                         per_task=args.per_task)


def cmd_lab_bench(args: argparse.Namespace) -> int:
    from harness.lab.term import bench

    return bench.report(args.lab, args.students, args.out, args.slurm, args.per_task)


def cmd_lab_task(args: argparse.Namespace) -> int:
    from harness.lab.judge import slurm_task

    return slurm_task.task(args.out, args.index, args.submissions, args.weights, args.no_sandbox, log,
                           args.lock_timeout)


def cmd_lab_regrade(args: argparse.Namespace) -> int:
    from harness.lab.term import commands

    return commands.lab_regrade(args.out, split_list(args.only) if args.only else None, args.submissions,
                                args.weights, args.no_sandbox, log)


def cmd_lab_report(args: argparse.Namespace) -> int:
    from harness.lab.term import commands

    return commands.lab_report(args.out)


def cmd_lab_check(args: argparse.Namespace) -> int:
    from harness.lab.term import commands

    return commands.lab_check(str(args.lab), args.path, args.weights, log, args.lock_timeout)


def cmd_lab_merge(args: argparse.Namespace) -> int:
    from harness.lab.term import commands

    return commands.lab_merge(args.out, args.submissions, args.job, log)


def cmd_lab_kit(args: argparse.Namespace) -> int:
    from harness.lab.term import commands

    return commands.lab_kit(str(args.lab), args.out, args.weights)


def cmd_lab_collect(args: argparse.Namespace) -> int:
    from harness.lab.term import commands

    return commands.lab_collect(args.source, args.out, args.times, log)


def cmd_lab_export(args: argparse.Namespace) -> int:
    from harness.lab.term import commands

    return commands.lab_export(args.out, args.roster, args.format, args.target, args.force, args.column,
                               args.allow_ungraded)


def cmd_lab_publish(args: argparse.Namespace) -> int:
    from harness.lab.term import commands

    return commands.lab_publish(args.out, args.public_dir, args.submissions, log)


def cmd_lab_similarity(args: argparse.Namespace) -> int:
    from harness.lab.term import commands

    return commands.lab_similarity(args.out, args.submissions, args.threshold, args.starter, log)
