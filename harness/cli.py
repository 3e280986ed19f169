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
    p.add_argument("--dtypes", default="float32",
                   help="comma-separated: float32, float64 (each level checks those it offers)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.set_defaults(func=commands.cmd_verify)

    p = sub.add_parser("verify-train", help="check every level's SGD steps against the NumPy oracle")
    p.add_argument("--implementations", default="numpy,onednn,tf,jax,torch,keras,keras_jax,keras_torch",
                   help="comma-separated names or module:Class paths (default: every CPU level)")
    p.add_argument("--device", choices=registry.DEVICES, default="cpu")
    p.add_argument("--weights", type=Path, default=None,
                   help="initial weights (default weights/lenet5_init.weights.h5)")
    p.add_argument("--steps", type=int, default=20, help="SGD steps K (default 20)")
    p.add_argument("--batch", type=int, default=32, help="images per step B (default 32)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                   help="write the rows (with every step's numbers) as JSON to FILE (or stdout)")
    p.add_argument("--threads", type=int, default=1,
                   help="threads per level (default 1, as in the studies: one reduction order)")
    p.set_defaults(func=commands.cmd_verify_train)

    p = sub.add_parser("run", help="run a study (studies/NAME.toml or a path)")
    p.add_argument("study", help="a name in studies/ (api_levels, overhead, ...) or a .toml path")
    p.add_argument("--devices", default=None, help="only these devices, e.g. cpu or cpu,gpu")
    p.add_argument("--out", type=Path, default=DEFAULT_RESULTS,
                   help="results folder (default reports/results)")
    p.add_argument("--resume", action="store_true",
                   help="complete an interrupted run (the newest, or --run-id)")
    p.add_argument("--run-id", default=None, help="name of the run folder")
    p.add_argument("--weights", type=Path, default=None,
                   help="default: the trained weights; a train-mode study: the seeded initial weights")
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
    p = sub.add_parser("report", help="write REPORT.md (and DETAILS.md beside it) from the result files")
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
    p = sub.add_parser("kernels", help="where one GPU call's time goes: kernels, copies, CUDA calls "
                                       "(CUPTI through torch.profiler)")
    p.add_argument("targets", help="comma-separated IMPL[/VARIANT], e.g. cudnn/tuned,cudnn/graph")
    p.add_argument("--device", choices=("gpu",), default="gpu")
    p.add_argument("--calls", type=int, default=200, help="profiled calls, one image each (default 200)")
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.add_argument("--out", type=Path, default=None,
                   help="write the rows to OUT/kernels/<run-id>/ (the report reads reports/results)")
    p.set_defaults(func=commands.cmd_kernels)
    p = sub.add_parser("crosscheck", help="time one implementation with the harness and with timeit")
    p.add_argument("--implementation", default="numpy")
    p.add_argument("--calls", type=int, default=200, help="calls per round and timer")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.add_argument("--json", default=None, metavar="FILE", help="write the result as JSON")
    p.set_defaults(func=commands.cmd_crosscheck)
    add_lab_commands(sub)
    p = sub.add_parser("compare", help="compare the medians of two runs of one study")
    p.add_argument("run_a", type=Path)
    p.add_argument("run_b", type=Path)
    p.set_defaults(func=commands.cmd_compare)
    p = sub.add_parser("gpu-study", help="the whole GPU half in one command, into one archive")
    p.add_argument("--out", type=Path, required=True, help="folder for results, logs, manifest, archive")
    p.add_argument("--quick", action="store_true",
                   help="a first smoke: doctor, verify on 1,000 images, api_levels' GPU cells, few calls")
    p.add_argument("--steps", type=commands.split_list, default=None, metavar="NAMES",
                   help="only these steps, e.g. doctor,verify,study-api_levels (default: all; "
                        "split the full set over two calls where one call is limited to 10 minutes)")
    p.add_argument("--budget-s", type=float, default=None, metavar="S",
                   help="overall time budget in seconds (default: 240 quick, 540 full)")
    p.set_defaults(func=commands.cmd_gpu_study)
    p = sub.add_parser("import-results", help="unpack a gpu-study archive into reports/results")
    p.add_argument("archive", type=Path)
    p.add_argument("--into", type=Path, default=DEFAULT_RESULTS)
    p.set_defaults(func=commands.cmd_import_results)
    return parser


def add_lab_commands(sub) -> None:
    """`lab grade | report | check | merge`: grading a class's submissions (harness.lab)."""
    lab = sub.add_parser("lab", help="grade lab submissions: leaderboard, feedback, Slurm job arrays")
    labs = lab.add_subparsers(dest="lab_command", required=True)
    p = labs.add_parser("grade", help="grade every submission folder DIR/<student>/ of a lab")
    p.add_argument("lab", help="a name in labs/ (cpu_numpy, cudnn) or a .toml path")
    p.add_argument("--submissions", type=Path, required=True, help="one folder per student")
    p.add_argument("--out", type=Path, required=True, help="results, leaderboard and feedback go here")
    p.add_argument("--resume", action="store_true", help="skip submissions already graded in --out")
    p.add_argument("--only", default=None, help="comma-separated student folders (default: all)")
    p.add_argument("--no-report", action="store_true", help="rows only (Slurm tasks; the merge reports)")
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.add_argument("--slurm", action="store_true", help="one job-array task per submission + a merge job")
    p.add_argument("--partition", default=None, help="Slurm partition (default: the cluster's default)")
    p.add_argument("--gres", default=None, help="Slurm generic resources per task, e.g. gpu:1")
    p.add_argument("--max-parallel", type=int, default=None, metavar="K",
                   help="at most K tasks at once (sbatch --array=0-N%%K)")
    p.add_argument("--dry-run", action="store_true", help="with --slurm: print the batch scripts only")
    p.add_argument("--no-sandbox", action="store_true",
                   help="grade without bubblewrap (submissions run as your user; the leaderboard says so)")
    p.set_defaults(func=commands.cmd_lab_grade)
    p = labs.add_parser("report", help="rebuild the leaderboard, figure and feedback from OUT's rows")
    p.add_argument("out", type=Path)
    p.set_defaults(func=commands.cmd_lab_report)
    p = labs.add_parser("check", help="a student's own check: the gate and a short timing of one file")
    p.add_argument("lab", help="a name in labs/ or a .toml path")
    p.add_argument("path", type=Path, help="your lenet.py (or the folder holding it)")
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.set_defaults(func=commands.cmd_lab_check)
    p = labs.add_parser("merge", help="(the Slurm merge job) rows for tasks that left none, then the report")
    p.add_argument("out", type=Path)
    p.add_argument("--submissions", type=Path, required=True)
    p.add_argument("--job", default=None, help="the array job id, to read its tasks' states")
    p.set_defaults(func=commands.cmd_lab_merge)


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
