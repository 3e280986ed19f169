"""The check wing's commands: `verify` and `verify-train` (every level's answers and SGD steps against
the NumPy oracle), `crosscheck` (the harness's timer against timeit)."""

import argparse
import json
import os
from typing import Any

from harness import registry
from harness.command import (
    Command,
    calls,
    device,
    implementations,
    log,
    option,
    rounds,
    split_list,
    weights,
)
from harness.errors import HarnessError
from harness.machine import procenv
from harness.machine.files import write_atomic


def json_rows(help: str) -> argparse.ArgumentParser:
    """--json FILE, or a bare --json for stdout."""
    return option("--json", nargs="?", const="-", default=None, metavar="FILE", help=help)


def write_json(target: str, data: dict[str, Any]) -> None:
    """--json FILE (its folder created), or a bare --json: stdout."""
    text = json.dumps(data, indent=2)
    if target == "-":
        print(text)
    else:
        write_atomic(target, text + "\n")


def verify_commands() -> list[Command]:
    """`verify`, `verify-train`: in the order `python -m harness --help` lists them."""
    return [
        Command(
            "verify", "check every implementation against the NumPy reference", cmd_verify,
            implementations(None, "comma-separated names (a level, or level/variant) or module:Class "
                                  "paths (default: every level that runs on --device, as `list --device` "
                                  "prints them)"),
            device(), weights(),
            json_rows("write the rows as JSON to FILE (or stdout when no FILE)"),
            option("--child-timeout-s", type=float, default=None, metavar="S",
                   help="each child process's limit (on the GPU a child checks one level in one dtype; "
                        "default 150 s there, 900 s on the CPU); one past it: its variant `hung`"),
            option("--limit", type=int, default=None, help="only the first N test images"),
            option("--dtypes", default="float32",
                   help="comma-separated: float32, float64 (each level checks those it offers)"),
            option("--threads", type=int, default=os.cpu_count() or 1)),
        Command(
            "verify-train", "check every level's SGD steps against the NumPy oracle", cmd_verify_train,
            implementations(None, "comma-separated names or module:Class paths (default: every level "
                                  "with a trainer that runs on --device)"),
            device(), weights(None, "initial weights (default weights/lenet5_init.weights.h5)"),
            option("--steps", type=int, default=20, help="SGD steps K (default 20)"),
            option("--batch", type=int, default=32, help="images per step B (default 32)"),
            option("--dtype", choices=("float32", "float64"), default="float32"),
            json_rows("write the rows (with every step's numbers) as JSON to FILE (or stdout)"),
            option("--child-timeout-s", type=float, default=None, metavar="S",
                   help="each child process's limit (a family of levels, every training variant; "
                        "default 900 s); one past it: its variant `hung`"),
            option("--threads", type=int, default=1,
                   help="threads per level (default 1, as in the studies: one reduction order)"))]


def crosscheck_command() -> Command:
    return Command("crosscheck", "time one implementation with the harness and with timeit", cmd_crosscheck,
                   option("--implementation", default="numpy"),
                   calls("calls per round and timer"), rounds(), weights(),
                   option("--json", default=None, metavar="FILE", help="write the result as JSON"))


def cmd_verify(args: argparse.Namespace) -> int:
    # the oracle here and the levels' children with one thread count: set before NumPy loads (its
    # OpenBLAS reads it once), else a caller's setting makes the two sum in different orders
    procenv.apply(procenv.settings(args.threads, 1, args.device))
    from harness.check import verify
    from harness.data import weights as weights_file

    names = split_list(args.implementations) if args.implementations else registry.on_device(args.device)
    verify.require_known(names, args.device)
    weights_file.read(args.weights)  # an unusable file fails here, in one line, before any work
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
                         progress=log, dtypes=dtypes, on_row=save if args.json != "-" else None,
                         timeout_s=args.child_timeout_s)
    code = verify.exit_code(rows)
    save(rows, code)
    verdict = {0: "all implementations agree", 1: "DISAGREEMENT: see FAIL, hung and fault rows",
               3: "some implementations could not run here (see reasons)"}[code]
    log(verdict)
    return code


def cmd_verify_train(args: argparse.Namespace) -> int:
    procenv.apply(procenv.settings(args.threads, 1, args.device))  # before NumPy loads, as verify
    from harness.check import train_verify, verify
    from harness.data import init_weights
    from harness.data import weights as weights_file

    names = split_list(args.implementations) if args.implementations else registry.trainers(args.device)
    verify.require_known(names)
    for field, value in (("--steps", args.steps), ("--batch", args.batch)):
        if value < 1:
            raise HarnessError(f"{field}: expected a positive number, found {value}")
    weights_path = args.weights or init_weights.DEFAULT_INIT
    weights_file.read(weights_path)  # an unusable file fails here, in one line, before any work
    log(train_verify.HEADER)
    rows = train_verify.verify_train(names, args.device, weights_path, args.steps, args.batch,
                                     args.dtype, args.data_dir, progress=log, timeout_s=args.child_timeout_s)
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
        write_atomic(args.json, json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0
