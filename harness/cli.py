"""`python -m harness COMMAND`: the one place that turns errors into `ERROR: ...` and an exit code.

Exit codes: 0 ok; 1 a check failed (verify disagreement); 2 bad input or environment
(`ERROR:` line); 3 something asked for cannot run here (no GPU, library missing); 130 Ctrl-C.

The command table is built from argparse parent parsers: each option that several commands take
(--weights, --device, --out, ...) is declared once below, by a function whose arguments are what
the commands set differently, and each command lists its options in the order `--help` shows them.
"""

import argparse
import errno
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from harness import (
    DEFAULT_FIGURES,
    DEFAULT_LOC_CSV,
    DEFAULT_REPORT,
    DEFAULT_RESULTS,
    DEFAULT_WEIGHTS,
    ROOT,
    commands,
    registry,
)
from harness.errors import HarnessError, exit_code
from harness.machine.files import disk_error

Subparsers = argparse._SubParsersAction  # what add_subparsers returns (argparse names it privately)
Command = Callable[[argparse.Namespace], int]


def option(*names: str, **kwargs: Any) -> argparse.ArgumentParser:
    """One argument (an option or a positional) as a parent parser, for a command's list."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(*names, **kwargs)
    return parent


def command(sub: Subparsers, name: str, help: str, func: Command,
            *options: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """A subcommand taking `options` (parent parsers) in this order, run by `func`."""
    parser = sub.add_parser(name, help=help, parents=list(options))
    parser.set_defaults(func=func)
    return parser


# The shared options: each declared once; the arguments are what the commands set differently.

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


def weights(default: Path | None = DEFAULT_WEIGHTS, help: str | None = None) -> argparse.ArgumentParser:
    return option("--weights", type=Path, default=default, help=help)


def implementations(default: str | None, help: str) -> argparse.ArgumentParser:
    return option("--implementations", default=default, help=help)


def lab_file() -> argparse.ArgumentParser:
    """A lab by name or path; the names are read from labs/ (a new lab file is listed without an
    edit here; harness.measure.plan.study.toml_names reads the same, but would slow every command's start)."""
    names = ", ".join(sorted(p.stem for p in (ROOT / "labs").glob("*.toml"))) or "none found"
    return option("lab", help=f"a name in labs/ ({names}) or a .toml path")


def device(choices: tuple[str, ...] = registry.DEVICES, default: str = "cpu") -> argparse.ArgumentParser:
    return option("--device", choices=choices, default=default)


def out(default: Path | None = None, help: str | None = None,
        required: bool = False) -> argparse.ArgumentParser:
    return option("--out", type=Path, default=default, required=required, help=help)


def json_rows(help: str) -> argparse.ArgumentParser:
    """--json FILE, or a bare --json for stdout."""
    return option("--json", nargs="?", const="-", default=None, metavar="FILE", help=help)


def calls(help: str) -> argparse.ArgumentParser:
    return option("--calls", type=int, default=200, help=help)


def rounds() -> argparse.ArgumentParser:
    return option("--rounds", type=int, default=10)


def machine() -> argparse.ArgumentParser:
    return option("--machine", default=None,
                  help="the machine whose runs answer, as the report labels it "
                       "(e.g. 'vm: AMD EPYC, AVX-512, 2 cores'; "
                       "default: the newest run's)")


def results() -> argparse.ArgumentParser:
    return option("--results", type=Path, default=DEFAULT_RESULTS)


def lock_timeout(flagged: str) -> argparse.ArgumentParser:
    return option("--lock-timeout", type=float, default=None, metavar="S",
                  help=f"wait at most S seconds for another run's GPU lock, then measure anyway "
                       f"with {flagged} flagged contended (default: wait)")


def submissions(help: str | None = None) -> argparse.ArgumentParser:
    return option("--submissions", type=Path, required=True, help=help)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None,
                        help="MNIST folder (default: $LENET_DATA_DIR or data/mnist)")
    parser.add_argument("--gpu", default=None, metavar="N",
                        help="the GPU to use on a shared server (sets CUDA_VISIBLE_DEVICES)")
    sub = parser.add_subparsers(dest="command", required=True)
    # In the order `python -m harness --help` lists them.
    add_verify_commands(sub)
    add_run_command(sub)
    add_reproduce_command(sub)
    add_report_commands(sub)
    command(sub, "list", "the registered levels, comma-separated (the Makefile's CPU_IMPLS, GPU_IMPLS)",
            commands.cmd_list, option("--device", choices=("cpu", "gpu"), default=None,
                                      help="only the levels that run on this device"),
            option("--explain", action="store_true",
                   help="their explain targets instead, level/variant (the Makefile's EXPLAIN; "
                        "needs --device)"))
    command(sub, "doctor", "what can run here, and why not", commands.cmd_doctor,
            implementations(None, "only these (default: all)"), weights())
    add_timing_commands(sub)
    add_lab_commands(sub)
    add_campaign_commands(sub)
    return parser


def add_verify_commands(sub: Subparsers) -> None:
    """`verify` and `verify-train`: every level's answers against the NumPy oracle (harness.check)."""
    command(sub, "verify", "check every implementation against the NumPy reference", commands.cmd_verify,
            implementations(None, "comma-separated names or module:Class paths (default: every level "
                                  "that runs on --device, as `list --device` prints them)"),
            device(), weights(),
            json_rows("write the rows as JSON to FILE (or stdout when no FILE)"),
            option("--limit", type=int, default=None, help="only the first N test images"),
            option("--dtypes", default="float32",
                   help="comma-separated: float32, float64 (each level checks those it offers)"),
            option("--threads", type=int, default=os.cpu_count() or 1))
    command(sub, "verify-train", "check every level's SGD steps against the NumPy oracle",
            commands.cmd_verify_train,
            implementations(None, "comma-separated names or module:Class paths (default: every level "
                                  "with a trainer that runs on --device)"),
            device(), weights(None, "initial weights (default weights/lenet5_init.weights.h5)"),
            option("--steps", type=int, default=20, help="SGD steps K (default 20)"),
            option("--batch", type=int, default=32, help="images per step B (default 32)"),
            option("--dtype", choices=("float32", "float64"), default="float32"),
            json_rows("write the rows (with every step's numbers) as JSON to FILE (or stdout)"),
            option("--threads", type=int, default=1,
                   help="threads per level (default 1, as in the studies: one reduction order)"))


def add_run_command(sub: Subparsers) -> None:
    """`run`: one study (harness.measure)."""
    command(sub, "run", "run a study (studies/NAME.toml or a path)", commands.cmd_run,
            option("study", help="a name in studies/ (api_levels, overhead, ...) or a .toml path"),
            option("--devices", default=None, help="only these devices, e.g. cpu or cpu,gpu"),
            option("--implementations", type=commands.split_list, default=None, metavar="NAMES",
                   help="a quick run: only the cells of these levels (a level without one gets its first "
                        "variant); with --rounds or --processes, never a machine's answer in the report"),
            option("--rounds", type=int, default=None, help="a quick run: rounds in each process"),
            option("--processes", type=int, default=None, help="a quick run: fresh processes per cell"),
            out(None, "results folder (default reports/results; a quick run: "
                      f"{commands.QUICK_OUT}, unless --out names one)"),
            option("--resume", action="store_true",
                   help="complete an interrupted run (the newest, or --run-id)"),
            option("--run-id", default=None, help="name of the run folder"),
            weights(None, "default: the trained weights; a train-mode study: the seeded initial weights"),
            lock_timeout("the cells"))


def add_reproduce_command(sub: Subparsers) -> None:
    """`reproduce`: a study run again, held against its newest run on this machine."""
    command(sub, "reproduce", "run a study again in fresh processes and say how much of its newest run "
                              "on this machine it reproduces", commands.cmd_reproduce,
            option("study", help="a name in studies/ (api_levels, smoke, ...) or a .toml path"),
            option("--results", type=Path, default=DEFAULT_RESULTS,
                   help="where the newest run is read and the result written (default reports/results)"),
            weights(None, "default: the trained weights; a train-mode study: the seeded initial weights"))


def add_report_commands(sub: Subparsers) -> None:
    """`loc`, `figures`, `report`: the report's inputs and outputs (harness.report)."""
    command(sub, "loc", "count code lines per implementation package (pygount)", commands.cmd_loc,
            out(DEFAULT_LOC_CSV))
    command(sub, "figures", "draw the figures from the result files", commands.cmd_figures,
            results(), out(DEFAULT_FIGURES), machine())
    command(sub, "report", "write REPORT.md (and DETAILS.md beside it) from the result files",
            commands.cmd_report, results(),
            out(DEFAULT_REPORT, "REPORT.md's path, or a folder to write REPORT.md and DETAILS.md into "
                                "(default reports/REPORT.md)"), machine())


def add_timing_commands(sub: Subparsers) -> None:
    """`explain`, `kernels`, `crosscheck`: where a call's time goes, and the timer checked."""
    command(sub, "explain", "where one call's time goes, stage by stage", commands.cmd_explain,
            option("targets", help="IMPL[/VARIANT], comma-separated (e.g. keras/predict,keras_jax/predict)"),
            device(), calls("timed calls per ladder step"), rounds(), weights(),
            out(None, "write the rows to OUT/explain/<run-id>/ (the report reads reports/results)"))
    command(sub, "kernels", "where one GPU call's time goes: kernels, copies, CUDA calls "
                            "(CUPTI through torch.profiler)", commands.cmd_kernels,
            option("targets", help="comma-separated IMPL[/VARIANT], e.g. cudnn/tuned,cudnn/graph"),
            device(("gpu",), "gpu"), calls("profiled calls (default 200)"),
            option("--batch", type=int, default=1, help="images per call (default 1)"), weights(),
            out(None, "write the rows to OUT/kernels/<run-id>/ (the report reads reports/results)"))
    command(sub, "gpu-explain", "the hand-written CUDA kernels before a GPU: each one's multiply-adds, "
                                "global bytes, SMs per image, longest dependent chain, registers, spills",
            commands.cmd_gpu_explain,
            option("--arch", default="sm_90", help="the GPU architecture ptxas compiles for (default sm_90)"),
            out(None, "write the rows to OUT/gpu_explain/<run-id>/ (the report reads reports/results)"))
    command(sub, "kernel-stages", "on a GPU: the hand-written cluster kernel's stages from inside it, and "
                                  "cuda/resident's call attributed part by part "
                                  "(each block's cycle counter at each stage's end)",
            commands.cmd_kernel_stages, calls("single-image calls (default 200)"),
            option("--dtypes", default="float32", help="comma-separated: float32,float64 (default float32)"),
            weights(),
            out(None, "write the rows to OUT/kernel_stages/<run-id>/ (the report reads reports/results)"))
    command(sub, "gpu-floor", "on a GPU: the hardware's floor for a call: the bus round trip, "
                              "pinned copies, an empty launch and graph, the FMA peak of one SM and of all, "
                              "a cluster barrier",
            commands.cmd_gpu_floor, option("--calls", type=int, default=2000,
                   help="round trips, launches and small copies per probe (default 2000)"),
            out(None, "write the row to OUT/gpu_floor/<run-id>/ (the report reads reports/results)"))
    command(sub, "arithmetic", "the CPU's arithmetic floor: this core's measured multiply-add peak, "
                               "and the hand-written C call split by layer against it",
            commands.cmd_arithmetic,
            option("--calls", type=int, default=1000, help="single-image calls per round"),
            option("--rounds", type=int, default=5),
            option("--processes", type=int, default=3,
                   help="fresh processes, one after another (each draws its own address layout)"),
            weights(),
            out(None, "write the row to OUT/arithmetic/<run-id>/ (the report reads reports/results)"))
    command(sub, "crosscheck", "time one implementation with the harness and with timeit",
            commands.cmd_crosscheck,
            option("--implementation", default="numpy"),
            calls("calls per round and timer"), rounds(), weights(),
            option("--json", default=None, metavar="FILE", help="write the result as JSON"))


def add_lab_commands(sub: Subparsers) -> None:
    """`lab grade | report | regrade | check | merge`: grading a class's submissions (harness.lab)."""
    lab = sub.add_parser("lab", help="grade lab submissions: leaderboard, feedback, Slurm job arrays")
    labs = lab.add_subparsers(dest="lab_command", required=True)
    add_lab_publishing_commands(labs)
    command(labs, "grade", "grade every submission folder DIR/<student>/ of a lab", commands.cmd_lab_grade,
            lab_file(),
            submissions("one folder per student"),
            out(None, "results, leaderboard and feedback go here", required=True),
            option("--resume", action="store_true",
                   help="grade only submissions without a row in --out, or whose files changed since"),
            option("--only", default=None, help="comma-separated student folders, graded (again: their rows "
                   "replaced) and the others' rows kept (default: all)"),
            option("--no-report", action="store_true", help="rows only (Slurm tasks; the merge reports)"),
            weights(),
            option("--slurm", action="store_true",
                   help="job arrays of tasks (--per-task students each) + a merge job"),
            *slurm_options("a node feature every task asks for (sbatch --constraint)"),
            option("--max-parallel", type=int, default=None, metavar="K",
                   help="at most K tasks at once (sbatch --array=0-N%%K)"),
            option("--per-task", type=int, default=1, metavar="K",
                   help="with --slurm: K students a task (the grader's set-up paid once per task)"),
            option("--cpus-per-task", type=int, default=None, metavar="C",
                   help="with --slurm: cores a task asks for (default: the lab's threads + 1)"),
            option("--dry-run", action="store_true", help="with --slurm: print the batch scripts only"),
            option("--no-sandbox", action="store_true",
                   help="grade without bubblewrap (submissions run as your user; the leaderboard says so)"),
            lock_timeout("the rows"))
    command(labs, "report", "rebuild the leaderboard, figure and feedback from OUT's rows",
            commands.cmd_lab_report, option("out", type=Path))
    command(labs, "regrade", "grade some students of a grading again (their rows replaced, the rest kept), "
            "then the leaderboard", commands.cmd_lab_regrade,
            option("out", type=Path, help="the grading's folder (lab grade --out)"),
            option("--only", default=None, help="comma-separated student folders (default: those whose "
                   "files changed since their row, and those without one)"),
            option("--submissions", type=Path, default=None,
                   help="the submission folders (default: the one lab grade recorded in OUT)"),
            option("--weights", default=None, help="(default: the ones lab grade recorded)"),
            option("--no-sandbox", action="store_true", help="as lab grade's"))
    command(labs, "check", "a student's own check: the gate and a short timing of one file",
            commands.cmd_lab_check,
            lab_file(),
            option("path", type=Path, help="your lenet.py (or the folder holding it)"),
            weights(), lock_timeout("the timing"))
    command(labs, "bench", "a synthetic class of N graded here (or on Slurm): time per submission and "
            "per class, one row per student checked", commands.cmd_lab_bench,
            option("--students", type=int, default=100, help="the class's size (default 100)"),
            option("--lab", default="cpu_numpy", help="the lab graded (default cpu_numpy)"),
            out(None, "a new folder: the class and its grading", required=True),
            option("--slurm", action="store_true",
                   help="grade on Slurm (the local one: its nodes share a host)"),
            option("--per-task", type=int, default=10, metavar="K", help="with --slurm: students a task"))
    command(labs, "task", "(a Slurm task) its students claimed and graded", commands.cmd_lab_task,
            option("out", type=Path), option("--index", type=int, required=True, help="the task's number"),
            submissions(), weights(), option("--no-sandbox", action="store_true"), lock_timeout("the rows"))
    command(labs, "merge", "(the Slurm merge job) rows for tasks that left none, then the report",
            commands.cmd_lab_merge,
            option("out", type=Path), submissions(),
            option("--job", default=None, help="the array job id, to read its tasks' states"))
    add_term_commands(labs)


def add_term_commands(labs: Subparsers) -> None:
    """`lab kit | collect | export`: a course's term around the grading (labs/README.md, "Running a term")."""
    command(labs, "kit", "the students' kit of a lab: dist/lab-kit-LAB.zip (no answers inside)",
            commands.cmd_lab_kit, lab_file(),
            out(None, "folder for the zip (default: the checkout's dist/)"), weights())
    command(labs, "collect", "an LMS bulk download (Canvas, Moodle) or a folder of git clones -> one "
            "folder per student + manifest.csv", commands.cmd_lab_collect,
            option("source", type=Path, help="the LMS's zip, or a folder of git clones"),
            option("-o", "--out", type=Path, required=True, help="the submissions folder to make"),
            option("--times", type=Path, action="append", default=[], metavar="EXPORT",
                   help="the LMS's record of submission times (a zip's times are the download's): "
                   "Canvas's Submissions API JSON (one --times per page), Moodle's grading worksheet"))
    command(labs, "export", "the points of a grading, as the LMS's gradebook-import CSV",
            commands.cmd_lab_export,
            option("out", type=Path, help="the grading's folder (lab grade --out)"),
            option("--roster", type=Path, required=True, help="the LMS's own roster/gradebook export (CSV)"),
            option("--format", choices=("canvas", "moodle", "csv"), required=True),
            option("-o", dest="target", type=Path, required=True, metavar="GRADES_CSV"),
            option("--column", default=None, help="(canvas) the assignment's column (default: the roster's "
                   "column naming the lab)"),
            option("--force", action="store_true", help="replace GRADES_CSV if it exists"),
            option("--allow-ungraded", action="store_true",
                   help="export although some collected submissions have no finished row: their cells "
                        "left blank (never 0) and their names listed (default: refuse, naming them)"))


def add_lab_publishing_commands(labs: Subparsers) -> None:
    """`lab publish | similarity`: the public page under pseudonyms, and staff's copy check."""
    command(labs, "publish", "the leaderboard as a static web page under pseudonyms (no names)",
            commands.cmd_lab_publish, option("out", type=Path), option("public_dir", type=Path),
            option("--submissions", type=Path, default=None,
                   help="the submission folders, to read each student's alias.txt (default: the one "
                   "lab grade recorded in OUT)"))
    command(labs, "similarity", "pairwise code similarity of the submissions (staff only)",
            commands.cmd_lab_similarity, option("out", type=Path),
            option("--submissions", type=Path, default=None,
                   help="one folder per student (default: the one lab grade recorded in OUT)"),
            option("--threshold", type=float, default=0.5, help="flag pairs scoring this or more (0-1)"),
            option("--starter", type=Path, default=None,
                   help="the starter handed out, ignored as boilerplate (default: the lab's labs/template*)"))


def add_campaign_commands(sub: Subparsers) -> None:
    """`compare`, `gpu-study`, `campaign`, `import-results`: runs compared, the GPU half carried home,
    studies on a Slurm cluster."""
    command(sub, "compare", "compare the medians of two runs of one study", commands.cmd_compare,
            option("run_a", type=Path), option("run_b", type=Path))
    command(sub, "gpu-study", "the whole GPU half in one command, into one archive", commands.cmd_gpu_study,
            out(None, "folder for results, logs, manifest, archive (a new one each campaign)"),
            option("--plan", action="store_true",
                   help="print the steps in order with each one's seconds in the newest manifest that ran "
                        "it, and where the budget ends; run nothing (no GPU needed)"),
            option("--quick", action="store_true",
                   help="a first smoke: doctor, verify on 1,000 images, api_levels' GPU cells, few calls"),
            option("--steps", type=commands.split_list, default=None, metavar="NAMES",
                   help="only these steps, e.g. doctor,verify,study-api_levels (default: all; "
                        "split the full set over two calls where one call is limited to 10 minutes)"),
            option("--levels", type=commands.split_list, default=None, metavar="NAMES",
                   help="only these GPU levels in verify, verify-train, kernels, kernels-512 and labs, "
                        "e.g. cuda,cudnn (the levels whose code changed; default: every GPU level, "
                        "python -m harness list --device gpu)"),
            option("--budget-s", type=float, default=None, metavar="S",
                   help="overall time budget in seconds (default: 240 quick, 540 full)"))
    command(sub, "campaign", "studies on a Slurm cluster: one whole-node job per node type, then a merge "
            "job that imports every run at once and writes the report", commands.cmd_campaign,
            option("--slurm", action="store_true", required=True, help="submit to Slurm (the one way today)"),
            out(None, "the campaign's folder, on a filesystem every node sees", required=True),
            *slurm_options("a CPU node type (a node feature), one job each: repeat it", many=True),
            option("--gpu-constraint", action="append", default=[], metavar="TYPE",
                   help="a GPU node type: its job runs gpu-study (repeatable)"),
            option("--studies", type=commands.split_list, default=None, metavar="NAMES",
                   help="the CPU studies (default api_levels)"),
            option("--implementations", default=None, help="a quick study: only these levels"),
            option("--rounds", default=None, help="a quick study: rounds in each process"),
            option("--processes", default=None, help="a quick study: fresh processes per cell"),
            option("--into", type=Path, default=DEFAULT_RESULTS, help="where the merge imports the runs"),
            option("--report", type=Path, default=DEFAULT_REPORT,
                   help="the report the merge writes (default reports/REPORT.md)"))
    command(sub, "campaign-job", "(a campaign's Slurm job) one node type's runs", commands.cmd_campaign_job,
            option("out", type=Path), option("--type", required=True))
    command(sub, "campaign-merge", "(a campaign's merge job) every run imported at once, then the report",
            commands.cmd_campaign_merge, option("out", type=Path),
            option("--into", type=Path, default=DEFAULT_RESULTS),
            option("--report", type=Path, required=True))
    command(sub, "import-results", "unpack a gpu-study archive into reports/results",
            commands.cmd_import_results,
            option("archive", type=Path), option("--into", type=Path, default=DEFAULT_RESULTS))


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
