"""Run a list of commands one after another, each a Step, and record each in a manifest.

A step is a subprocess with its own log file and time limit. A failing or timed-out step is a
record with its exit code and the log's last lines, never the end of the campaign; a step
that would start after the overall deadline is recorded as skipped. The manifest (JSON) is
rewritten after every step, so a campaign killed half-way still says what it did; a caller's
`after` hook runs then too (gpu-study packs its archive again: a command cut off keeps its steps).
"""

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness import ROOT
from harness.machine.files import write_atomic

TAIL_LINES = 20


@dataclass(frozen=True)
class Step:
    name: str  # also the log's file name: logs/<name>.log
    command: tuple[str, ...]
    timeout_s: float
    env: tuple[tuple[str, str], ...] = field(default=())
    ok_codes: tuple[int, ...] = (0,)  # e.g. verify's 3: some level cannot run here (a row says why)
    skip: str = ""  # why it is not run at all (e.g. none of --levels' targets in it): a skipped record
    estimate_s: float | None = None  # its seconds as stated, for a plan made before any manifest timed it


def python_step(name: str, args: Sequence[str], timeout_s: float, **kwargs: Any) -> Step:
    """A step that runs this Python (`python -m ...`), so it uses the same environment."""
    return Step(name, (sys.executable, *args), timeout_s, **kwargs)


def tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def run_step(step: Step, log_path: Path) -> dict[str, Any]:
    """Run one step; its stdout and stderr go to log_path. Returns its manifest record."""
    started = time.monotonic()
    record: dict[str, Any] = {"name": step.name, "command": list(step.command), "log": str(log_path.name)}
    with open(log_path, "w") as log:
        try:
            child = subprocess.Popen(step.command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **dict(step.env)}, start_new_session=True)
        except OSError as exc:
            record.update(exit_code=None, status="failed", reason=f"could not start: {exc}")
            return {**record, "seconds": 0.0, "tail": []}
        try:
            code = child.wait(timeout=step.timeout_s)
            status = "ok" if code in step.ok_codes else "failed"
        except subprocess.TimeoutExpired:
            stop(child)
            code, status = child.returncode, "timeout"
            record["reason"] = f"stopped after {step.timeout_s:g} s (its rows so far are kept)"
    record.update(exit_code=code, status=status, seconds=round(time.monotonic() - started, 1),
                  tail=tail(log_path))
    return record


def stop(child: subprocess.Popen, grace_s: float = 15.0) -> None:
    """SIGTERM to the step's process group (the harness keeps its rows), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_all(steps: list[Step], out: Path, manifest: dict[str, Any], deadline_s: float,
            say: Callable[[str], None] = print,
            after: Callable[[Step, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run the steps in order into out/logs/, the manifest written to out/manifest.json after each,
    then after(step, its record) (gpu-study: the smoke's verdicts kept, the archive packed again)."""
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    manifest.setdefault("steps", [])
    for i, step in enumerate(steps, 1):
        record: dict[str, Any]
        left = deadline_s - (time.monotonic() - started)
        if step.skip:
            record = {"name": step.name, "command": list(step.command), "status": "skipped",
                      "exit_code": None, "seconds": 0.0, "tail": [], "reason": step.skip,
                      "planned_out": True}  # not a failure: the campaign chose not to run it
        elif left < min(step.timeout_s, 30):
            record = {"name": step.name, "command": list(step.command), "status": "skipped",
                      "exit_code": None, "seconds": 0.0, "tail": [],
                      "reason": f"out of time: {left:.0f} s left of the {deadline_s:g} s budget"}
        else:
            say(f"[{i}/{len(steps)}] {step.name}: {' '.join(step.command[1:] or step.command)}")
            step = replace(step, timeout_s=min(step.timeout_s, left))
            record = run_step(step, logs / f"{step.name}.log")
        say(f"[{i}/{len(steps)}] {step.name}: {record['status']} ({record['seconds']} s)")
        manifest["steps"].append(record)
        write_manifest(out, manifest)
        if after is not None:
            after(step, record)
    manifest["seconds"] = round(time.monotonic() - started, 1)
    write_manifest(out, manifest)
    return manifest


def write_manifest(out: Path, manifest: dict[str, Any]) -> Path:
    path = out / "manifest.json"
    return write_atomic(path, json.dumps(manifest, indent=2) + "\n")
