"""Lazy imports: the harness, the NumPy level and the cuDNN level never import TensorFlow."""

import subprocess
import sys

from tests.conftest import ROOT

CODE = """
import sys
import harness.cli, harness.runner, harness.worker, harness.report, harness.figures, harness.doctor
import lenet_numpy.model, lenet_cudnn.model
from harness import registry
registry.spec("keras"); registry.spec("tf")   # metadata only
loaded = [m for m in ("tensorflow", "keras", "cupy", "jax", "torch") if m in sys.modules]
print(loaded)
"""


def test_no_framework_is_imported_until_an_implementation_is_built():
    done = subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
