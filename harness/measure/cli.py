"""The measure wing's commands: `run`, one study (studies/NAME.toml) into a results folder; `upgrade-results`,
the saved summaries of a results folder's cell rows brought to the current version."""

import argparse
import os
import sys
import tempfile
from pathlib import Path

from harness import DEFAULT_RESULTS, DEFAULT_WEIGHTS, registry
from harness.command import Command, lock_timeout, log, option, out, split_list, weights
from harness.errors import HarnessError, Unavailable

# A quick run's results (run --implementations/--rounds/--processes) go here unless --out names a folder:
# a try is kept out of reports/results (per user: /tmp is shared)
QUICK_OUT = os.path.join(tempfile.gettempdir(), f"lenet-quick-{os.getuid()}")


def commands() -> list[Command]:
    return [Command(
        "run", "run a study (studies/NAME.toml or a path)", cmd_run,
        option("study", help="a name in studies/ (api_levels, overhead, ...) or a .toml path"),
        option("--devices", default=None, help="only these devices, e.g. cpu or cpu,gpu"),
        option("--implementations", type=split_list, default=None, metavar="NAMES",
               help="a quick run: only the cells of these levels (a level without one gets its first "
                    "variant); with --rounds or --processes, never a machine's answer in the report"),
        option("--rounds", type=int, default=None, help="a quick run: rounds in each process"),
        option("--processes", type=int, default=None, help="a quick run: fresh processes per cell"),
        out(None, "results folder (default reports/results; a quick run: "
                  f"{QUICK_OUT}, unless --out names one)"),
        option("--resume", action="store_true",
               help="complete an interrupted run (the newest, or --run-id)"),
        option("--run-id", default=None, help="name of the run folder"),
        weights(None, "default: the trained weights; a train-mode study: the seeded initial weights"),
        lock_timeout("the cells")),
        Command("upgrade-results", "give the cell rows of every complete run the current summary "
                "(stats.SUMMARY_VERSION), computed once and saved, so the report reads it",
                cmd_upgrade_results,
                option("--results", type=Path, default=DEFAULT_RESULTS, help="results folder (default "
                       "reports/results)"))]


def cmd_run(args: argparse.Namespace) -> int:
    import dataclasses

    from harness.data import init_weights
    from harness.data import weights as weights_file
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
    weights_file.read(args.weights)  # an unusable weights file stops here, not in every worker
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


def cmd_upgrade_results(args: argparse.Namespace) -> int:
    from harness.measure.store import upgrade

    if not Path(args.results).is_dir():
        raise HarnessError(f"{args.results}: no results folder")
    done = upgrade.upgrade(args.results)
    for run_dir, count in done:
        if count:
            print(f"{run_dir}: {count} cell rows given the current summary")
    print(f"{sum(count > 0 for _, count in done)} of {len(done)} complete runs upgraded, "
          f"{sum(count for _, count in done)} cell rows")
    return 0
