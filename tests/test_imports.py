"""Lazy imports: the harness, the NumPy, CUDA, cuDNN and oneDNN levels never import a framework;
no level imports another level."""

import ast
import subprocess
import sys

import pytest

from harness import registry
from tests.conftest import ROOT

CODE = """
import sys
import importlib, pkgutil, harness
for module in pkgutil.walk_packages(harness.__path__, "harness."):  # every harness module
    if not module.name.endswith("__main__"):
        importlib.import_module(module.name)
import lenet_numpy.model, lenet_cudnn.model, lenet_cudnn.cublas, lenet_onednn.model, lenet_cuda.model
from harness import registry
for name in registry.REGISTRY: registry.spec(name)   # metadata only
loaded = [m for m in ("tensorflow", "keras", "cupy", "jax", "torch") if m in sys.modules]
print(loaded)
"""


def test_no_framework_is_imported_until_an_implementation_is_built():
    done = subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


LEVELS = sorted({spec.package for spec in registry.REGISTRY.values() if spec.package})


@pytest.mark.parametrize("package", LEVELS)
def test_no_level_imports_another_level(package):
    others = set(LEVELS) - {package}
    for path in (ROOT / package).glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert name.split(".")[0] not in others, f"{path.name} imports {name}"


def test_every_hook_names_a_function_of_its_own_level():
    """The registry's hooks (what doctor, env.json, a worker and the ONNX level's export ask a level) resolve, each
    into the level's own package, without a framework: checked as text, nothing imported."""
    for spec in registry.REGISTRY.values():
        for what, path in spec.hooks:
            module, _, function = path.partition(":")
            assert module.split(".")[0] == spec.package, (spec.name, what, path)
            tree = ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text())
            assert function in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, path


def test_an_unknown_hook_names_the_ones_there_are():
    from harness.errors import HarnessError

    with pytest.raises(HarnessError, match=r"cudnn: no hook 'nope'; expected one of \['cublaslt', 'library'\]"):
        registry.hook("cudnn", "nope")
    assert registry.hook("cuda", "kernels")()[0][1] == "layers.cu"
