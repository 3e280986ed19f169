"""The figures wing's command: `figures`, every figure drawn from the report's data."""

import argparse

from harness import DEFAULT_FIGURES
from harness.command import Command, log, out
from harness.report.cli import load_results, machine, results


def commands() -> list[Command]:
    return [Command("figures", "draw the figures from the result files", cmd_figures,
                    results(), out(DEFAULT_FIGURES), machine())]


def cmd_figures(args: argparse.Namespace) -> int:
    from harness.figures import every

    for path in every.draw_all(load_results(args), args.out, report=log):
        print(f"wrote {path}")
    return 0
