"""The shared Keras model exported to ONNX, as a user deploying it would: Keras 3's own
`model.export(path, format="onnx")` on the TensorFlow backend (tf2onnx underneath). That backend
exports a batch dimension left free (N, 28, 28, 1) -> (N, 10); Keras' PyTorch backend fixes the
batch at 1, and its JAX backend goes through jax2tf and then the same tf2onnx.

The export runs once per weights file, in a process of its own (`python -m lenet_onnx.export
WEIGHTS OUT`), so the engine's process never imports TensorFlow; the file is cached under
engine_setup.cache_dir("onnx"), named by the sha256 of the weights file, so changed weights
mean a new export, never a stale model.
"""

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from harness.errors import HarnessError, Unavailable
from harness.frameworks import engine_setup

EXPORT_ENV = {"KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": "-1", "TF_CPP_MIN_LOG_LEVEL": "2"}
EXPORTER = ("tensorflow", "keras", "tf2onnx")  # what the export imports


def missing_exporter() -> list[str]:
    """The export's packages that are not installed here (a GPU server without TensorFlow)."""
    return [name for name in EXPORTER if importlib.util.find_spec(name) is None]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cached_model(weights_path, log=None) -> Path:
    """The ONNX file of these weights, exported first where the cache has none for their hash."""
    weights_path = Path(weights_path).resolve()
    digest = sha256(weights_path)
    folder = engine_setup.cache_dir("onnx")
    onnx_path = folder / f"lenet5-{digest[:16]}.onnx"
    if onnx_path.is_file():
        return onnx_path
    missing = missing_exporter()
    if missing:  # a machine without TensorFlow: the cell is skipped with the reason, not an error
        raise Unavailable(f"no ONNX export of {weights_path.name} in {folder} and the export needs "
                          f"{', '.join(missing)}, not installed here: pip install tensorflow-cpu tf2onnx, "
                          f"or copy {onnx_path.name} from a machine that exported it into {folder}")
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    stale = [p for p in folder.glob("lenet5-*.json")
             if json.loads(p.read_text()).get("weights") == str(weights_path)]
    why = (f"{weights_path} changed since {stale[0].with_suffix('.onnx').name} was exported"
           if stale else f"no export of {weights_path} (sha256 {digest[:16]}) yet")
    log(f"onnx: {why}: exporting it to {onnx_path} (Keras, TensorFlow backend, tf2onnx)")
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f"{onnx_path.stem}.partial-{os.getpid()}.onnx"
    done = subprocess.run([sys.executable, "-m", "lenet_onnx.export", str(weights_path), str(partial)],
                          env={**os.environ, **EXPORT_ENV}, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise HarnessError(f"the ONNX export of {weights_path} failed: {last}")
    os.replace(partial, onnx_path)  # atomic: a worker beside this one sees the whole file or none
    onnx_path.with_suffix(".json").write_text(json.dumps({"weights": str(weights_path), "sha256": digest}))
    return onnx_path


def export(weights_path: str, out_path: str) -> None:
    """Keras model + shared weights -> ONNX (input "images" (N, 28, 28, 1) float32)."""
    import keras

    from harness import registry

    model = registry.hook("keras", "build_model")()  # the Keras level's own model
    model.load_weights(weights_path)
    spec = keras.InputSpec(shape=(None, 28, 28, 1), dtype="float32", name="images")
    model.export(out_path, format="onnx", verbose=False, input_signature=[spec])


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m lenet_onnx.export WEIGHTS OUT.onnx")
    export(sys.argv[1], sys.argv[2])
