"""The seeded initial weights every level's training starts from (`make init-weights`).

Glorot-uniform kernels (Keras' default: limit sqrt(6 / (fan_in + fan_out)), conv fans counting
the 5x5 window) and zero biases, drawn from numpy.random.default_rng(seed) in layer order
conv1 ... fc3, written as a legacy weights-only HDF5 file (harness.data.weights.read accepts it;
Keras' load_weights does not need to). No timestamps in the file: the same seed gives the same bytes.

    python -m harness.data.init_weights [--seed 0] [--out weights/lenet5_init.weights.h5]
"""

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from harness import ROOT
from harness.data import weights

DEFAULT_INIT = ROOT / "weights" / "lenet5_init.weights.h5"


def fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """Keras' fans: conv (R, S, C, K) -> (R*S*C, R*S*K); dense (in, out) -> (in, out)."""
    window = int(np.prod(shape[:-2]))
    return window * shape[-2], window * shape[-1]


def glorot(seed: int = 0) -> dict[str, weights.Layer]:
    """{"conv1": Layer(kernel, bias), ...}: float32 Glorot-uniform kernels, zero biases."""
    rng = np.random.default_rng(seed)
    layers = {}
    for name, (kernel_shape, bias_shape) in weights.SHAPES.items():
        fan_in, fan_out = fans(kernel_shape)
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        kernel = rng.uniform(-limit, limit, kernel_shape).astype(np.float32)
        layers[name] = weights.Layer(kernel, np.zeros(bias_shape, np.float32))
    return layers


def untimed(kind: int) -> Any:
    """An HDF5 creation property list without modification times (they would change the bytes)."""
    plist = h5py.h5p.create(kind)
    plist.set_obj_track_times(False)
    return plist


def write(path: Path, layers: dict, seed: int) -> Path:
    """Legacy layout: root attr layer_names, <layer>/<layer>/{kernel:0, bias:0}."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fid = h5py.h5f.create(str(path).encode(), h5py.h5f.ACC_TRUNC, fcpl=untimed(h5py.h5p.FILE_CREATE))
    with h5py.File(fid) as f:
        f.attrs["layer_names"] = np.array([n.encode() for n in layers])
        f.attrs["seed"] = seed
        f.attrs["initializer"] = "glorot_uniform kernels, zero biases, numpy default_rng"
        for name, layer in layers.items():
            outer = h5py.h5g.create(f.id, name.encode(), gcpl=untimed(h5py.h5p.GROUP_CREATE))
            inner = h5py.h5g.create(outer, name.encode(), gcpl=untimed(h5py.h5p.GROUP_CREATE))
            group = h5py.Group(inner)
            group.create_dataset("kernel:0", data=layer.kernel, track_times=False)
            group.create_dataset("bias:0", data=layer.bias, track_times=False)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DEFAULT_INIT)
    args = parser.parse_args(argv)
    print(f"wrote {write(args.out, glorot(args.seed), args.seed)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
