"""The report wing's commands: `reproduce` (a study run again, held against its newest run on this
machine), the report's input `loc` and its output `report` (harness/figures/cli.py draws `figures`
between them in `--help`)."""

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness import DEFAULT_LOC_CSV, DEFAULT_REPORT, DEFAULT_RESULTS, DEFAULT_WEIGHTS
from harness.command import Command, command, log, option, out, weights
from harness.errors import HarnessError
from harness.machine.files import write_atomic

if TYPE_CHECKING:  # the report's modules are imported by the commands that need them
    from harness.report.claims import rundata


def machine() -> argparse.ArgumentParser:
    return option("--machine", default=None,
                  help="the machine whose runs answer, as the report labels it "
                       "(e.g. 'vm: AMD EPYC, AVX-512, 2 cores'; "
                       "default: the newest run's)")


def results() -> argparse.ArgumentParser:
    return option("--results", type=Path, default=DEFAULT_RESULTS)


def input_commands() -> list[Command]:
    """`reproduce` and `loc`, in the order `python -m harness --help` lists them."""
    return [
        command(
            "reproduce", "run a study again in fresh processes and say how much of its newest run "
                         "on this machine it reproduces", cmd_reproduce,
            option("study", help="a name in studies/ (api_levels, smoke, ...) or a .toml path"),
            option("--results", type=Path, default=DEFAULT_RESULTS,
                   help="where the newest run is read and the result written (default reports/results)"),
            weights(None, "default: the trained weights; a train-mode study: the seeded initial weights")),
        command(
            "loc", "count code lines per implementation package (pygount)", cmd_loc,
            out(DEFAULT_LOC_CSV))]


def report_command() -> Command:
    return command(
        "report", "write REPORT.md (and DETAILS.md beside it) from the result files", cmd_report,
        results(), out(DEFAULT_REPORT, "REPORT.md's path, or a folder to write REPORT.md and DETAILS.md "
                                       "into (default reports/REPORT.md)"), machine())


def cmd_reproduce(args: argparse.Namespace) -> int:
    """The study again in fresh processes, each cell held against the newest run of it on this
    machine (harness.report.claims.reproduce); the result is a row in RESULTS/reproduce/<run-id>/."""
    from harness.data import init_weights
    from harness.data import weights as weights_file
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
    weights_file.read(args.weights)
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
