"""A command as a wing declares it, and what several wings' commands share.

Each wing lists its commands in its own cli.py (harness/check/cli.py, harness/lab/term/cli.py, ...;
the machine wing's in harness/machine/doctor.py); harness/cli.py only assembles them into one
parser. A command's function imports its wing's work inside itself, so `--help` and the light
commands start fast and no command imports a framework it does not use.

    Command(name, help, func, *options)     a command: its options (parent parsers) in `--help`'s order;
                                            func a function, or "module:function", imported when it runs
    Command(name, help, commands=(...))     a group of commands (`lab grade`, `lab report`, ...)
    option(*names, **kwargs)                one argument as a parent parser, for a command's list
    weights(), implementations(), device(), out(), calls(), rounds(), lock_timeout(), slurm_options()
                                            options several commands take, each declared once here;
                                            the arguments are what the commands set differently
    log(line), split_list(text)             progress to stderr; "a, b," -> ["a", "b"]
"""

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import DEFAULT_WEIGHTS, registry

Run = Callable[[argparse.Namespace], int]  # a command's function: the parsed arguments -> the exit code


class Command:
    """One command of `python -m harness`: run by `func` with `options` (parent parsers, in `--help`'s
    order), or (a group) by one of `commands`, chosen by the word after its name. A func named as
    "module:function" is imported only when its command runs, so its module stays out of every other
    command's start."""

    def __init__(self, name: str, help: str, func: Run | str | None = None, *options: argparse.ArgumentParser,
                 commands: tuple["Command", ...] = ()) -> None:
        self.name, self.help, self.func, self.options, self.commands = name, help, func, options, commands

    def run(self, args: argparse.Namespace) -> int:
        """The command's function on the parsed arguments, imported first where it is named."""
        func = self.func
        if isinstance(func, str):
            module, _, name = func.partition(":")
            func = getattr(importlib.import_module(module), name)
        assert func is not None, f"{self.name} is a group: one of its commands runs"
        return func(args)


def option(*names: str, **kwargs: Any) -> argparse.ArgumentParser:
    """One argument (an option or a positional) as a parent parser, for a command's list."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(*names, **kwargs)
    return parent


def log(line: str) -> None:
    """Progress and messages go to stderr, so stdout carries only results (tables, JSON)."""
    print(line, file=sys.stderr, flush=True)


def split_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


# The shared options: each declared once; the arguments are what the commands set differently.

def weights(default: Path | None = DEFAULT_WEIGHTS, help: str | None = None) -> argparse.ArgumentParser:
    return option("--weights", type=Path, default=default, help=help)


def implementations(default: str | None, help: str) -> argparse.ArgumentParser:
    return option("--implementations", default=default, help=help)


def device(choices: tuple[str, ...] = registry.DEVICES, default: str = "cpu") -> argparse.ArgumentParser:
    return option("--device", choices=choices, default=default)


def out(default: Path | None = None, help: str | None = None,
        required: bool = False) -> argparse.ArgumentParser:
    return option("--out", type=Path, default=default, required=required, help=help)


def calls(help: str) -> argparse.ArgumentParser:
    return option("--calls", type=int, default=200, help=help)


def rounds() -> argparse.ArgumentParser:
    return option("--rounds", type=int, default=10)


def lock_timeout(flagged: str) -> argparse.ArgumentParser:
    return option("--lock-timeout", type=float, default=None, metavar="S",
                  help=f"wait at most S seconds for another run's GPU lock, then measure anyway "
                       f"with {flagged} flagged contended (default: wait)")


def slurm_options(constraint: str, many: bool = False) -> list[argparse.ArgumentParser]:
    """What every Slurm job asks of the cluster, passed through to sbatch (lab grade, campaign)."""
    return [option("--partition", default=None, help="Slurm partition (default: the cluster's default)"),
            option("--account", default=None, help="Slurm account to charge"),
            option("--qos", default=None, help="Slurm quality of service"),
            option("--constraint", default=[] if many else None, action="append" if many else "store",
                   help=constraint),
            option("--gres", default=None, help="Slurm generic resources per job, e.g. gpu:1"),
            option("--time", default=None, help="Slurm time limit per job, minutes or [D-]HH:MM:SS "
                   "(default: from the lab's limits, or the study's size)")]
