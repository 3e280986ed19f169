"""Read the shared HDF5 weights into NumPy arrays, in Keras layouts, and check every tensor.

Two file layouts are read:
- Keras 3 `model.save_weights(...weights.h5)`: /layers/<group>/vars/{0,1}, the vars group's
  `name` attribute holding the layer name (conv1 ... fc3 in our files);
- legacy Keras 2 / tf.keras HDF5: [model_weights/]<layer>/<layer>/kernel:0 and bias:0, with the
  layer order in the root's `layer_names` attribute (files students bring).
Where the layer names are not ours, the five weighted layers are taken in file order.
"""

from pathlib import Path
from typing import NamedTuple

import h5py
import numpy as np

from harness import DEFAULT_WEIGHTS
from harness.errors import HarnessError

# Keras layouts: conv kernels HWIO, dense kernels (inputs, outputs); fc1's 400 rows are in NHWC
# flatten order of the (5, 5, 16) pool2 output.
SHAPES = {
    "conv1": ((5, 5, 1, 6), (6,)),
    "conv2": ((5, 5, 6, 16), (16,)),
    "fc1": ((400, 120), (120,)),
    "fc2": ((120, 84), (84,)),
    "fc3": ((84, 10), (10,)),
}
N_PARAMETERS = 61_706


class Layer(NamedTuple):
    kernel: np.ndarray
    bias: np.ndarray


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _keras3_layers(f: h5py.File) -> list[tuple[str, list]]:
    found = []
    for group_name, group in f["layers"].items():
        vars_group = group.get("vars")
        if not isinstance(vars_group, h5py.Group) or len(vars_group) == 0:
            continue  # pooling, flatten: no weights
        name = _text(vars_group.attrs.get("name", group_name))
        tensors = [vars_group[k] for k in sorted(vars_group, key=int)]
        found.append((name, tensors))
    return found


def _legacy_layers(f: h5py.File) -> list[tuple[str, list]]:
    root = f["model_weights"] if "model_weights" in f else f
    names = [_text(n) for n in root.attrs.get("layer_names", list(root))]
    found = []
    for name in names:
        group = root.get(name)
        if not isinstance(group, h5py.Group):
            continue
        datasets = []

        def collect(_, obj, datasets=datasets):
            if isinstance(obj, h5py.Dataset):
                datasets.append(obj)

        group.visititems(collect)
        kernel = [d for d in datasets if d.name.rsplit("/", 1)[-1].startswith("kernel")]
        bias = [d for d in datasets if d.name.rsplit("/", 1)[-1].startswith("bias")]
        if kernel or bias:
            found.append((name, kernel[:1] + bias[:1]))
    return found


def _assign(found: list[tuple[str, list]], path: Path) -> dict[str, list]:
    """Map the file's weighted layers onto conv1 ... fc3: by name, else by order."""
    by_name = dict(found)
    if set(SHAPES) <= set(by_name):
        return {name: by_name[name] for name in SHAPES}
    if len(found) != len(SHAPES):
        names = [name for name, _ in found]
        raise HarnessError(
            f"{path}: not a LeNet-5 weights file: expected {len(SHAPES)} weighted layers "
            f"({', '.join(SHAPES)}), found {len(found)}: {names}"
        )
    return {ours: tensors for ours, (_, tensors) in zip(SHAPES, found, strict=True)}


def _check(name: str, tensors: list, path: Path) -> Layer:
    kernel_shape, bias_shape = SHAPES[name]
    if len(tensors) != 2:
        raise HarnessError(
            f"{path}: layer {name}: expected a kernel and a bias, found {len(tensors)} tensor(s)"
        )
    arrays = []
    for role, dataset, shape in zip(("kernel", "bias"), tensors, (kernel_shape, bias_shape), strict=True):
        if dataset.shape != shape:
            raise HarnessError(
                f"{path}: {name}/{role} ({dataset.name}): expected shape {shape}, "
                f"found {dataset.shape}"
            )
        if dataset.dtype != np.float32:
            raise HarnessError(
                f"{path}: {name}/{role} ({dataset.name}): expected float32, found {dataset.dtype}"
            )
        array = np.asarray(dataset[()], dtype=np.float32)
        if not np.all(np.isfinite(array)):
            bad = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
            raise HarnessError(
                f"{path}: {name}/{role}: {bad} non-finite value(s) (NaN or Inf); "
                "expected finite weights"
            )
        arrays.append(array)
    return Layer(*arrays)


def open_h5(path) -> h5py.File:
    path = Path(path)
    if not path.is_file():
        raise HarnessError(f"weights file not found: {path} (make weights trains and writes it)")
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        raise HarnessError(
            f"{path}: not a readable HDF5 file (truncated or damaged?): {exc}"
        ) from None


def read(path=DEFAULT_WEIGHTS) -> dict[str, Layer]:
    """{'conv1': Layer(kernel, bias), ..., 'fc3': ...} as float32 NumPy arrays, Keras layouts."""
    path = Path(path)
    with open_h5(path) as f:
        try:
            found = _keras3_layers(f) if "layers" in f else _legacy_layers(f)
            assigned = _assign(found, path)
            return {name: _check(name, tensors, path) for name, tensors in assigned.items()}
        except (KeyError, OSError, ValueError) as exc:
            raise HarnessError(f"{path}: unreadable weights ({exc})") from None


def metadata(path=DEFAULT_WEIGHTS) -> dict:
    """The training record stored as root attributes (accuracy, epochs, seed, versions)."""
    with open_h5(path) as f:
        return {key: (v.item() if hasattr(v, "item") else _text(v)) for key, v in f.attrs.items()}
