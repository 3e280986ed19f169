"""lenet-levels harness: everything that is not a LeNet (data, weights, registry, workers,
timing, statistics, environment, results, LOC, figures, report, CLI).

Nothing here imports a deep-learning framework at import time: a CuPy run never imports
TensorFlow, and figures and reports are pure functions of result files.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA_DIR = ROOT / "data" / "mnist"
DEFAULT_WEIGHTS = ROOT / "weights" / "lenet5_mnist.weights.h5"
DEFAULT_RESULTS = ROOT / "reports" / "results"
DEFAULT_FIGURES = ROOT / "reports" / "figures"
DEFAULT_REPORT = ROOT / "reports" / "REPORT.md"
DEFAULT_LOC_CSV = ROOT / "reports" / "loc.csv"
