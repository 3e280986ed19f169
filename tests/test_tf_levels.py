"""The TensorFlow and Keras levels against the NumPy reference on a fixed sample."""

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS, registry
from harness.errors import Unavailable
from tests.conftest import oracle_sample

pytestmark = [pytest.mark.tf, pytest.mark.slow]

SAMPLE = 256


@pytest.fixture(scope="module", autouse=True)
def tensorflow():
    """Imported by the first test, not at collection: every pytest-xdist worker collects every
    file, and importing TensorFlow takes 7 s of CPU here."""
    return pytest.importorskip("tensorflow", reason="TensorFlow is not installed")


@pytest.fixture(scope="module")
def sample(mnist_test):
    return oracle_sample(mnist_test[0], SAMPLE)


@pytest.mark.parametrize("name,variant", [
    (name, variant) for name in ("tf", "keras") for variant in registry.REGISTRY[name].variants
])
def test_level_agrees_with_reference(sample, name, variant):
    x, reference = sample
    impl = registry.create(name, DEFAULT_WEIGHTS, device="cpu", variant=variant)
    probs = impl.predict(x)
    assert probs.shape == (SAMPLE, 10) and isinstance(probs, np.ndarray)
    assert np.array_equal(probs.argmax(1), reference.argmax(1))
    assert np.max(np.abs(probs - reference)) <= 1e-5
    one = impl.predict(x[:1])  # the per-image call the harness times
    assert one.shape == (1, 10)
    assert np.max(np.abs(one - reference[:1])) <= 1e-5


def test_tf_float64(sample):
    x, reference = sample
    probs = registry.create("tf", DEFAULT_WEIGHTS, dtype="float64").predict(x.astype(np.float64))
    assert probs.dtype == np.float64
    assert np.max(np.abs(probs - reference)) <= 1e-5


def test_gpu_request_without_gpu_is_unavailable_with_reason():
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU visible to TensorFlow")
    with pytest.raises(Unavailable, match="sees no GPU"):
        registry.create("tf", DEFAULT_WEIGHTS, device="gpu")
