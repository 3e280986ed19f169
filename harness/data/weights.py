"""Read the shared HDF5 weights into NumPy arrays, in Keras layouts, and check every tensor.

Every weights file a student brings is read:
- Keras 3 `model.save_weights("w.weights.h5")`: /layers/<group>/vars/{0,1}, the vars group's
  `name` attribute holding the layer name where Keras wrote one (conv1 ... fc3 in our files);
- Keras 3 `model.save("m.keras")`: a zip archive whose model.weights.h5 has that same layout;
- legacy HDF5, weights only (tf.keras `save_weights("w.h5")`) or the whole model
  (`model.save("m.h5")`, under model_weights/): <layer>/.../kernel[:0] and bias[:0], with the
  layer order in the `layer_names` attribute.
Where the layer names are not ours, the five weighted layers are taken in file order.
A lab kit's weights are a NumPy .npz of the same arrays (conv1.kernel ... fc3.bias, float32: write_npz),
read with NumPy alone: the kit runs where h5py cannot be installed.
Anything else is named (a PyTorch checkpoint, a NumPy archive, a SavedModel folder, text ...)
with the list of what is accepted.
"""

from __future__ import annotations  # h5py's types in signatures, where the kit has no h5py

import io
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

try:
    import h5py
except ImportError:  # a lab kit run with NumPy alone: its weights are .npz (read_npz)
    h5py = None

from harness import DEFAULT_WEIGHTS
from harness.errors import HarnessError

# what reading a weights file needs installed (the imports above): every level that reads the
# weights needs it, whatever its own distributions require (the bill: memory.installed's `also`)
DISTRIBUTIONS = ("h5py", "numpy")

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


def _text(value: object) -> str:
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
        datasets: list[h5py.Dataset] = []

        def collect(_: str, obj: object, datasets: list = datasets) -> None:
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


ACCEPTED = ("expected a Keras weights file: .weights.h5 (Keras 3 model.save_weights), .keras "
            "(Keras 3 model.save) or .h5 (legacy model.save or save_weights), or a lab kit's .npz "
            "(conv1.kernel ... fc3.bias)")
NPZ_NAMES = tuple(f"{name}.{role}" for name in SHAPES for role in ("kernel", "bias"))


def write_npz(layers: dict[str, Layer], path: str | Path) -> None:
    """The weights as a lab kit ships them: one float32 array per NPZ_NAMES entry."""
    arrays: dict[str, Any] = {f"{name}.{role}": np.asarray(getattr(layers[name], role), np.float32)
                              for name in SHAPES for role in ("kernel", "bias")}
    np.savez(path, **arrays)


def read_npz(path: Path) -> dict[str, Layer] | None:
    """A lab kit's .npz (write_npz), checked as an HDF5 file is; None for any other archive."""
    with np.load(path, allow_pickle=False) as z:
        if sorted(z.files) != sorted(NPZ_NAMES):
            return None
        arrays = {key: z[key] for key in NPZ_NAMES}
    out = {}
    for name, shapes in SHAPES.items():
        parts = []
        for role, shape in zip(("kernel", "bias"), shapes, strict=True):
            array = arrays[f"{name}.{role}"]
            if array.shape != shape or array.dtype != np.float32 or not np.all(np.isfinite(array)):
                raise HarnessError(f"{path}: {name}.{role}: expected finite float32 of shape {shape}, found "
                                   f"{array.dtype} {array.shape}")
            parts.append(array)
        out[name] = Layer(*parts)
    return out
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
KERAS_ARCHIVE_WEIGHTS = "model.weights.h5"


def what_is(path: Path, head: bytes) -> str:
    """A reader's name for a file that is not a Keras weights file."""
    if path.is_dir():
        saved = (path / "saved_model.pb").is_file()
        return "a TensorFlow SavedModel folder" if saved else "a folder"
    if not head:
        return "an empty file"
    if zipfile.is_zipfile(path):
        names = zipfile.ZipFile(path).namelist()
        if any(n.endswith("data.pkl") for n in names):
            return "a PyTorch checkpoint (torch.save)"
        if names and all(n.endswith(".npy") for n in names):
            return "a NumPy .npz archive"
        return f"a zip archive without {KERAS_ARCHIVE_WEIGHTS} (members: {names[:5]})"
    if head.startswith(b"\x80"):
        return "a Python pickle"
    if head.startswith(b"\x93NUMPY"):
        return "a NumPy .npy array"
    text = head[:200].decode("utf-8", errors="ignore")
    if text and all(c.isprintable() or c in "\t\r\n" for c in text):
        return f"a text file (starts {text[:24]!r})"
    return f"not HDF5 (starts with bytes {head[:8].hex(' ')})"


def open_h5(path: str | Path) -> h5py.File:
    """The weights as an open HDF5 file: the file itself, or the weights inside a .keras archive."""
    path = Path(path)
    if not path.exists():
        raise HarnessError(f"weights file not found: {path} (make weights trains and writes it)")
    head = b"" if path.is_dir() else path.open("rb").read(512)
    if head.startswith(HDF5_SIGNATURE):
        try:
            return h5py.File(path, "r")
        except OSError as exc:
            raise HarnessError(f"{path}: an HDF5 file that cannot be read (truncated or damaged?): "
                               f"{exc}") from None
    if not path.is_dir() and zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                if KERAS_ARCHIVE_WEIGHTS in archive.namelist():  # a Keras 3 .keras model archive
                    return h5py.File(io.BytesIO(archive.read(KERAS_ARCHIVE_WEIGHTS)), "r")
        except (OSError, zipfile.BadZipFile) as exc:
            raise HarnessError(f"{path}: a .keras archive that cannot be read (truncated or "
                               f"damaged?): {exc}") from None
    raise HarnessError(f"{path}: {what_is(path, head)}; {ACCEPTED}")


def read(path: str | Path = DEFAULT_WEIGHTS) -> dict[str, Layer]:
    """{'conv1': Layer(kernel, bias), ..., 'fc3': ...} as float32 NumPy arrays, Keras layouts."""
    path = Path(path)
    if path.suffix == ".npz" and path.is_file() and zipfile.is_zipfile(path):
        kit = read_npz(path)
        if kit is not None:
            return kit
    with open_h5(path) as f:
        try:
            found = _keras3_layers(f) if "layers" in f else _legacy_layers(f)
            assigned = _assign(found, path)
            return {name: _check(name, tensors, path) for name, tensors in assigned.items()}
        except (KeyError, OSError, ValueError) as exc:
            raise HarnessError(f"{path}: unreadable weights ({exc})") from None


def metadata(path: str | Path = DEFAULT_WEIGHTS) -> dict:
    """The training record stored as root attributes (accuracy, epochs, seed, versions)."""
    with open_h5(path) as f:
        return {key: (v.item() if hasattr(v, "item") else _text(v)) for key, v in f.attrs.items()}
