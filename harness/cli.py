"""`python -m harness COMMAND`: the one place that turns errors into `ERROR: ...` and an exit code.

Exit codes: 0 ok; 1 a check failed (verify disagreement); 2 bad input or environment
(`ERROR:` line); 3 something asked for cannot run here (no GPU, library missing); 130 Ctrl-C.

Each wing declares its own commands (harness.command.Command: name, help, options, function) in
its cli.py; this module only assembles them into one parser, in the order `--help` lists them.
"""

import argparse
import errno
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from harness.campaign import cli as campaign
from harness.check import cli as check
from harness.command import Command
from harness.errors import HarnessError, exit_code
from harness.explain import cli as explain
from harness.figures import cli as figures
from harness.lab.term import cli as lab
from harness.machine import doctor as machine
from harness.machine.files import disk_error
from harness.measure import cli as measure
from harness.report import cli as report
from harness.reproduce import cli as reproduce

Subparsers = argparse._SubParsersAction  # what add_subparsers returns (argparse names it privately)


def every_command() -> list[Command]:
    """Every wing's commands, in the order `python -m harness --help` lists them."""
    return [*check.verify_commands(), *measure.commands(), *reproduce.commands(),
            report.loc_command(), *figures.commands(), report.report_command(), *machine.commands(),
            *explain.commands(), check.crosscheck_command(), *lab.commands(), *campaign.commands()]


def add(sub: Subparsers, command: Command) -> None:
    """A command run by its function, or a group whose commands are chosen by the next word."""
    parser = sub.add_parser(command.name, help=command.help, parents=list(command.options))
    if command.commands:
        group = parser.add_subparsers(dest=f"{command.name}_command", required=True)
        for each in command.commands:
            add(group, each)
    else:
        parser.set_defaults(func=command.run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None,
                        help="MNIST folder (default: $LENET_DATA_DIR or data/mnist)")
    parser.add_argument("--gpu", default=None, metavar="N",
                        help="the GPU to use on a shared server (sets CUDA_VISIBLE_DEVICES)")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in every_command():
        add(sub, command)
    return parser


def on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.data_dir:
        os.environ["LENET_DATA_DIR"] = str(args.data_dir)  # workers inherit it
    if args.gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(args.gpu)
    signal.signal(signal.SIGTERM, on_sigterm)  # a scheduler's kill: clean up like Ctrl-C
    # A process started in the background by a non-interactive shell (`cmd &`) inherits SIGINT
    # ignored; `kill -INT` must still stop a run cleanly, keeping its rows.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return args.func(args)
    except HarnessError as exc:  # Unavailable too
        print(f"ERROR: {exc}", file=sys.stderr)
        return exit_code(exc)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
        print(f"ERROR: {disk_error(Path(exc.filename or '?'), exc)}; files written whole keep their last "
              "version, and every complete row is kept", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
