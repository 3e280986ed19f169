"""The hand-written CPU level (lenet_numba): every variant and dtype against the NumPy oracle on a
few hundred images (the full 10,000 in `make verify`), buffers made once per batch size, the
layouts' index arithmetic, and the loops really compiled to vector FMAs on an x86 CPU with AVX2
(a loop that stops vectorizing is a 3-6x slower rung, not a wrong one: this test says so)."""

import platform
import re

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS, registry
from tests.conftest import assert_matches_oracle, oracle_sample

pytest.importorskip("numba", reason="the hand-written CPU level needs numba (pip install numba)")
from lenet_numba import kernels  # noqa: E402
from lenet_numba.model import NumbaLeNet  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sample(mnist_test):
    return oracle_sample(mnist_test[0], 300, dtype="float64")


@pytest.mark.parametrize("variant, dtype", [("fused", "float32"), ("layers", "float32"), ("fused", "float64")])
def test_every_variant_matches_the_oracle(sample, variant, dtype):
    x, reference = sample
    model = NumbaLeNet(DEFAULT_WEIGHTS, variant=variant, dtype=dtype)
    tolerance = 1e-5 if dtype == "float32" else 1e-12
    assert_matches_oracle(model, x, reference, dtype, tolerance)
    assert sorted(model.plans) == [1, 7, 300]  # buffers made once per batch size, then reused


def test_bad_images_are_a_value_error():
    model = NumbaLeNet(DEFAULT_WEIGHTS)
    for bad in (np.zeros((2, 28, 28)), np.zeros((0, 28, 28, 1)), np.zeros((1, 32, 32, 1))):
        with pytest.raises(ValueError, match=r"\(N, 28, 28, 1\)"):
            model.predict(bad)


def test_the_registry_names_the_level():
    spec = registry.spec("numba")
    assert spec.devices == ("cpu",) and spec.variants == ("fused", "layers")
    target = registry.hook("numba", "cpu_target")()
    assert target["cpu"] and isinstance(target["features"], list)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="checks x86 vector instructions")
def test_the_convolutions_compile_to_vector_fmas(sample):
    if "avx2" not in registry.hook("numba", "cpu_target")()["features"]:
        pytest.skip("this CPU has no AVX2")
    NumbaLeNet(DEFAULT_WEIGHTS, variant="layers").predict(sample[0][:1])
    for fn in (kernels.conv1_layer, kernels.conv2_layer):
        asm = "\n".join(fn.inspect_asm().values())
        assert re.search(r"vfmadd\d+ps\s[^\n]*%[yz]mm", asm), f"{fn.__name__}: no vector FMA left"
