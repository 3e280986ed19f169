"""Lab grading on the local Slurm (scripts/slurm-local.sh): part of tests/test_lab.py's class,
hostile students among them, as a job array (two students a task) with a merge job; one task
cancelled while it grades. Its own file, so that it runs beside the local grading (pytest-xdist),
not after it."""

import json
import shutil
import subprocess
import time
import uuid

import pytest

from harness.lab.judge import attempts, store
from tests import lab_hostile
from tests.conftest import ROOT, slurm_missing
from tests.test_lab import (
    EXPECTED,
    LAB,
    SUBMISSIONS,
    hostile_lines,
    python,
    rows_by_student,
    sandbox_processes,
)


def merge_running(job: str) -> bool:
    """Pending or running; a finished job (or one purged) is not."""
    state = subprocess.run(["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"], capture_output=True, text=True,
                           timeout=30).stdout.strip()
    return state in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")


POLL_S = 0.25
SLURM_UID_BASE = 80000  # the tasks' workers, apart from tests/test_lab.py's running beside them
ON_SLURM = ("correct", "slow", "hang", "spy", "forkbomb", "daemon")
PER_TASK = 2  # three tasks, one a node of the local cluster: each grader set up once for two students


@pytest.mark.slurm
@pytest.mark.slow
def test_the_same_lab_on_slurm_gives_the_same_statuses_and_ranking(tmp_path):
    """Part of the class (the sandbox's attacks among them), to keep it short: each task runs the
    same sandbox; the statuses are those of the local run (tests/test_lab.py), and the honest
    ranking too."""
    why = slurm_missing()
    if why:
        pytest.skip(why)
    lab_file = tmp_path / "test_cpu.toml"
    lab_file.write_text(LAB)
    out = tmp_path / "slurm-out"
    everyone, part = tmp_path / "class", tmp_path / "submissions"
    everyone.mkdir()
    lab_hostile.write(everyone, part, out, 9, uuid.uuid4().hex[:8])  # port 9: nothing listens
    for name in ("correct", "slow"):
        shutil.copytree(ROOT / "labs" / "examples" / name, everyone / name)
    (everyone / "hang").mkdir()
    (everyone / "hang" / "lenet.py").write_text(SUBMISSIONS["hang"])
    for name in ON_SLURM:
        shutil.copytree(everyone / name, part / name)
    expected = {name: EXPECTED[name] for name in ON_SLURM}
    done = python("lab", "grade", str(lab_file), "--submissions", str(part), "--out", str(out),
                  "--slurm", "--per-task", str(PER_TASK), "--max-parallel", "3", timeout=120,
                  uid_base=SLURM_UID_BASE)  # sbatch passes it on
    assert done.returncode == 0, done.stderr
    jobs = {parts[0]: parts[1] for parts in map(str.split, (out / "slurm" / "jobs.txt").read_text().splitlines())}
    names = json.loads((out / "slurm" / "round.json").read_text())["students"]
    assert names.index("hang") % PER_TASK == PER_TASK - 1  # its task's last: the others of it graded first
    try:
        hang = f"{jobs['array']}_{names.index('hang') // PER_TASK}"  # cancelled while it hangs in its import
        deadline = time.monotonic() + 240
        while store.started(out, "hang") is None:
            assert time.monotonic() < deadline, subprocess.run(["squeue"], capture_output=True, text=True).stdout
            time.sleep(POLL_S)
        subprocess.run(["scancel", hang], check=True, timeout=30)
        while merge_running(jobs["merge"]):
            assert time.monotonic() < deadline, subprocess.run(["squeue"], capture_output=True, text=True).stdout
            time.sleep(POLL_S)
    finally:
        subprocess.run(["scancel", jobs["array"], jobs["merge"]], capture_output=True, timeout=30)
    rows = rows_by_student(out)
    assert {n: r["status"] for n, r in rows.items()} == {**expected, "hang": "cancelled"}, \
        {n: (r["status"], r["reason"]) for n, r in rows.items()}
    assert "while grading" in rows["hang"]["reason"]
    # the cancel ended the attempt as the grader's (handed on by the task's shell), or without an end
    # (the grader killed first): never as the submission's
    ended = attempts.history(out, "hang")[-1]["ended"]
    assert ended is None or (ended["by"], ended["how"]) == ("grader", "SIGTERM"), ended
    ranked = [n for _, n in sorted((r["ratios"]["numpy"]["ratio"], n) for n, r in rows.items()
                                   if r["status"] == "ok")]
    assert ranked.index("correct") < ranked.index("slow")
    assert all(ranked.index(cheat) > ranked.index("correct") for cheat in lab_hostile.CHEATS & set(ON_SLURM))
    text = (out / "LEADERBOARD.md").read_text()
    assert all(f"[{name}](feedback/{name}.md)" in text for name in expected)
    assert "spy pids [1, 2]" in hostile_lines(out, "spy") and sandbox_processes(SLURM_UID_BASE) == []
    assert json.loads((out / "results" / "hang" / "row.json").read_text())["from_merge"] is True
    assert "interrupted" not in (out / "slurm" / "merge.out").read_text()
    assert (out / "feedback" / "hang.md").is_file() and (out / "leaderboard.png").is_file()
