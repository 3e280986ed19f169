"""`python -m harness COMMAND`: the one place that turns errors into `ERROR: ...` and an exit code.

Exit codes: 0 ok; 1 a check failed (verify disagreement); 2 bad input or environment
(`ERROR:` line); 3 something asked for cannot run here (no GPU, library missing); 130 Ctrl-C.
"""

import argparse
import os
import signal
import sys
from pathlib import Path

from harness import (
    DEFAULT_FIGURES,
    DEFAULT_LOC_CSV,
    DEFAULT_REPORT,
    DEFAULT_RESULTS,
    DEFAULT_WEIGHTS,
    commands,
    registry,
)
from harness.errors import HarnessError, Unavailable


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None,
                        help="MNIST folder (default: $LENET_DATA_DIR or data/mnist)")
    parser.add_argument("--gpu", default=None, metavar="N",
                        help="the GPU to use on a shared server (sets CUDA_VISIBLE_DEVICES)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("verify", help="check every implementation against the NumPy reference")
    p.add_argument("--implementations", default="numpy,tf,keras",
                   help="comma-separated names or module:Class paths (default: numpy,tf,keras)")
    p.add_argument("--device", choices=registry.DEVICES, default="cpu")
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                   help="write the rows as JSON to FILE (or stdout when no FILE)")
    p.add_argument("--limit", type=int, default=None, help="only the first N test images")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.set_defaults(func=commands.cmd_verify)

    p = sub.add_parser("verify-train", help="check every level's SGD steps against the NumPy oracle")
    p.add_argument("--implementations", default="numpy,tf,jax,torch,keras,keras_jax,keras_torch",
                   help="comma-separated names or module:Class paths (default: every framework level)")
    p.add_argument("--device", choices=registry.DEVICES, default="cpu")
    p.add_argument("--weights", type=Path, default=None,
                   help="initial weights (default weights/lenet5_init.weights.h5)")
    p.add_argument("--steps", type=int, default=20, help="SGD steps K (default 20)")
    p.add_argument("--batch", type=int, default=32, help="images per step B (default 32)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                   help="write the rows (with every step's numbers) as JSON to FILE (or stdout)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.set_defaults(func=commands.cmd_verify_train)

    p = sub.add_parser("run", help="run a study (studies/NAME.toml or a path)")
    p.add_argument("study", help="a name in studies/ (api_levels, overhead, ...) or a .toml path")
    p.add_argument("--devices", default=None, help="only these devices, e.g. cpu or cpu,gpu")
    p.add_argument("--out", type=Path, default=DEFAULT_RESULTS,
                   help="results folder (default reports/results)")
    p.add_argument("--resume", action="store_true",
                   help="complete an interrupted run (the newest, or --run-id)")
    p.add_argument("--run-id", default=None, help="name of the run folder")
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.add_argument("--lock-timeout", type=float, default=None, metavar="S",
                   help="wait at most S seconds for another run's GPU lock, then measure anyway "
                        "with the cells flagged contended (default: wait)")
    p.set_defaults(func=commands.cmd_run)

    p = sub.add_parser("loc", help="count code lines per implementation package (pygount)")
    p.add_argument("--out", type=Path, default=DEFAULT_LOC_CSV)
    p.set_defaults(func=commands.cmd_loc)
    p = sub.add_parser("figures", help="draw the figures from the result files")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    p.add_argument("--out", type=Path, default=DEFAULT_FIGURES)
    p.set_defaults(func=commands.cmd_figures)
    p = sub.add_parser("report", help="write REPORT.md from the result files")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    p.add_argument("--out", type=Path, default=DEFAULT_REPORT)
    p.set_defaults(func=commands.cmd_report)
    p = sub.add_parser("doctor", help="what can run here, and why not")
    p.add_argument("--implementations", default=None, help="only these (default: all)")
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.set_defaults(func=commands.cmd_doctor)
    p = sub.add_parser("explain", help="where one call's time goes, stage by stage")
    p.add_argument("targets", help="IMPL[/VARIANT], comma-separated (e.g. keras/predict,keras_jax/predict)")
    p.add_argument("--device", choices=registry.DEVICES, default="cpu")
    p.add_argument("--calls", type=int, default=200, help="timed calls per ladder step")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.add_argument("--out", type=Path, default=None,
                   help="write the rows to OUT/explain/<run-id>/ (the report reads reports/results)")
    p.set_defaults(func=commands.cmd_explain)
    p = sub.add_parser("crosscheck", help="time one implementation with the harness and with timeit")
    p.add_argument("--implementation", default="numpy")
    p.add_argument("--calls", type=int, default=200, help="calls per round and timer")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.add_argument("--json", default=None, metavar="FILE", help="write the result as JSON")
    p.set_defaults(func=commands.cmd_crosscheck)
    p = sub.add_parser("compare", help="compare the medians of two runs of one study")
    p.add_argument("run_a", type=Path)
    p.add_argument("run_b", type=Path)
    p.set_defaults(func=commands.cmd_compare)
    return parser


def on_sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
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
    except Unavailable as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 3
    except HarnessError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
