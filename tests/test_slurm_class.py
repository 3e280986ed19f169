"""A class graded across the local three-node Slurm (scripts/slurm-local.sh start --nodes 3) by a user
who is not root, while the cluster misbehaves: one node is lost while it grades (scontrol sets it
DOWN: its task is requeued) and another task is preempted (scontrol requeue). The class still ends
with exactly one finished row per student, none crashed by the loss, and the shaved clock is caught.
A task Slurm holds after a failed start ("launch failed requeued held") is released, as a site's admin
would (the test starts requeued tasks at once, and the lost node, back in service, may still hold the
old copy: CI met it once, and the class waited 300 s on the held task).

Skipped (with the reason) without a Slurm of at least three nodes, root (to make the user and
take a node down) or bubblewrap; .ci/run starts the cluster, and there a skip fails."""

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness import DEFAULT_WEIGHTS
from harness.data import mnist
from harness.lab.judge import attempts, store, student_lock
from harness.machine import slurmctl
from tests import lab_hostile
from tests.conftest import ROOT, closed_to
from tests.test_lab_ring2 import shaver_gains_nothing

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

USER = "lenet-slurm-test"
DEADLINE_S = 300
POLL_S = 0.25
LAB = """
[lab]
name = "cluster"
references = ["numpy"]
[measure]
calls = 12
rounds = 3
warmup = 2
[gate]
images = 100
[limits]
wall_s = 60
import_s = 10
memory_mb = 1024
cpu_s = 60
max_ratio = 300
"""
HONEST = [f"honest{i:02d}" for i in range(9)]
CLASS = {**{name: "ok" for name in HONEST}, "wrong": "wrong", "broken": "import-error", "shaver": None}


def run(*cmd: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def nodes() -> dict[str, str]:
    """{node: state} of the cluster."""
    done = run("sinfo", "-h", "-N", "-o", "%N %T")
    return dict(line.split() for line in done.stdout.splitlines()) if done.returncode == 0 else {}


@pytest.fixture(scope="module")
def cluster():
    if not shutil.which("sbatch"):
        pytest.skip("sbatch is not on PATH; start the cluster with: sudo scripts/slurm-local.sh start --nodes 3")
    if len(nodes()) < 3:
        pytest.skip(f"a Slurm of at least 3 nodes is needed, found {nodes()}; "
                    "sudo scripts/slurm-local.sh start --nodes 3")
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("needs root (CI runs as root): to make a user, and to take a node down")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        run("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER)
    # the class's jobs run as USER: each would fail as it starts, and the class wait out DEADLINE_S
    closed = closed_to(USER, [*slurmctl.code_needs(), ("the temporary folder", tempfile.gettempdir(), os.X_OK),
                              ("the weights", DEFAULT_WEIGHTS, os.R_OK),
                              ("the MNIST folder", mnist.data_dir(), os.R_OK | os.X_OK)])
    if closed:
        pytest.skip(f"a grading by a user who is not root: {closed}")
    return pwd.getpwnam(USER)


def running_tasks(jobs: list[str]) -> dict[str, str]:
    """{array task id: node} of the tasks running now."""
    done = run("squeue", "-h", "-r", "-t", "RUNNING", "-j", ",".join(jobs), "-o", "%i %N")
    return dict(line.split() for line in done.stdout.splitlines() if line.strip())


def start_requeued_now(jobs: list[str]) -> None:
    """Slurm holds a requeued job back for about two minutes (its BeginTime): the test moves that
    to now, so it waits for the grading, not for the scheduler's pause."""
    done = run("squeue", "-h", "-r", "-t", "PENDING", "-j", ",".join(jobs), "-o", "%i %r")
    for line in done.stdout.splitlines():
        task, _, reason = line.partition(" ")
        if reason.strip() == "BeginTime":
            run("scontrol", "update", f"jobid={task}", "StartTime=now")


def resume(node: str | None) -> None:
    """The node back in service where it is down or drained (a test's loss, or Slurm's drain after it)."""
    if node and nodes().get(node, "").startswith(("down", "drain")):
        run("scontrol", "update", f"nodename={node}", "state=resume")


def release_held(jobs: list[str], downed: str | None, events: dict) -> None:
    """A node that fails to start a requeued task leaves it held ("launch failed requeued held"; the node
    drained: "Duplicate jobid" where the lost node, revived by ReturnToService=2, still held the old copy):
    as the site's admin would, the test resumes the node and releases the task (events["released"])."""
    for task, reason in slurmctl.held(jobs).items():
        if reason.startswith("launch failed"):
            resume(downed)
            assert run("scontrol", "release", task).returncode == 0, task
            events.setdefault("released", []).append((task, reason))


def alive(jobs: list[str]) -> bool:
    done = run("squeue", "-h", "-j", ",".join(jobs), "-o", "%T")
    return bool(done.stdout.split())


@pytest.fixture(scope="module")
def graded(cluster):
    base = Path(tempfile.mkdtemp(prefix="lenet-cluster-"))  # not pytest's: its root is 0700
    base.chmod(0o755)
    try:
        yield grade_the_class(cluster, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def grade_the_class(cluster, base: Path):
    submissions, out = base / "submissions", base / "out"
    correct = (ROOT / "labs" / "examples" / "correct" / "lenet.py").read_text()
    texts = {**{name: correct for name in HONEST},
             "wrong": (ROOT / "labs" / "examples" / "wrong" / "lenet.py").read_text(),
             "broken": "raise RuntimeError('the student forgot something')\n",
             "shaver": lab_hostile.RING2["shaver"]}
    for name, source in texts.items():
        (submissions / name).mkdir(parents=True)
        (submissions / name / "lenet.py").write_text(source)
    (base / "cluster.toml").write_text(LAB)
    out.mkdir()
    os.chown(out, cluster.pw_uid, cluster.pw_gid)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "HOME": str(out), "LANG": "C.UTF-8"}
    grade = ["runuser", "-u", USER, "--", "env", *[f"{k}={v}" for k, v in env.items()], sys.executable, "-m",
             "harness", "lab", "grade", str(base / "cluster.toml"), "--submissions", str(submissions), "--out",
             str(out), "--slurm", "--per-task", "3"]
    done = subprocess.run(grade, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr + done.stdout
    lines = [line.split() for line in (out / "slurm" / "jobs.txt").read_text().splitlines()]
    arrays = [parts[1] for parts in lines if parts[0] == "array"]
    merge = next(parts[1] for parts in lines if parts[0] == "merge")
    # asked while the round has barely started, and answered while the class is graded
    early = subprocess.Popen([*grade, "--resume"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=ROOT)
    status = [*grade[:grade.index("grade")], "status", str(out)]  # `lab status OUT`, as the same user
    events = {}
    downed = None
    try:
        deadline = time.monotonic() + DEADLINE_S
        # one node lost, then one other task preempted, each while it grades a student
        while "preempted" not in events:
            assert time.monotonic() < deadline, f"no two tasks ran at once: {run('squeue').stdout}"
            busy = {task: node for task, node in running_tasks(arrays).items()
                    if node != downed and any(store.started(out, s) and student_lock.holder(out, s) == task
                                              for s in texts)}
            if busy and downed is None:
                task, downed = sorted(busy.items())[0]
                assert run("scontrol", "update", f"nodename={downed}", "state=down",
                           "reason=lenet test: node lost").returncode == 0
                events["lost"] = (task, downed)
                events["status while grading"] = subprocess.run(status, capture_output=True, text=True,
                                                                timeout=120, cwd=ROOT)
            elif busy and "lost" in events and [t for t in busy if t != events["lost"][0]]:
                task = sorted(t for t in busy if t != events["lost"][0])[0]
                assert run("scontrol", "requeue", task).returncode == 0, task
                events["preempted"] = (task, busy[task])
            time.sleep(POLL_S)
        resume(downed)  # unless ReturnToService=2 has revived it
        stdout, stderr = early.communicate(timeout=120)
        events["resume while queued"] = subprocess.CompletedProcess(early.args, early.returncode, stdout, stderr)
        while alive([*arrays, merge]):
            assert time.monotonic() < deadline, f"not finished after {DEADLINE_S} s: {run('squeue').stdout}"
            start_requeued_now(arrays)
            release_held(arrays, downed, events)
            time.sleep(POLL_S)
        events["resume when done"] = subprocess.run([*grade, "--resume"], capture_output=True, text=True,
                                                    timeout=120, cwd=ROOT)
        events["status when done"] = subprocess.run(status, capture_output=True, text=True, timeout=120, cwd=ROOT)
    finally:
        if early.poll() is None:
            early.kill()
            early.communicate()
        run("scancel", *arrays, merge)
        resume(downed)
    return out, texts, events


def task_logs(out: Path) -> str:
    """The tasks' logs, the last lines of each (for a failure's message)."""
    return "\n".join(f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-25:])
                     for p in sorted((out / "slurm").glob("task_*.out")))


def worker_log(out: Path, student: str) -> str:
    """The last lines of the student's worker log (srun's own words among them), for a failure's message."""
    path = store.result_dir(out, student) / "worker.log"
    return "\n".join(path.read_text(errors="replace").splitlines()[-15:]) if path.is_file() else "(no worker log)"


def rows(out: Path) -> dict[str, dict]:
    return {row["student"]: row for row in store.read_rows(out)}


def test_every_student_has_exactly_one_finished_row_none_crashed_by_the_loss(graded):
    out, texts, events = graded
    found = rows(out)
    assert sorted(found) == sorted(texts)
    for name, row in found.items():
        assert not row.get("from_merge"), (name, row["status"], row["reason"], events, task_logs(out),
                                           worker_log(out, name))
        assert store.genuine(out, row), name
    expected = {n: s for n, s in CLASS.items() if s is not None}
    assert {n: found[n]["status"] for n in expected} == expected, \
        {n: (r["status"], r.get("reason"), worker_log(out, n)) for n, r in found.items() if r["status"] != CLASS[n]}
    assert not [p for p in (out / "results").glob("*/claim.json")]  # every claim released


def test_the_lost_and_the_preempted_tasks_were_graded_again_on_the_cluster(graded):
    out, texts, events = graded
    found = rows(out)
    restarted = [n for n, r in found.items() if (r["node"].get("slurm") or {}).get("restarts", 0) > 0]
    assert len(restarted) >= 2, (events, {n: r["node"].get("slurm") for n, r in found.items()})
    assert all(found[n]["status"] == CLASS[n] for n in restarted if CLASS[n])
    used = {r["node"]["slurm"]["node"] for r in found.values()}
    assert used == set(nodes()), used  # every node graded some of the class
    log = "".join(p.read_text() for p in (out / "slurm").glob("task_*.out"))
    assert "restart 1" in log
    # every attempt the loss or the preemption cut off ended as the grader's (Slurm's SIGTERM handed on
    # by the task's shell), or without an end (the grader killed first): never as the submission's
    cut_off = {n: [a["ended"] for a in attempts.history(out, n)[:-1]] for n in texts}
    assert all(e is None or e["by"] == "grader" for ends in cut_off.values() for e in ends), cut_off


def test_the_shaved_clock_is_caught_in_a_job_of_a_user_who_is_not_root(graded):
    out = graded[0]
    shaver = rows(out)["shaver"]
    started = store.started(out, "shaver")
    assert started is not None and (shaver["node"].get("slurm") or {}).get("job")
    # not root, so no cgroup of the grader's own: each worker a Slurm step, counted by the step's cgroup
    assert shaver["sandbox"] == "namespaces" and "Slurm job step" in shaver["isolation"], shaver["isolation"]
    assert "tamper-evident" in shaver["isolation"] and "not tamper-evident" not in shaver["isolation"]
    shaver_gains_nothing(shaver)  # flagged, or ranked at no less than its step's CPU counter says
    print(json.dumps({"shaver": shaver["status"], "clock_ratio": shaver["clock_ratio"],
                      "isolation": shaver["isolation"]}))


def test_resume_refuses_while_the_round_runs_and_then_finds_nothing_left(graded):
    out, _, events = graded
    early, late = events["resume while queued"], events["resume when done"]
    assert early.returncode != 0 and "still queued or running" in early.stderr, early.stderr
    assert late.returncode == 0 and "nothing to grade" in late.stdout + late.stderr, late.stderr
    assert len([line for line in (out / "slurm" / "jobs.txt").read_text().splitlines()
                if line.startswith("merge")]) == 1  # nothing submitted twice


def test_lab_status_says_where_the_class_stands_while_it_grades_and_once_it_is_done(graded):
    out, texts, events = graded
    during, done = events["status while grading"], events["status when done"]
    assert during.returncode == 0 and "claimed by" in during.stdout, during.stderr + during.stdout
    assert "Slurm array" in during.stdout and "RUNNING" in during.stdout, during.stdout
    assert done.returncode == 0, done.stderr
    said = done.stdout.splitlines()
    assert said[0] == f"{out}: {len(texts)} students" and said[1].startswith(f"  graded: {len(texts)} ("), said
    assert "  started, no row yet: 0" in said and "  not started: 0" in said, said
    assert [line for line in said if line.startswith("Slurm merge job") and "COMPLETED" in line], said
