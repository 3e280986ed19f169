import h5py
import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS
from harness.data import weights
from harness.errors import HarnessError
from tests.conftest import random_weights, write_keras3_file


def write_legacy_file(path, layers, under_model_weights=True):
    """Keras 2 / tf.keras HDF5: [model_weights/]<layer>/<layer>/kernel:0, layer_names in order."""
    names = ["conv2d", "max_pooling2d", "conv2d_1", "max_pooling2d_1", "flatten",
             "dense", "dense_1", "dense_2"]
    weighted = dict(zip(["conv2d", "conv2d_1", "dense", "dense_1", "dense_2"], layers.values(), strict=True))
    with h5py.File(path, "w") as f:
        root = f.create_group("model_weights") if under_model_weights else f
        root.attrs["layer_names"] = np.array([n.encode() for n in names])
        for name in names:
            group = root.create_group(name)
            layer = weighted.get(name)
            group.attrs["weight_names"] = np.array(
                [f"{name}/kernel:0".encode(), f"{name}/bias:0".encode()] if layer else [], dtype="S")
            if layer:
                group[f"{name}/kernel:0"] = layer.kernel
                group[f"{name}/bias:0"] = layer.bias
    return path


def assert_same(a, b):
    for name in weights.SHAPES:
        np.testing.assert_array_equal(a[name].kernel, b[name].kernel)
        np.testing.assert_array_equal(a[name].bias, b[name].bias)


def test_shared_file_has_all_parameters_and_training_record():
    layers = weights.read(DEFAULT_WEIGHTS)
    assert sum(layer.kernel.size + layer.bias.size for layer in layers.values()) == weights.N_PARAMETERS
    meta = weights.metadata(DEFAULT_WEIGHTS)
    assert meta["test_accuracy"] >= 0.990
    assert {"epochs", "seed", "tensorflow", "keras"} <= set(meta)


def test_keras3_layout_round_trip(tmp_path):
    layers = random_weights()
    assert_same(weights.read(write_keras3_file(tmp_path / "w.h5", layers)), layers)


@pytest.mark.parametrize("under_model_weights", [True, False])
def test_legacy_keras2_layout(tmp_path, under_model_weights):
    layers = random_weights(1)
    path = write_legacy_file(tmp_path / "legacy.h5", layers, under_model_weights)
    assert_same(weights.read(path), layers)


def test_missing_tensor_names_the_layer_count(tmp_path):
    layers = random_weights()
    del layers["fc2"]
    path = write_keras3_file(tmp_path / "w.h5", layers)
    with pytest.raises(HarnessError, match=r"expected 5 weighted layers .* found 4"):
        weights.read(path)


def test_misshapen_tensor_names_layer_and_shapes(tmp_path):
    layers = random_weights()
    path = write_keras3_file(tmp_path / "w.h5", layers,
                             {"fc1/kernel": np.zeros((256, 120), np.float32)})
    expected = r"fc1/kernel .*expected shape \(400, 120\), found \(256, 120\)"
    with pytest.raises(HarnessError, match=expected):
        weights.read(path)


def test_non_finite_weights_are_rejected(tmp_path):
    layers = random_weights()
    bad = layers["conv2"].bias.copy()
    bad[3] = np.nan
    path = write_keras3_file(tmp_path / "w.h5", layers, {"conv2/bias": bad})
    with pytest.raises(HarnessError, match="conv2/bias: 1 non-finite"):
        weights.read(path)


def test_wrong_dtype_is_rejected(tmp_path):
    layers = random_weights()
    path = write_keras3_file(tmp_path / "w.h5", layers,
                             {"fc3/bias": layers["fc3"].bias.astype(np.float64)})
    with pytest.raises(HarnessError, match="fc3/bias .*expected float32, found float64"):
        weights.read(path)


def test_missing_and_truncated_files(tmp_path):
    with pytest.raises(HarnessError, match="weights file not found"):
        weights.read(tmp_path / "nope.h5")
    truncated = tmp_path / "truncated.h5"
    truncated.write_bytes(DEFAULT_WEIGHTS.read_bytes()[:3000])
    with pytest.raises(HarnessError, match=r"truncated.h5: an HDF5 file that cannot be read \(truncated or damaged\?\)"):
        weights.read(truncated)
