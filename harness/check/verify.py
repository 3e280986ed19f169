"""Prove the implementations agree: every chosen implementation, variant and dtype over all
10,000 test images, against the NumPy reference in the same dtype.

Pass: argmax equal on every image, and max |p - p_ref| <= 1e-5.
"""

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness import DEFAULT_WEIGHTS, ROOT, registry
from harness.check.child import level_of, variants_of
from harness.data import mnist
from harness.errors import HarnessError
from harness.frameworks import gpu_fault

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


CHILD_TIMEOUT_S = {"gpu": 150.0, "cpu": 900.0}  # one child's limit: a GPU child checks one level in one dtype
BAD = ("FAIL", "hung", "fault")  # a check that failed: a wrong answer, a hang, a fault (gpu_fault)


def verify(names: Sequence[str], device: str = "cpu", weights_path: str | Path | None = None,
           data_dir: str | Path | None = None, limit: int | None = None,
           progress: Callable[[str], None] = print, dtypes: Sequence[str] = ("float32",),
           on_row: Callable[[list[Row]], None] | None = None, timeout_s: float | None = None) -> list[Row]:
    """One row per implementation x variant x dtype: status ok / FAIL / hung / fault / unavailable,
    with the numbers. A name is a level (every variant it runs on the device) or level/variant. A dtype
    the level does not offer is left out (a level offering none is a row). on_row(rows so far) is
    called after each row, so a run stopped half-way keeps its rows.

    The levels run in child processes (harness.check.child; children says which), each with its
    registry environment (KERAS_BACKEND, XLA_FLAGS) and under a limit (timeout_s, else
    CHILD_TIMEOUT_S of the device); a child that ends before its last variant (a fault or a hang
    it named, its limit, a crash) leaves a row saying why for the variant it was on, and a fresh
    child checks the variants after it."""
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

    runnable = []
    for name in dict.fromkeys(names):
        spec = registry.spec(level_of(name))
        offered = [dtype for dtype in dtypes if dtype in spec.dtypes]
        reason = (f"{spec.name} runs on {list(spec.devices)}" if device not in spec.devices else
                  f"{spec.name} offers {list(spec.dtypes)}, not {list(dtypes)}" if not offered else None)
        if reason:
            add({"implementation": level_of(name), "variant": "-", "device": device, "dtype": "-",
                 "status": "unavailable", "reason": reason})
        else:
            runnable.append(name)
    limit_s = timeout_s or CHILD_TIMEOUT_S.get(device, CHILD_TIMEOUT_S["cpu"])
    for members, child_dtypes in children(runnable, dtypes, device):
        with tempfile.TemporaryDirectory(prefix="lenet-verify-") as out_dir:
            for row in child_rows(members, device, weights_path, out_dir, limit, child_dtypes, limit_s):
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
    levels = [level_of(name) for name in names]
    return sorted(rows, key=lambda row: levels.index(row["implementation"]))


def children(names: Sequence[str], dtypes: Sequence[str], device: str) -> list[tuple[list[str], list[str]]]:
    """The child processes verify starts, each (targets, dtypes). On the GPU one level (or target) in
    one dtype each: a kernel that hangs or poisons its context (harness.frameworks.gpu_fault) ends
    its own process only, and every other level and dtype is still checked. Elsewhere a family
    (families) in every dtype its levels offer: one import of a framework serves them."""
    if device == "gpu":
        return [([name], [dtype]) for name in names for dtype in dtypes
                if dtype in registry.spec(level_of(name)).dtypes]
    return [(family, list(dtypes)) for family in families(names)]


def families(names: Sequence[str]) -> list[list[str]]:
    """The names in groups that share one child process, in the order of each group's first name:
    levels on the same framework (their installs' frameworks but Keras: tf and keras on TensorFlow,
    jax and keras_jax, torch and keras_torch) whose environments differ at most by KERAS_BACKEND,
    which only Keras reads, with at most one Keras level in a group (one backend per process).
    One import of the framework serves both levels. Every other level runs alone."""
    def is_keras(name: str) -> bool:
        return "KERAS_BACKEND" in registry.process_env(level_of(name))

    groups: list[tuple[frozenset[str], dict[str, str], list[str]]] = []
    for name in names:
        framework = frozenset(registry.spec(level_of(name)).installs.frameworks) - {"keras"}
        env = {key: value for key, value in registry.process_env(level_of(name)).items()
               if key != "KERAS_BACKEND"}
        for key, shared, members in groups:
            if (framework and key == framework and shared == env and name not in members
                    and not (is_keras(name) and any(map(is_keras, members)))):
                members.append(name)
                break
        else:
            groups.append((framework, env, [name]))
    return [members for _, _, members in groups]


def child_rows(names: Sequence[str], device: str, weights_path: str | Path, out_dir: str, limit: int | None,
               dtypes: Sequence[str] = ("float32",), timeout_s: float | None = None) -> Iterator[Row]:
    """Run harness.check.child for the targets (of one family, or one level in one dtype: children)
    in every dtype each offers; yield its rows as they come. Where it ends before its last variant,
    the row of the variant it was on says why, and a fresh child checks the ones after it (each
    child's start makes progress: it is never started twice for the same first variant)."""
    expected = [{"implementation": level_of(name), "dtype": dtype, "variant": variant} for name in names
                for dtype in dtypes if dtype in registry.spec(level_of(name)).dtypes
                for variant in variants_of(name, device)]
    todo: list[Row] = []
    targets = list(names)  # the first child checks them all, in the child's order (expected's)
    while expected:
        command = [sys.executable, "-m", "harness.check.child", ",".join(targets), device,
                   str(weights_path), out_dir, ",".join(dict.fromkeys(row["dtype"] for row in expected))]
        command += [str(limit)] if limit else []
        rest: list[Row] = []
        levels = list(dict.fromkeys(level_of(name) for name in names))
        yield from rows_of_child(command, levels, expected, os.path.join(out_dir, "stderr.log"), "verify",
                                 timeout_s, rest)
        todo = rest + todo  # a fresh child for the rest, one dtype at a time, variant by variant
        dtype = todo[0]["dtype"] if todo else None
        expected = [row for row in todo if row["dtype"] == dtype]
        todo = [row for row in todo if row["dtype"] != dtype]
        targets = list(dict.fromkeys(f"{row['implementation']}/{row['variant']}" for row in expected))


def ended_how(code: int | None, log_text: str, timed_out: float | None, what: str,
              names: Sequence[str]) -> tuple[str, str]:
    """(status, reason) of a child that ended before its last row: a fault or hang it named on stderr
    (harness.frameworks.gpu_fault), killed at its limit (hung), else a crash (FAIL, its exit code)."""
    process = f"the {what} process for {','.join(names)}"
    found = gpu_fault.named(log_text)
    if found and gpu_fault.kind_of(code) == found[0]:
        return found[0], f"{found[1]} ({process} ended with exit code {code})"
    if timed_out is not None:
        return "hung", f"{process} did not finish within {timed_out:g} s: killed while this ran"
    return "FAIL", f"{process} ended with exit code {code}"


def rows_of_child(command: list[str], names: Sequence[str], expected: Sequence[Row], log_path: str,
                  what: str, timeout_s: float | None = None, rest: list[Row] | None = None) -> Iterator[Row]:
    """Run one child (with its levels' registry environments; its own process group, killed whole at
    timeout_s), yield its JSON rows as they come, then a row for each expected row (its identifying
    fields) it never reported: the first says how the child ended (ended_how); the others are FAIL
    rows naming its exit code, or, where the caller passes `rest`, appended there to be run again."""
    child_env = {**os.environ}
    for name in names:
        child_env.update(registry.process_env(level_of(name)))
    seen = []
    timed_out = None
    with open(log_path, "w") as log, subprocess.Popen(command, cwd=ROOT, env=child_env, text=True,
                                                      stdout=subprocess.PIPE, stderr=log,
                                                      start_new_session=True) as process:
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            for line in process.stdout or ():  # a PIPE: never None
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout_s if timeout_s else None
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()) if deadline else None)
            except queue.Empty:
                timed_out = timeout_s
                kill_group(process)
                break
            if line is None:
                break
            row = json.loads(line)
            if "fatal" in row:
                process.wait()
                raise HarnessError(row["fatal"])
            seen.append({key: row.get(key) for key in expected[0]} if expected else row)
            yield row
        code = process.wait()
    missing = [row for row in expected if row not in seen]
    log_text = open(log_path, errors="replace").read()
    if code != 0 or missing:  # framework chatter, shown when something failed
        print("\n".join(f"  | {line}" for line in log_text.strip().splitlines()[-15:]), file=sys.stderr)
    if missing:
        status, reason = ended_how(code, log_text, timed_out, what, names)
        yield {**missing[0], "status": status, "reason": reason}
    for row in missing[1:]:
        if rest is not None:
            rest.append(row)
        else:
            yield {**row, "status": "FAIL",
                   "reason": f"the {what} process for {','.join(names)} ended with exit code {code}"}


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL to the child's process group (started with start_new_session)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


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
    """1 when any check failed (a wrong answer, a hang, a fault), 3 when nothing failed but something
    could not run, else 0."""
    if any(row["status"] in BAD for row in rows):
        return 1
    return 3 if any(row["status"] == "unavailable" for row in rows) else 0


def require_known(names: Sequence[str], device: str | None = None) -> None:
    """Each name a known level (or level/variant, the variant one the level runs on the device)."""
    for name in names:
        spec = registry.spec(level_of(name))  # raises with the list of known names
        if name != level_of(name) and device is not None:
            runs = spec.variants_for(device) if device in spec.devices else ()
            for variant in variants_of(name, device):
                if variant not in runs:
                    raise HarnessError(f"--implementations: {spec.name} has no variant {variant!r} on "
                                       f"{device}; it runs {', '.join(runs) or 'nothing there'}")
    if not names:
        raise HarnessError("--implementations: expected at least one name")
