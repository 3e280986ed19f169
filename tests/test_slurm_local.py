"""Job arrays with a dependent merge job, on a real Slurm: the shape the course labs are graded in.

Needs sbatch on PATH and a controller that answers sinfo; elsewhere skipped with the reason. A
one-node Slurm on this machine: `sudo scripts/slurm-local.sh start` (CI starts and stops it).
No slurmdbd, so no sacct: job states come from squeue -t all and scontrol, which keep finished
jobs for MinJobAge (600 s in the local config); a job already purged counts as finished.

Each test polls squeue (no fixed sleeps) with a generous deadline, for a loaded 2-core machine,
and cancels whatever it submitted if it fails part-way."""

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import slurm_missing

pytestmark = pytest.mark.slurm

DEADLINE_S = 120  # a few seconds normally; generous for a loaded machine
POLL_S = 0.25
FINISHED = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
            "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
def _run(*cmd: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module", autouse=True)
def slurm_available():
    if why := slurm_missing():
        pytest.skip(why)


@pytest.fixture
def submit(tmp_path):
    """submit(*sbatch_args) -> job id; every job it submitted is cancelled at teardown."""
    submitted = []

    def _submit(*args: str) -> str:
        out = _run("sbatch", "--parsable", "--job-name=lenet-slurm-test", f"--chdir={tmp_path}", *args)
        assert out.returncode == 0, f"sbatch {' '.join(args)} failed: {out.stderr}"
        job = out.stdout.strip().split(";")[0]  # "id" or "id;cluster"
        submitted.append(job)
        return job

    yield _submit
    if submitted:
        _run("scancel", *submitted)


def states(job: str) -> dict[str, str]:
    """{job or array task id ("12_0"): state} for a job, finished ones included; {} once purged."""
    out = _run("squeue", "-h", "-t", "all", "-r", "-j", job, "-o", "%i %T")
    if out.returncode != 0:
        assert "Invalid job id" in out.stderr, out.stderr
        return {}
    return dict(line.split() for line in out.stdout.splitlines() if line.strip())


def wait_for(job: str, done, what: str) -> dict[str, str]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        now = states(job)
        if done(now):
            return now
        if time.monotonic() > deadline:
            pytest.fail(f"job {job} not {what} after {DEADLINE_S} s: {now}\n{_run('squeue').stdout}")
        time.sleep(POLL_S)


def wait_finished(job: str) -> dict[str, str]:
    return wait_for(job, lambda now: all(state in FINISHED for state in now.values()), "finished")


def scontrol_state(job: str) -> str | None:
    """JobState from scontrol show job (None once the job is purged)."""
    out = _run("scontrol", "-o", "show", "job", job)
    if out.returncode != 0:
        return None
    found = re.search(r"\bJobState=(\S+)", out.stdout)
    return found.group(1) if found else None


# Each task writes its id to task_<id>.txt and its end time (epoch seconds) to task_<id>.end; the
# merge job writes its start time first, then concatenates the tasks' files.
# A cancelled task's sleep dies by Slurm's SIGTERM while its shell may live on until the SIGKILL that
# follows (KillWait): `|| exit` keeps that shell from writing its files (it did, under load).
TASK = ('if [ "$SLURM_ARRAY_TASK_ID" = {slow} ]; then sleep 120 || exit 1; fi; '
        'echo "$SLURM_ARRAY_TASK_ID" > task_$SLURM_ARRAY_TASK_ID.txt; '
        'date +%s.%N > task_$SLURM_ARRAY_TASK_ID.end')
MERGE = "date +%s.%N > merge.start; cat task_*.txt > merged.txt"


def test_array_then_afterany_merge(submit, tmp_path: Path):
    array = submit("--array=0-2", "--output=task_%a.out", "--wrap", TASK.format(slow=-1))
    merge = submit(f"--dependency=afterany:{array}", "--output=merge.out", "--wrap", MERGE)

    assert wait_finished(merge) in ({merge: "COMPLETED"}, {})
    tasks = wait_finished(array)
    assert tasks in ({f"{array}_{i}": "COMPLETED" for i in range(3)}, {}), tasks
    assert scontrol_state(f"{array}_1") in ("COMPLETED", None)

    assert (tmp_path / "merged.txt").read_text().split() == ["0", "1", "2"]
    merge_start = float((tmp_path / "merge.start").read_text())
    task_ends = [float((tmp_path / f"task_{i}.end").read_text()) for i in range(3)]
    assert merge_start >= max(task_ends), (merge_start, task_ends)


def test_cancelled_task_then_afterany_merge_still_runs(submit, tmp_path: Path):
    array = submit("--array=0-2", "--output=task_%a.out", "--wrap", TASK.format(slow=1))
    merge = submit(f"--dependency=afterany:{array}", "--output=merge.out", "--wrap", MERGE)
    slow = f"{array}_1"
    wait_for(slow, lambda now: now.get(slow) == "RUNNING", "running")
    assert states(merge) == {merge: "PENDING"}  # waits on the running task

    assert _run("scancel", slow).returncode == 0
    assert wait_finished(merge) in ({merge: "COMPLETED"}, {})
    tasks = wait_finished(array)
    # A purged job is absent from squeue and scontrol: that counts too.
    assert tasks.get(slow, "CANCELLED") == "CANCELLED", tasks
    assert scontrol_state(slow) in ("CANCELLED", None)
    assert tasks.get(f"{array}_0", "COMPLETED") == tasks.get(f"{array}_2", "COMPLETED") == "COMPLETED"

    assert (tmp_path / "merged.txt").read_text().split() == ["0", "2"]
    assert not (tmp_path / "task_1.txt").exists()


def test_afterok_merge_on_cancelled_task_is_cancelled_not_stuck(submit, tmp_path: Path):
    """DependencyParameters=kill_invalid_depend: a dependency that can never be met cancels the
    job (without it the job pends forever with DependencyNeverSatisfied)."""
    array = submit("--array=0-1", "--output=task_%a.out", "--wrap", TASK.format(slow=1))
    merge = submit(f"--dependency=afterok:{array}", "--output=merge.out", "--wrap", MERGE)
    slow = f"{array}_1"
    wait_for(slow, lambda now: now.get(slow) in ("RUNNING", *FINISHED), "running")
    assert _run("scancel", slow).returncode == 0

    assert wait_finished(merge) in ({merge: "CANCELLED"}, {})
    assert not (tmp_path / "merge.start").exists()


def test_a_constraint_lands_on_a_node_of_its_type(submit, tmp_path: Path):
    """The local cluster's node types are Features (scripts/slurm-local.sh: odd nodes type-a, even
    type-b); a job asking for one runs on a node that has it."""
    nodes = dict(line.split() for line in _run("sinfo", "-h", "-N", "-o", "%N %f").stdout.splitlines())
    jobs = {feature: submit(f"--constraint={feature}", "--output=where_%j.out", "--wrap",
                            "echo $SLURMD_NODENAME > where_$SLURM_JOB_ID") for feature in ("type-a", "type-b")}
    for feature, job in jobs.items():
        wait_finished(job)
        where = (tmp_path / f"where_{job}").read_text().strip()
        assert feature in nodes[where].split(","), (feature, where, nodes)
