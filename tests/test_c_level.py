"""The hand-written C level: it agrees with the NumPy oracle in both variants, says which vector path
the compiler took, compiles once per source, flags and compiler (and again when one changes), and
without a compiler is unavailable with the reason and the fix."""

import shutil

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS, registry
from harness.data import mnist
from harness.errors import Unavailable
from lenet_c import build
from lenet_numpy.model import NumpyLeNet

needs_cc = pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler here")


@pytest.fixture(scope="module")
def images():
    x, _ = mnist.load("test")
    x = mnist.to_input(x[:300], "float32")
    return x, NumpyLeNet(str(DEFAULT_WEIGHTS)).predict(x)


@needs_cc
@pytest.mark.parametrize("variant", ["fused", "layers"])
def test_every_variant_matches_the_oracle_and_names_its_path(images, variant):
    x, reference = images
    impl = registry.create("c", str(DEFAULT_WEIGHTS), device="cpu", variant=variant, dtype="float32")
    for batch in (1, 7, 300):  # one image, a ragged batch, all of them
        got = np.concatenate([impl.predict(x[i:i + batch]) for i in range(0, len(x), batch)])
        assert got.shape == (300, 10) and got.dtype == np.float32
        assert (got.argmax(1) == reference.argmax(1)).all()
        assert np.abs(got - reference).max() <= 1e-5
    assert impl.path in ("avx512", "avx2", "portable")
    assert registry.hook("c", "cpu_path")()["path"] == impl.path


@needs_cc
def test_the_library_is_compiled_once_and_again_when_source_or_flags_change(tmp_path, monkeypatch):
    monkeypatch.setenv("LENET_C_CACHE", str(tmp_path / "cache"))
    calls = []
    real = build.subprocess.run

    def counting(args, **kw):
        if "-o" in args:
            calls.append(args)
        return real(args, **kw)

    monkeypatch.setattr(build.subprocess, "run", counting)
    first = build.library()
    assert build.library() == first and len(calls) == 1  # cached: not compiled again
    source = tmp_path / "lenet.c"
    source.write_text(build.SOURCE.read_text() + "\n/* an edit */\n")
    edited = build.library(source)
    assert edited != first and len(calls) == 2
    flagged = build.library(flags=(*build.FLAGS, "-DNDEBUG"))
    assert flagged not in (first, edited) and len(calls) == 3
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(
        p.name for p in (first, edited, flagged))  # no half-written file left behind


def test_without_a_compiler_the_level_is_unavailable_with_the_fix(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    with pytest.raises(Unavailable, match="no C compiler found.*apt install gcc"):
        build.library()


@needs_cc
def test_a_source_that_does_not_compile_is_unavailable_with_the_compilers_words(tmp_path, monkeypatch):
    monkeypatch.setenv("LENET_C_CACHE", str(tmp_path))
    broken = tmp_path / "broken.c"
    broken.write_text("int f( {\n")
    with pytest.raises(Unavailable, match="could not compile broken.c: .*error"):
        build.library(broken)
