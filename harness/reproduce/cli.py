"""The reproduce wing's command: `reproduce`, a study run again in fresh processes and held against
its newest run on this machine."""

import argparse
import sys
from pathlib import Path

from harness import DEFAULT_RESULTS, DEFAULT_WEIGHTS
from harness.command import Command, log, option, weights
from harness.errors import HarnessError
from harness.machine.files import write_atomic


def commands() -> list[Command]:
    return [Command(
        "reproduce", "run a study again in fresh processes and say how much of its newest run "
                     "on this machine it reproduces", cmd_reproduce,
        option("study", help="a name in studies/ (api_levels, smoke, ...) or a .toml path"),
        option("--results", type=Path, default=DEFAULT_RESULTS,
               help="where the newest run is read and the result written (default reports/results)"),
        weights(None, "default: the trained weights; a train-mode study: the seeded initial weights"))]


def cmd_reproduce(args: argparse.Namespace) -> int:
    """The study again in fresh processes, each cell held against the newest run of it on this
    machine (harness.reproduce.compare); the result is a row in RESULTS/reproduce/<run-id>/."""
    from harness.data import init_weights
    from harness.data import weights as weights_file
    from harness.machine import env
    from harness.measure import runner
    from harness.measure.plan import study
    from harness.measure.store import results, runfolder
    from harness.report.claims import hosts, rundata
    from harness.report.claims.reproduce import FOLDER
    from harness.reproduce import compare

    name = study.load(args.study).name
    identity = env.collect_identity()
    runs = rundata.load_runs(args.results)
    here = hosts.name_of(runs, identity) or hosts.base_name(identity)
    first = compare.reference(runs, name, hosts.key(identity))
    _newest, frame = rundata.load(args.results)
    if first is None:
        raise HarnessError(f"no run of study {name!r} on this machine ({here}) in {args.results}: "
                           f"run `python -m harness run {args.study}` first, then reproduce it")
    plan = study.parse((first["dir"] / "study.toml").read_text(), str(first["dir"] / "study.toml"))
    if args.weights is None:
        args.weights = init_weights.DEFAULT_INIT if plan.mode == "train" else DEFAULT_WEIGHTS
    weights_file.read(args.weights)
    run_id = results.new_run_id()
    folder = results.create_run_dir(args.results, FOLDER, run_id)
    log(f"reproducing {name}: a second run in fresh processes against {first['run_id']}")
    try:
        run_dir, _ = runner.start_run(plan, folder, run_id, weights=args.weights, report=log)
    except KeyboardInterrupt:
        print(f"interrupted: the second run's rows are kept in {folder}", file=sys.stderr)
        return 130
    # the intervals the report printed for the reference's cells: every earlier run of the same code
    printed = compare.printed_intervals(frame, name, first["run_id"], plan.baseline)
    result = compare.compare(first["rows"], results.read_rows(run_dir), plan.baseline, printed)
    for line in compare.lines(result):
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
