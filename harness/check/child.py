"""Implementations' outputs for `verify`, in a process of their own (one framework, one Keras
backend per interpreter, as in the studies' workers; verify.children says which targets share one).

    python -m harness.check.child TARGET[,TARGET...] DEVICE WEIGHTS OUT_DIR DTYPE[,DTYPE...] [LIMIT]

A target is a level (every variant it runs on DEVICE) or level/variant. For each target, each dtype
its level offers and each variant it names it writes OUT_DIR/output_name(row)
(the probabilities of the test images) and prints one JSON line: {"implementation", "dtype",
"variant", "status": "ok" | "unavailable" | "FAIL", "reason", "seconds"}.
A fatal input error (bad weights, bad data) is one line {"fatal": "..."}.
"""

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness import registry
from harness.base import predict_all
from harness.data import mnist
from harness.errors import HarnessError, Unavailable

Say = Callable[[str], object]  # where a JSON line goes (its return value unused)


def output_name(row: dict[str, object]) -> str:
    """The file of one row's probabilities in OUT_DIR: implementation, dtype and variant."""
    return f"{row['implementation']}-{row['dtype']}-{row['variant']}.npy"


def level_of(target: str) -> str:
    """A target's level: "cuda/rows" -> "cuda", "numpy" -> "numpy"."""
    return target.split("/", 1)[0]


def variants_of(target: str, device: str) -> list[str]:
    """The variants a target names: one ("cuda/rows"), or every one the level runs on the device."""
    level = level_of(target)
    return [target[len(level) + 1:]] if target != level else list(registry.spec(level).variants_for(device))


def outputs(target: str, device: str, weights_path: str | Path, out_dir: str, dtype: str = "float32",
            limit: int | None = None, say: Say = print) -> None:
    name = level_of(target)
    images, _ = mnist.load("test")
    x = mnist.to_input(images[:limit] if limit else images).astype(dtype)
    for variant in variants_of(target, device):
        row: dict[str, object] = {"implementation": name, "dtype": dtype, "variant": variant,
                                  "status": "ok", "reason": None}
        started = time.perf_counter()
        try:
            impl = registry.create(name, weights_path, device=device, variant=variant, dtype=dtype)
            try:
                np.save(os.path.join(out_dir, output_name(row)), predict_all(impl, x))
            finally:
                impl.close()
        except Unavailable as exc:
            row.update(status="unavailable", reason=str(exc))
        except HarnessError:
            raise
        except Exception as exc:  # an implementation that crashes is a failed check
            traceback.print_exc()
            row.update(status="FAIL", reason=f"{type(exc).__name__}: {exc}".splitlines()[0])
        row["seconds"] = round(time.perf_counter() - started, 2)
        say(json.dumps(row))


def main(argv: list[str] | None = None) -> int:
    names, device, weights_path, out_dir, dtypes, *rest = argv or sys.argv[1:]
    limit = int(rest[0]) if rest else None

    def produce(say: Say) -> None:
        for target in names.split(","):
            for dtype in dtypes.split(","):
                if dtype in registry.spec(level_of(target)).dtypes:
                    outputs(target, device, weights_path, out_dir, dtype, limit, say=say)

    return serve(produce)


def serve(produce: Callable[[Say], None]) -> int:
    """Run produce(say) with stdout kept for the JSON lines alone: framework chatter on fd 1
    goes to stderr. A HarnessError is one {"fatal": ...} line and exit code 2."""
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        produce(lambda line: replies.write(line + "\n"))
    except HarnessError as exc:
        replies.write(json.dumps({"fatal": str(exc)}) + "\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
