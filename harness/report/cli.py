"""The report wing's commands: the report's input `loc` and its output `report` (`--help` lists
harness/figures/cli.py's `figures` between them)."""

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from harness import DEFAULT_LOC_CSV, DEFAULT_REPORT, DEFAULT_RESULTS
from harness.command import Command, log, option, out
from harness.errors import HarnessError

if TYPE_CHECKING:  # the report's modules are imported by the commands that need them
    from harness.report.claims import rundata


def machine() -> argparse.ArgumentParser:
    return option("--machine", default=None,
                  help="the machine whose runs answer, as the report labels it "
                       "(e.g. 'vm: AMD EPYC, AVX-512, 2 cores'; "
                       "default: the newest run's)")


def results() -> argparse.ArgumentParser:
    return option("--results", type=Path, default=DEFAULT_RESULTS)


def loc_command() -> Command:
    return Command("loc", "count code lines per implementation package (pygount)", cmd_loc,
                   out(DEFAULT_LOC_CSV))


def report_command() -> Command:
    return Command(
        "report", "write REPORT.md (and DETAILS.md beside it) from the result files", cmd_report,
        results(), out(DEFAULT_REPORT, "REPORT.md's path, or a folder to write REPORT.md and DETAILS.md "
                                       "into (default reports/REPORT.md)"), machine())


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
    """REPORT.md at --out, DETAILS.md beside it, and every other machine's page in machines/ beside them."""
    from harness.machine.files import write_atomic
    from harness.report import details, markdown
    from harness.report.sections import machine_pages

    data = load_results(args, every_run=True)  # every committed run, for repeatability
    for line in markdown.stale_lines(data.frame, data.answer):
        log(f"WARNING: a number in the headline was measured on older code: {line}")
    for line in markdown.partial_lines(data.partial):
        log(f"WARNING: {line}")
    out = Path(args.out)
    if out.is_dir():  # a folder: REPORT.md and DETAILS.md inside it
        out = out / "REPORT.md"
    # each page whole or not at all (a full disk or a kill keeps the last one)
    print(f"wrote {write_atomic(out, markdown.build(data))}")
    print(f"wrote {write_atomic(out.with_name('DETAILS.md'), details.build(data))}")
    pages = machine_pages.write(machine_pages.pages(data), out.parent / machine_pages.FOLDER)
    print(f"wrote {len(pages)} machine pages in {out.parent / machine_pages.FOLDER}")
    return 0
