"""Prove the implementations agree: every chosen implementation, variant and dtype over all
10,000 test images, against the NumPy reference in the same dtype.

Pass: argmax equal on every image, and max |p - p_ref| <= 1e-5.
"""

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness import DEFAULT_WEIGHTS, ROOT, registry
from harness.data import mnist
from harness.errors import HarnessError

TOLERANCE = 1e-5
Row = dict[str, Any]  # one implementation x variant x dtype, as printed and written by --json


def check(probs: np.ndarray, reference: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
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


def verify(names: Sequence[str], device: str = "cpu", weights_path: str | Path | None = None,
           data_dir: str | Path | None = None, limit: int | None = None,
           progress: Callable[[str], None] = print, dtypes: Sequence[str] = ("float32",),
           on_row: Callable[[list[Row]], None] | None = None) -> list[Row]:
    """One row per implementation x variant x dtype: status ok / FAIL / unavailable, with the
    numbers. A dtype the level does not offer is left out (a level offering none is a row).
    on_row(rows so far) is called after each row, so a run stopped half-way keeps its rows.

    Each family of implementations (families) runs in a child process (harness.check.child) with
    its registry environment (KERAS_BACKEND, XLA_FLAGS), so three Keras backends verify in one
    command."""
    from harness.base import predict_all
    from harness.check import child
    from lenet_numpy.model import NumpyLeNet  # the oracle: NumPy only

    weights_path = weights_path or DEFAULT_WEIGHTS
    if data_dir:
        os.environ["LENET_DATA_DIR"] = str(data_dir)  # the children read the same images
    images, labels = mnist.load("test")
    if limit:
        images, labels = images[:limit], labels[:limit]
    x = mnist.to_input(images)
    references = {dtype: predict_all(NumpyLeNet(weights_path, dtype=dtype), x.astype(dtype))
                  .astype(np.float64) for dtype in dtypes}
    rows: list[Row] = []

    def add(row: Row) -> None:
        rows.append(row)
        if on_row:
            on_row(rows)
        progress(format_row(row))

    for family in families(names):
        runnable = []
        for name in family:
            spec = registry.spec(name)
            offered = [dtype for dtype in dtypes if dtype in spec.dtypes]
            reason = (f"{name} runs on {list(spec.devices)}" if device not in spec.devices else
                      f"{name} offers {list(spec.dtypes)}, not {list(dtypes)}" if not offered else None)
            if reason:
                add({"implementation": name, "variant": "-", "device": device, "dtype": "-",
                     "status": "unavailable", "reason": reason})
            else:
                runnable.append(name)
        if not runnable:
            continue
        with tempfile.TemporaryDirectory(prefix="lenet-verify-") as out_dir:
            for row in child_rows(runnable, device, weights_path, out_dir, limit, dtypes):
                row = {"implementation": row.pop("implementation"), "device": device,
                       "dtype": row.pop("dtype"), **row}
                if row["status"] == "ok":
                    probs = np.load(os.path.join(out_dir, child.output_name(row)))
                    row.update(check(probs, references[row["dtype"]], labels))
                add(row)
    return in_order(rows, names)


def in_order(rows: list[Row], names: Sequence[str]) -> list[Row]:
    """The rows in the order their implementations were named (a family's child reports its
    members together), each implementation's rows in the order its child reported them."""
    return sorted(rows, key=lambda row: list(names).index(row["implementation"]))


def families(names: Sequence[str]) -> list[list[str]]:
    """The names in groups that share one child process, in the order of each group's first name:
    levels on the same framework (their installs' frameworks but Keras: tf and keras on TensorFlow,
    jax and keras_jax, torch and keras_torch) whose environments differ at most by KERAS_BACKEND,
    which only Keras reads, with at most one Keras level in a group (one backend per process).
    One import of the framework serves both levels. Every other level runs alone."""
    def is_keras(name: str) -> bool:
        return "KERAS_BACKEND" in registry.process_env(name)

    groups: list[tuple[frozenset[str], dict[str, str], list[str]]] = []
    for name in names:
        framework = frozenset(registry.spec(name).installs.frameworks) - {"keras"}
        env = {key: value for key, value in registry.process_env(name).items() if key != "KERAS_BACKEND"}
        for key, shared, members in groups:
            if (framework and key == framework and shared == env and name not in members
                    and not (is_keras(name) and any(map(is_keras, members)))):
                members.append(name)
                break
        else:
            groups.append((framework, env, [name]))
    return [members for _, _, members in groups]


def child_rows(names: Sequence[str], device: str, weights_path: str | Path, out_dir: str, limit: int | None,
               dtypes: Sequence[str] = ("float32",)) -> Iterator[Row]:
    """Run harness.check.child for implementations of one family (families) and every dtype each
    offers; yield its rows as they come."""
    command = [sys.executable, "-m", "harness.check.child", ",".join(names), device,
               str(weights_path), out_dir, ",".join(dtypes)] + ([str(limit)] if limit else [])
    expected = [{"implementation": name, "dtype": dtype, "variant": variant} for name in names
                for dtype in dtypes if dtype in registry.spec(name).dtypes
                for variant in registry.spec(name).variants_for(device)]
    yield from rows_of_child(command, names, expected, os.path.join(out_dir, "stderr.log"), "verify")


def rows_of_child(command: list[str], names: Sequence[str], expected: Sequence[Row], log_path: str,
                  what: str) -> Iterator[Row]:
    """Run one child (with its levels' registry environments), yield its JSON rows as they come,
    then a FAIL row for each expected row (its identifying fields) it never reported (it died: a
    crash in native code)."""
    child_env = {**os.environ}
    for name in names:
        child_env.update(registry.process_env(name))
    with open(log_path, "w") as log, subprocess.Popen(command, cwd=ROOT, env=child_env, text=True,
                                                      stdout=subprocess.PIPE, stderr=log) as process:
        seen = []
        for line in process.stdout or ():  # a PIPE: never None
            row = json.loads(line)
            if "fatal" in row:
                process.wait()
                raise HarnessError(row["fatal"])
            seen.append({key: row.get(key) for key in expected[0]} if expected else row)
            yield row
        code = process.wait()
    missing = [row for row in expected if row not in seen]
    if code != 0 or missing:  # framework chatter, shown when something failed
        tail = open(log_path).read().strip().splitlines()[-15:]
        print("\n".join(f"  | {line}" for line in tail), file=sys.stderr)
    for row in missing:
        yield {**row, "status": "FAIL",
               "reason": f"the {what} process for {','.join(names)} ended with exit code {code}"}


def format_row(row: Row) -> str:
    head = (f"{row['implementation'] + '/' + row['variant']:<28} {row['device']:<4} "
            f"{row.get('dtype', 'float32'):<8} {row['status']:<11}")
    if "agree" in row:
        return (f"{head} accuracy {row['accuracy']:.4f}  agree {row['agree']}/{row['images']}  "
                f"max|dp| {row['max_abs_diff']:.1e}  ({row['seconds']} s)")
    return f"{head} {row.get('reason') or ''}"


HEADER = (f"{'implementation/variant':<28} {'dev':<4} {'dtype':<8} {'status':<11} "
          f"(tolerance: argmax equal, max|dp| <= {TOLERANCE:g})")


def exit_code(rows: list[Row]) -> int:
    """1 when any check failed, 3 when nothing failed but something could not run, else 0."""
    if any(row["status"] == "FAIL" for row in rows):
        return 1
    return 3 if any(row["status"] == "unavailable" for row in rows) else 0


def require_known(names: Sequence[str]) -> None:
    for name in names:
        registry.spec(name)  # raises with the list of known names
    if not names:
        raise HarnessError("--implementations: expected at least one name")
