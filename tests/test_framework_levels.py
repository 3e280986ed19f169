"""The JAX and PyTorch ops levels, and Keras on its JAX and PyTorch backends, against the NumPy
reference; the backend reaching each worker before Keras is imported; a missing backend."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS, registry
from harness.errors import HarnessError, Unavailable
from harness.measure.store import results
from tests.conftest import ROOT, oracle_sample

pytestmark = pytest.mark.slow
SAMPLE = 256


@pytest.fixture(scope="module")
def sample(mnist_test):
    return oracle_sample(mnist_test[0], SAMPLE)


def agrees(impl, x, reference, dtype="float32"):
    probs = impl.predict(x.astype(dtype))
    assert probs.shape == (len(x), 10) and isinstance(probs, np.ndarray) and probs.dtype == dtype
    assert np.array_equal(probs.argmax(1), reference.argmax(1))
    assert np.max(np.abs(probs - reference)) <= 1e-5
    one = impl.predict(x[:1].astype(dtype))  # the per-image call the harness times
    assert one.shape == (1, 10) and np.max(np.abs(one - reference[:1])) <= 1e-5


@pytest.mark.parametrize("variant", ["jit", "eager"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_jax_level_agrees_with_reference(sample, variant, dtype):
    pytest.importorskip("jax", reason="JAX is not installed")
    agrees(registry.create("jax", DEFAULT_WEIGHTS, variant=variant, dtype=dtype), *sample, dtype)


@pytest.mark.parametrize("variant,dtype", [("eager", "float32"), ("eager", "float64"),
                                           ("compile", "float32")])
def test_torch_level_agrees_with_reference(sample, variant, dtype):
    pytest.importorskip("torch", reason="PyTorch is not installed (make install EXTRAS=dev,torch)")
    agrees(registry.create("torch", DEFAULT_WEIGHTS, variant=variant, dtype=dtype), *sample, dtype)


def test_torch_cudagraph_is_refused_on_the_cpu():
    pytest.importorskip("torch", reason="PyTorch is not installed")
    with pytest.raises(ValueError, match="unknown variant 'cudagraph'; expected one of"):
        registry.create("torch", DEFAULT_WEIGHTS, variant="cudagraph")


@pytest.mark.parametrize("name", ["jax", "torch"])
def test_gpu_request_without_gpu_is_unavailable_with_reason(name):
    pytest.importorskip(name)
    if name == "torch":
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU visible to PyTorch")
    else:
        import jax

        if jax.default_backend() == "gpu":
            pytest.skip("this machine has a GPU visible to JAX")
    with pytest.raises(Unavailable, match="sees no GPU"):
        registry.create(name, DEFAULT_WEIGHTS, device="gpu")


def test_torch_layouts_keep_the_nhwc_flatten_order():
    from lenet_torch import layout

    rng = np.random.default_rng(0)
    activations = rng.normal(size=(3, 5, 5, 16)).astype(np.float32)     # pool2 output, NHWC
    kernel = rng.normal(size=(400, 120)).astype(np.float32)             # Keras fc1, NHWC rows
    nhwc = activations.reshape(3, -1) @ kernel
    nchw = activations.transpose(0, 3, 1, 2).reshape(3, -1) @ layout.fc1_columns_chw(kernel).T
    np.testing.assert_allclose(nchw, nhwc, rtol=1e-5, atol=1e-4)
    hwio = rng.normal(size=(5, 5, 6, 16)).astype(np.float32)
    oihw = layout.conv_kernel_oihw(hwio)
    assert oihw.shape == (16, 6, 5, 5) and oihw[3, 2, 1, 4] == hwio[1, 4, 2, 3]
    with pytest.raises(ValueError, match="expected 400 fc1 rows"):
        layout.fc1_columns_chw(kernel[:399])


def harness(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def test_keras_on_jax_and_torch_verify_every_variant():
    """One command verifies two more Keras backends: each runs in its own process."""
    pytest.importorskip("torch", reason="PyTorch is not installed (make install EXTRAS=dev,torch)")
    run = harness("verify", "--implementations", "keras_jax,keras_torch", "--limit", str(SAMPLE),
                  "--json")
    assert run.returncode == 0, run.stderr
    rows = json.loads(run.stdout)["rows"]
    assert {(r["implementation"], r["variant"]) for r in rows} == {
        (name, v) for name in ("keras_jax", "keras_torch") for v in registry.REGISTRY[name].variants}
    assert all(r["agree"] == SAMPLE and r["max_abs_diff"] <= 1e-5 for r in rows)


def test_wrong_keras_backend_in_process_is_a_clear_error():
    code = ("import os; os.environ['KERAS_BACKEND'] = 'jax'\n"
            "from harness import registry, DEFAULT_WEIGHTS\n"
            "registry.create('keras_torch', DEFAULT_WEIGHTS)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode != 0
    assert "keras_torch needs Keras' torch backend, but keras was imported in this process with " \
           "the jax backend: set KERAS_BACKEND=torch" in done.stderr
    assert issubclass(Unavailable, HarnessError)


# the fewest calls and cells that still time every cell in two rounds: these tests check the
# workers' set-up and the rows, not the times (keras_torch's compile, 7-10 s of Dynamo tracing
# Keras, is verified in test_keras_on_jax_and_torch_verify_every_variant)
BACKENDS_STUDY = """
[study]
name = "kb"
[measure]
calls = 4
rounds = 2
warmup = 1
[[cells]]
implementation = "keras_jax"
variants = ["predict", "jit"]
devices = ["cpu"]
[[cells]]
implementation = "keras_torch"
variants = ["predict"]
devices = ["cpu"]
"""


def test_backend_reaches_each_worker_before_keras_is_imported(tmp_path):
    pytest.importorskip("torch", reason="PyTorch is not installed")
    (tmp_path / "kb.toml").write_text(BACKENDS_STUDY)
    # the caller's own KERAS_BACKEND must not leak into the workers
    run = harness("run", str(tmp_path / "kb.toml"), "--out", str(tmp_path), env={"KERAS_BACKEND": "tensorflow"})
    assert run.returncode == 0, run.stderr
    (run_dir,) = (tmp_path / "kb").iterdir()
    rows = results.read_rows(run_dir)
    setups = {r["cell_id"]: r for r in rows if r["kind"] == "setup"}
    cells = {r["cell_id"]: r for r in rows if r["kind"] == "cell"}
    assert all(c["status"] == "ok" for c in cells.values()), cells
    jax_setup = setups["keras_jax/predict/cpu/b1/float32"]
    torch_setup = setups["keras_torch/predict/cpu/b1/float32"]
    assert jax_setup["keras_backend"] == "jax" and torch_setup["keras_backend"] == "torch"
    assert "tensorflow" not in jax_setup["frameworks"] and "torch" not in jax_setup["frameworks"]
    assert "tensorflow" not in torch_setup["frameworks"] and "torch" in torch_setup["frameworks"]


def test_missing_backend_is_skipped_with_its_install_command(tmp_path):
    """torch made unimportable (as if not installed): its cells are skipped, saying what to install."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None  # import torch fails\n")
    env = {"PYTHONPATH": os.pathsep.join([str(hide), str(ROOT)])}
    (tmp_path / "kb.toml").write_text(BACKENDS_STUDY.replace("keras_jax", "numpy")
                                      .replace('variants = ["predict", "jit"]', ""))
    run = harness("run", str(tmp_path / "kb.toml"), "--out", str(tmp_path), env=env)
    assert run.returncode == 0, run.stderr
    (run_dir,) = (tmp_path / "kb").iterdir()
    cells = {r["cell_id"]: r for r in results.read_rows(run_dir) if r["kind"] == "cell"}
    assert cells["numpy/default/cpu/b1/float32"]["status"] == "ok"
    skipped = cells["keras_torch/predict/cpu/b1/float32"]
    assert skipped["status"] == "skipped"
    assert "install it: make install EXTRAS=dev,torch" in skipped["reason"]
    verify = harness("verify", "--implementations", "numpy,torch", "--limit", "20", "--json", env=env)
    assert verify.returncode == 3, verify.stderr
    rows = json.loads(verify.stdout)["rows"]
    assert rows[0]["status"] == "ok" and rows[1]["status"] == "unavailable"
    assert "install it: make install EXTRAS=dev,torch" in rows[1]["reason"]
