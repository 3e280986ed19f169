"""lenet-levels harness: everything that is not a LeNet, in wings.

    cli.py command.py           the command line (the one place that turns errors into exit codes);
                                each wing declares its own commands in its cli.py
    lab/     campaign/          grading a class's submissions (limited workers, leaderboard, Slurm);
                                the GPU half in one command (steps, manifest, archive)
    figures/ reproduce/         the report's figures, a module each, drawn from the report's claims;
                                a study run again, held against its newest run
    report/                     runs, tables, REPORT.md and DETAILS.md, lines of code
    check/   explain/  draw/    verify and the timer cross-check; where a call's time goes; what
                                every figure (the report's, a lab's) is drawn with
    measure/                    study files -> plan -> workers -> rounds -> results -> statistics
    machine/                    environment metadata, process settings, GPUs, the GPU lock, doctor
    data/    frameworks/        MNIST and the weights file; per-framework set-up in a worker
    base.py registry.py errors.py null_impl.py   the one interface a level implements

The rule of the layout: a wing imports only from the wings listed below it (check, explain and
draw are siblings, as are figures, reproduce, lab and campaign, and data and frameworks: neither imports the
other); lab and report stay apart too, sharing what sits below both. Levels (`lenet_*`)
import only base, registry, errors, data and frameworks; the harness imports a level only
inside a function, through the registry or as the oracle. tests/test_layout.py reads every
import and fails on a wrong arrow or a cycle.

Nothing here imports a deep-learning framework at import time: a CuPy run never imports
TensorFlow, and figures and reports are pure functions of result files.
"""

import importlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Installed from a lab's student kit (harness/lab/term/handout/kit.py) there is no checkout around the
# package: the kit's data (the weights) sits inside it, in _kit/, laid out as the checkout lays it out.
ROOT = HERE / "_kit" if (HERE / "_kit").is_dir() else HERE.parent
DEFAULT_DATA_DIR = ROOT / "data" / "mnist"
# a kit's weights are .npz, read with NumPy alone (harness.data.weights.read_npz)
DEFAULT_WEIGHTS = ROOT / "weights" / ("lenet5_mnist.weights" + (".npz" if ROOT.name == "_kit" else ".h5"))
DEFAULT_RESULTS = ROOT / "reports" / "results"
DEFAULT_FIGURES = ROOT / "reports" / "figures"
DEFAULT_REPORT = ROOT / "reports" / "REPORT.md"
DEFAULT_LOC_CSV = ROOT / "reports" / "loc.csv"

# Names a lab's code may import from the harness itself: `from harness import weights` stays valid.
MOVED = {"weights": "harness.data.weights", "mnist": "harness.data.mnist"}


def __getattr__(name):
    if name in MOVED:
        return importlib.import_module(MOVED[name])
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
