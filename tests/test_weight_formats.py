"""Every weights file a student brings: the Keras 3 .keras archive, the legacy full-model .h5,
the Keras 3 .weights.h5 and the legacy weights-only .h5 are read by every level; anything else
is named, with the list of what is accepted."""

import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from harness.data import weights
from harness.errors import HarnessError
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

WRITE = """
import sys, h5py
from keras.src.legacy.saving import legacy_h5_format
from lenet_keras.model import build_model
out = sys.argv[1]
model = build_model()
model.load_weights("weights/lenet5_mnist.weights.h5")
model.save(f"{out}/model.keras")                  # Keras 3 archive
model.save(f"{out}/model.h5")                     # legacy full model
model.save_weights(f"{out}/model.weights.h5")     # Keras 3 weights only
with h5py.File(f"{out}/legacy.h5", "w") as f:     # legacy weights only (tf.keras save_weights)
    legacy_h5_format.save_weights_to_hdf5_group(f, model)
"""
FORMATS = ["model.keras", "model.h5", "model.weights.h5", "legacy.h5"]


# What `harness verify` runs for keras_jax (harness.check.child.outputs: every variant's
# probabilities of the first 100 test images), for every format in one process: Keras' own
# load_weights is what differs between the files; NumPy and JAX ops read them through weights.read,
# checked bit for bit (test_every_keras_format_reads_as_the_shared_weights).
READ_EVERY_FORMAT = """
from harness.check.child import outputs
saved, formats = sys.argv[1], sys.argv[2:]
for name in formats:
    outputs("keras_jax", "cpu", f"{saved}/{name}", f"{saved}/{name}.out", limit=100,
            say=lambda line, name=name: print(name, line))
"""


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """(the folder of the four files, the read-back lines): one Keras-on-JAX process writes every
    format and then reads each back through a fresh model (READ_EVERY_FORMAT), so Keras and JAX are
    imported once for both."""
    from harness import registry

    out = tmp_path_factory.mktemp("saved")
    for name in FORMATS:
        (out / f"{name}.out").mkdir()
    done = subprocess.run([sys.executable, "-c", WRITE + READ_EVERY_FORMAT, str(out), *FORMATS], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, **registry.process_env("keras_jax")})
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done.stdout


@pytest.fixture(scope="module")
def saved(written):
    return written[0]


@pytest.mark.parametrize("name", FORMATS)
def test_every_keras_format_reads_as_the_shared_weights(saved, shared_weights, name):
    found = weights.read(saved / name)
    for layer, (kernel, bias) in shared_weights.items():
        assert np.array_equal(found[layer].kernel, kernel) and np.array_equal(found[layer].bias, bias)


@pytest.fixture(scope="module")
def keras_read(written):
    """{format: [keras_jax's verify rows]}, each checked against the NumPy oracle reading the same file."""
    from harness.check import verify
    from harness.check.child import output_name
    from harness.data import mnist
    from lenet_numpy.model import NumpyLeNet

    saved, stdout = written
    images, labels = mnist.load("test")
    x, labels = mnist.to_input(images[:100]), labels[:100]
    rows: dict[str, list] = {name: [] for name in FORMATS}
    for line in stdout.splitlines():
        name, row = line.split(" ", 1)
        row = json.loads(row)
        if row["status"] == "ok":
            probs = np.load(saved / f"{name}.out" / output_name(row))
            reference = NumpyLeNet(saved / name, dtype="float32").predict(x).astype(np.float64)
            row.update(verify.check(probs, reference, labels))
        rows[name].append(row)
    return rows


@pytest.mark.parametrize("name", FORMATS)
def test_every_keras_format_verifies_in_keras(keras_read, name):
    """Keras' own load_weights reads each file to the oracle's answers, in every keras_jax variant."""
    from harness import registry

    rows = keras_read[name]
    assert [r["variant"] for r in rows] == list(registry.REGISTRY["keras_jax"].variants_for("cpu"))
    assert all(r["status"] == "ok" and r["agree"] == 100 for r in rows), rows


def test_a_keras_file_verifies_through_the_cli(saved):
    """A student's file goes through the CLI to NumPy, JAX ops and Keras' own load_weights (the
    other formats take the same path: the CLI passes the path, each level reads it as above)."""
    run = subprocess.run([sys.executable, "-m", "harness", "verify", "--implementations",
                          "numpy,jax,keras_jax", "--weights", str(saved / "model.keras"), "--limit", "100",
                          "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    rows = json.loads(run.stdout)["rows"]
    assert len(rows) == 7 and all(r["status"] == "ok" and r["agree"] == 100 for r in rows)


def not_weights(tmp_path, kind):
    path = tmp_path / f"bad-{kind}"
    if kind == "pytorch":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("model/data.pkl", b"\x80\x02}q\x00.")
    elif kind == "npz":
        np.savez(path, w=np.zeros(3))
        path = path.with_suffix(".npz")
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "savedmodel":
        path.mkdir()
        (path / "saved_model.pb").write_bytes(b"\x08\x01")
    elif kind == "text":
        path.write_text("conv1: [[0.1, 0.2]]\n")
    elif kind == "zip":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("config.json", "{}")
    return path


@pytest.mark.parametrize("kind,what", [
    ("pytorch", "a PyTorch checkpoint (torch.save)"),
    ("npz", "a NumPy .npz archive"),
    ("empty", "an empty file"),
    ("savedmodel", "a TensorFlow SavedModel folder"),
    ("text", "a text file (starts 'conv1: [[0.1, 0.2]]\\n')"),
    ("zip", "a zip archive without model.weights.h5 (members: ['config.json'])"),
])
def test_other_files_are_named_with_what_is_accepted(tmp_path, kind, what):
    path = not_weights(tmp_path, kind)
    with pytest.raises(HarnessError) as info:
        weights.read(path)
    assert str(info.value) == f"{path}: {what}; {weights.ACCEPTED}"
