"""The inference-engine level (lenet_onnx): the Keras model exported to ONNX once per weights file
(cached by the file's sha256, re-exported when the weights change, named in the output), run by
ONNX Runtime (run, iobinding) and OpenVINO (float32 asked for), each checked against the NumPy
oracle on a few hundred images (the full 10,000 in `make verify`); bad input: a file that is
not LeNet-5's weights, a failing export, an engine missing, a GPU build absent."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS, ROOT, registry
from harness.errors import HarnessError, Unavailable
from tests.conftest import assert_matches_oracle, oracle_sample

pytest.importorskip("onnxruntime", reason="the engine level needs onnxruntime (pip install onnxruntime)")
from lenet_onnx import export  # noqa: E402
from lenet_onnx.model import OnnxLeNet  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sample(mnist_test):
    return oracle_sample(mnist_test[0], 300)


@pytest.fixture(scope="module")
def models():
    """Every variant on the shared weights: the first one exports (once per weights file, cached
    for every later process), the others reuse the export."""
    built = {v: OnnxLeNet(DEFAULT_WEIGHTS, variant=v) for v in registry.REGISTRY["onnx"].variants}
    yield built
    for m in built.values():
        m.close()


@pytest.mark.parametrize("variant", registry.REGISTRY["onnx"].variants)
def test_every_variant_matches_the_oracle(models, sample, variant):
    x, reference = sample
    model = models[variant]
    assert_matches_oracle(model, x, reference, "float32", 1e-5)  # OpenVINO: f32, not bf16


def test_the_export_is_cached_by_the_weights_hash(models):
    path = models["run"].path
    assert path.name == f"lenet5-{export.sha256(DEFAULT_WEIGHTS)[:16]}.onnx"
    assert export.cached_model(DEFAULT_WEIGHTS, log=pytest.fail) == path  # no second export


def test_one_thread_as_the_harness_asks(models, monkeypatch):
    assert models["run"].session.get_session_options().intra_op_num_threads == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    model = OnnxLeNet(DEFAULT_WEIGHTS, variant="run")
    assert model.session.get_session_options().intra_op_num_threads == 2


def test_changed_weights_are_exported_again_and_named(tmp_path, monkeypatch, models):
    """The exporter's process is faked here (it writes the real export's bytes): what is tested
    is the cache's rule, the real export runs in `models` (and in every fresh checkout)."""
    monkeypatch.setenv("LENET_CACHE_DIR", str(tmp_path / "cache"))
    weights = shutil.copy(DEFAULT_WEIGHTS, tmp_path / "w.weights.h5")
    folder = tmp_path / "cache" / "onnx"
    folder.mkdir(parents=True)  # an export of the same file before its weights changed
    (folder / "lenet5-0123456789abcdef.json").write_text(json.dumps({"weights": str(weights),
                                                                      "sha256": "0123456789abcdef"}))
    commands = []

    def fake_export(command, **_):
        commands.append(command)
        shutil.copy(models["run"].path, command[-1])
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(export.subprocess, "run", fake_export)
    lines = []
    path = export.cached_model(weights, log=lines.append)
    assert path == folder / f"lenet5-{export.sha256(weights)[:16]}.onnx" and path.is_file()
    assert commands[0][1:4] == ["-m", "lenet_onnx.export", str(weights)]
    assert lines == [f"onnx: {weights} changed since lenet5-0123456789abcdef.onnx was exported: "
                     f"exporting it to {path} (Keras, TensorFlow backend, tf2onnx)"]
    assert export.cached_model(weights, log=pytest.fail) == path  # exported once
    assert list(folder.glob("*.partial-*")) == []


def test_a_failed_export_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("LENET_CACHE_DIR", str(tmp_path))
    monkeypatch.setitem(export.EXPORT_ENV, "KERAS_BACKEND", "no-such-backend")
    weights = shutil.copy(DEFAULT_WEIGHTS, tmp_path / "w.weights.h5")
    with pytest.raises(HarnessError, match=r"the ONNX export of .*w\.weights\.h5 failed: .*no-such-backend"):
        export.cached_model(weights, log=lambda line: None)
    assert list((tmp_path / "onnx").glob("*.onnx")) == []  # nothing half-written left behind


def test_without_tensorflow_the_export_is_unavailable_with_the_fix(tmp_path, monkeypatch):
    """A GPU server without TensorFlow: the cell is skipped with the reason, never an error."""
    monkeypatch.setenv("LENET_CACHE_DIR", str(tmp_path))
    real_find_spec = export.importlib.util.find_spec
    monkeypatch.setattr(export.importlib.util, "find_spec",
                        lambda name, *a: None if name in ("tensorflow", "tf2onnx") else real_find_spec(name, *a))
    monkeypatch.setattr(export.subprocess, "run", lambda *a, **k: pytest.fail("an export was started"))
    assert export.missing_exporter() == ["tensorflow", "tf2onnx"]
    with pytest.raises(Unavailable, match=r"the export needs tensorflow, tf2onnx, not installed here: "
                                          r"pip install tensorflow-cpu tf2onnx, or copy lenet5-\w{16}\.onnx"):
        export.cached_model(DEFAULT_WEIGHTS, log=lambda line: None)


def test_a_file_that_is_not_lenet_weights_is_named_before_any_export(tmp_path, monkeypatch):
    monkeypatch.setattr(export, "cached_model", lambda *a, **k: pytest.fail("exported"))
    bad = tmp_path / "notes.weights.h5"
    bad.write_text("not HDF5")
    with pytest.raises(HarnessError, match="notes.weights.h5"):
        OnnxLeNet(bad, variant="run")


@pytest.mark.parametrize("variant, module", [("run", "onnxruntime"), ("openvino", "openvino")])
def test_a_missing_engine_is_unavailable_with_the_fix(monkeypatch, variant, module):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` raises ImportError
    with pytest.raises(Unavailable, match=f"pip install {module}"):
        OnnxLeNet(DEFAULT_WEIGHTS, variant=variant)


@pytest.mark.parametrize("variant, fix", [("iobinding", "onnxruntime-gpu"), ("openvino", "Intel GPUs")])
def test_the_gpu_needs_a_gpu_build_never_the_cpu_instead(variant, fix):
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers() and variant != "openvino":
        pytest.skip("this onnxruntime has the CUDA provider")
    with pytest.raises(Unavailable, match=fix):
        OnnxLeNet(DEFAULT_WEIGHTS, device="gpu", variant=variant)


def test_bad_images_are_a_value_error(models):
    with pytest.raises(ValueError, match=r"\(N, 28, 28, 1\)"):
        models["run"].predict(np.zeros((2, 28, 28)))


def test_doctor_names_the_engines_and_the_cpu_target():
    """The engines are the ONNX level's own `doctor` hook: doctor itself names no engine."""
    from harness.machine import doctor

    (engines,) = doctor.level_hook_lines()
    assert engines.startswith("ONNX engine level: onnxruntime ") and "CPUExecutionProvider" in engines
    assert "openvino " in engines and "(devices: CPU" in engines and "tf2onnx " in engines
    assert not any(engine in (ROOT / "harness/machine/doctor.py").read_text() for engine in ("onnx", "openvino"))
    target, c_level = doctor.cpu_level_lines()
    assert target.startswith("hand-written CPU level: Numba ") and " compiles for " in target
    assert c_level.startswith("hand-written C level: ")  # its compiler and path (tests/test_c_level.py)
