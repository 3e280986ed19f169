"""MNIST from the shipped IDX .gz files, checked against SHA256SUMS of the uncompressed bytes.

The folder is data/mnist/ unless `--data-dir` or LENET_DATA_DIR says otherwise.
"""

import gzip
import hashlib
import os
import zlib
from pathlib import Path

import numpy as np

from harness import DEFAULT_DATA_DIR
from harness.errors import HarnessError

FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
IDX_UINT8 = 0x08


def data_dir(path: str | Path | None = None) -> Path:
    """The MNIST folder: an explicit path, else $LENET_DATA_DIR, else the shipped data/mnist."""
    return Path(path or os.environ.get("LENET_DATA_DIR") or DEFAULT_DATA_DIR)


def read_checksums(folder: Path) -> dict[str, str]:
    sums = folder / "SHA256SUMS"
    if not sums.is_file():
        raise HarnessError(f"{sums}: missing; expected a SHA256SUMS file beside the MNIST files")
    table = {}
    for lineno, line in enumerate(sums.read_text().splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or len(parts[0]) != 64:
            raise HarnessError(f"{sums}:{lineno}: expected '<sha256> <name>', found {line!r}")
        table[parts[1].lstrip("*")] = parts[0].lower()
    return table


def parse_idx(raw: bytes, name: str) -> np.ndarray:
    """IDX: 2 zero bytes, type byte (0x08 uint8), ndim byte, big-endian uint32 dims, data."""
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise HarnessError(f"{name}: not an IDX file (bad magic {raw[:4].hex()!r})")
    if raw[2] != IDX_UINT8:
        raise HarnessError(f"{name}: expected IDX type 0x08 (uint8), found 0x{raw[2]:02x}")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise HarnessError(f"{name}: truncated IDX header")
    dims = tuple(int(d) for d in np.frombuffer(raw[4:header], dtype=">u4"))
    expected = int(np.prod(dims))
    if len(raw) - header != expected:
        raise HarnessError(
            f"{name}: truncated or padded: header says {dims} = {expected} bytes of data, "
            f"found {len(raw) - header}"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def read_idx(path: Path, expected_sha256: str | None) -> np.ndarray:
    """One IDX file, gzip-compressed (`name.gz`) or plain, verified against its hash."""
    gz = path.with_name(path.name + ".gz")
    source = gz if gz.is_file() else path
    if not source.is_file():
        raise HarnessError(f"{gz}: missing (expected SHA-256 {expected_sha256})")
    try:
        raw = gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes()
    except (OSError, EOFError, zlib.error) as exc:
        raise HarnessError(
            f"{source}: damaged gzip data ({exc}); expected SHA-256 {expected_sha256} "
            "of the uncompressed file"
        ) from None
    digest = hashlib.sha256(raw).hexdigest()
    if expected_sha256 is not None and digest != expected_sha256:
        raise HarnessError(
            f"{source}: checksum mismatch: expected SHA-256 {expected_sha256}, found {digest} "
            "(damaged or replaced file)"
        )
    return parse_idx(raw, str(source))


def load(split: str = "test", folder: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 28, 28) uint8 and labels (N,) uint8 of the 'train' or 'test' split."""
    if split not in FILES:
        raise HarnessError(f"unknown MNIST split {split!r}; expected one of {sorted(FILES)}")
    folder = data_dir(folder)
    sums = read_checksums(folder)
    image_name, label_name = FILES[split]
    images = read_idx(folder / image_name, sums.get(image_name))
    labels = read_idx(folder / label_name, sums.get(label_name))
    if images.ndim != 3 or images.shape[1:] != (28, 28):
        raise HarnessError(f"{folder / image_name}: expected (N, 28, 28) images, found {images.shape}")
    if labels.shape != images.shape[:1]:
        raise HarnessError(
            f"{folder / label_name}: {labels.shape[0]} labels for {images.shape[0]} images"
        )
    return images, labels


def to_input(images: np.ndarray, dtype: str = "float32") -> np.ndarray:
    """uint8 (N, 28, 28) -> (N, 28, 28, 1) in [0, 1]: the input every implementation takes."""
    return (images.astype(dtype) / 255.0).astype(dtype)[..., np.newaxis]
