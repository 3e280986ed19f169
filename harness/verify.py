"""Prove the implementations agree: every chosen implementation and variant over all 10,000
test images, against the NumPy float32 reference.

Pass: argmax equal on every image, and max |p - p_ref| <= 1e-5 (float32).
"""

import time

import numpy as np

from harness import mnist, registry
from harness.errors import HarnessError, Unavailable

TOLERANCE = 1e-5
CHUNK = 1000  # images per predict call: bounds memory, keeps every variant on one path


def predict_all(impl, images: np.ndarray) -> np.ndarray:
    return np.concatenate([impl.predict(images[i:i + CHUNK]) for i in range(0, len(images), CHUNK)])


def check(probs, reference, labels) -> dict:
    if probs.shape != reference.shape:
        return {"status": "FAIL", "reason": f"output shape {probs.shape}, expected {reference.shape}"}
    agree = int(np.sum(probs.argmax(1) == reference.argmax(1)))
    diff = float(np.max(np.abs(probs.astype(np.float64) - reference)))
    ok = agree == len(labels) and diff <= TOLERANCE  # NaN fails here too
    return {
        "status": "ok" if ok else "FAIL",
        "accuracy": float(np.mean(probs.argmax(1) == labels)),
        "agree": agree,
        "images": len(labels),
        "max_abs_diff": diff,
    }


def verify(names, device="cpu", weights_path=None, data_dir=None, limit=None, progress=print):
    """One row per implementation x variant: status ok / FAIL / unavailable, with the numbers."""
    from lenet_numpy.model import NumpyLeNet  # the oracle: NumPy only

    images, labels = mnist.load("test", data_dir)
    if limit:
        images, labels = images[:limit], labels[:limit]
    x = mnist.to_input(images)
    reference = predict_all(NumpyLeNet(weights_path), x).astype(np.float64)
    rows = []
    for name in names:
        spec = registry.spec(name)
        if device not in spec.devices:
            rows.append({"implementation": name, "variant": "-", "device": device,
                         "status": "unavailable", "reason": f"{name} runs on {list(spec.devices)}"})
            continue
        for variant in spec.variants:
            row = {"implementation": name, "variant": variant, "device": device}
            started = time.perf_counter()
            try:
                impl = registry.create(name, weights_path, device=device, variant=variant)
                try:
                    probs = predict_all(impl, x)
                finally:
                    impl.close()
                row.update(check(probs, reference, labels))
            except Unavailable as exc:
                row.update(status="unavailable", reason=str(exc))
            except HarnessError:
                raise  # bad weights, bad data: the whole command fails with that message
            except Exception as exc:  # an implementation that crashes is a failed check
                row.update(status="FAIL", reason=f"{type(exc).__name__}: {exc}")
            row["seconds"] = round(time.perf_counter() - started, 2)
            progress(format_row(row))
            rows.append(row)
    return rows


def format_row(row: dict) -> str:
    head = f"{row['implementation'] + '/' + row['variant']:<24} {row['device']:<4} {row['status']:<11}"
    if "agree" in row:
        return (f"{head} accuracy {row['accuracy']:.4f}  agree {row['agree']}/{row['images']}  "
                f"max|dp| {row['max_abs_diff']:.1e}  ({row['seconds']} s)")
    return f"{head} {row.get('reason', '')}"


HEADER = (f"{'implementation/variant':<24} {'dev':<4} {'status':<11} "
          f"(tolerance: argmax equal, max|dp| <= {TOLERANCE:g})")


def exit_code(rows) -> int:
    """1 when any check failed, 3 when nothing failed but something could not run, else 0."""
    if any(row["status"] == "FAIL" for row in rows):
        return 1
    return 3 if any(row["status"] == "unavailable" for row in rows) else 0


def require_known(names):
    for name in names:
        registry.spec(name)  # raises with the list of known names
    if not names:
        raise HarnessError("--implementations: expected at least one name")
