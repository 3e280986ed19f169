"""Grading on Slurm without a cluster: the batch scripts (dry run), arrays split at MaxArraySize,
the pass-through options checked, the merge's task for a student, and the per-student claim that
holds on a shared filesystem (two graders, a stale owner, a requeued owner), the lock timeout each
task is given, and the task's own requeue near its time limit (with a stand-in scontrol; and, marked
slurm, on the local Slurm)."""

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.lab.judge import progress, slurm, slurm_task, store, student_lock
from tests.conftest import ROOT

LAB = """
[lab]
name = "test_cpu"
references = ["numpy"]
[limits]
wall_s = 60
memory_mb = 1024
"""


def test_a_class_larger_than_max_array_size_is_split():
    assert slurm.arrays(25, 10) == [(0, 10), (10, 10), (20, 5)]
    assert slurm.arrays(10, 10) == [(0, 10)]
    assert slurm.arrays(1, 1001) == [(0, 1)]
    with pytest.raises(HarnessError, match="MaxArraySize"):
        slurm.arrays(3, 0)


def test_each_student_of_a_round_is_found_in_its_task():
    plan = {"students": [f"s{i}" for i in range(25)], "per_task": 2,
            "arrays": [{"job": "7", "first": 0, "count": 10}, {"job": "9", "first": 10, "count": 3}]}
    assert slurm_task.where_task(plan, 0) == ("7", 0)
    assert slurm_task.where_task(plan, 19) == ("7", 9)
    assert slurm_task.where_task(plan, 20) == ("9", 0)
    assert slurm_task.where_task(plan, 24) == ("9", 2)


@pytest.mark.parametrize("field,value,words", [
    ("per_task", 0, "--per-task: expected a whole number >= 1, found 0"),
    ("max_parallel", -2, "--max-parallel"),
    ("cpus_per_task", 0, "--cpus-per-task"),
    ("time", "ten", "--time: expected minutes or [D-]HH:MM[:SS]"),
    ("lock_timeout", -1.0, "--lock-timeout: expected seconds >= 0, found -1.0"),
    ("lock_timeout", float("nan"), "--lock-timeout: expected seconds >= 0, found nan"),
])
def test_bad_options_are_refused_by_name(field, value, words):
    with pytest.raises(HarnessError) as caught:
        slurm.Options(**{field: value}).check()
    assert words in str(caught.value)


def test_dry_run_prints_the_batch_scripts_with_the_pass_through(tmp_path):
    (tmp_path / "lab.toml").write_text(LAB)
    for name in ("ann", "bob", "cy"):
        (tmp_path / "subs" / name).mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "harness", "lab", "grade", str(tmp_path / "lab.toml"),
                           "--submissions", str(tmp_path / "subs"), "--out", str(tmp_path / "o"), "--slurm",
                           "--max-parallel", "3", "--per-task", "2", "--partition", "gpu", "--gres", "gpu:1",
                           "--account", "cs101", "--qos", "normal", "--constraint", "a100", "--lock-timeout", "30",
                           "--dry-run"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    minutes = -(-(2 * 60 * slurm.TIME_HEADROOM + slurm.SETUP_S) // 60)
    for line in (f"#SBATCH --time={minutes:.0f}", "#SBATCH --mem=3072M", "#SBATCH --gres=gpu:1",
                 "#SBATCH --partition=gpu", "#SBATCH --account=cs101", "#SBATCH --qos=normal",
                 "#SBATCH --constraint=a100", "#SBATCH --cpus-per-task=2", "#SBATCH --requeue",
                 f"#SBATCH --signal=B:USR1@{slurm.SIGNAL_BEFORE_S}", "#SBATCH --dependency=afterany:$ARRAY_JOBS",
                 "lab merge", "lab task", "2 tasks of up to 2", "sbatch --array=0-1%3 task.sh 0", "trap requeue USR1",
                 "--lock-timeout 30.0", "export PYTHONUNBUFFERED=1"):
        assert line in done.stdout, line
    assert not (tmp_path / "o" / "slurm").exists()


def test_each_task_is_given_the_lock_timeout(tmp_path, monkeypatch):
    """The task line of task.sh, parsed as `lab task` parses it, hands --lock-timeout to the task."""
    from harness import cli
    from harness.lab.judge.rules import assignment

    (tmp_path / "lab.toml").write_text(LAB)
    lab = assignment.load(str(tmp_path / "lab.toml"))
    given = {}

    def record(*args) -> int:
        given["args"] = args
        return 0

    monkeypatch.setattr(slurm_task, "task", record)
    for options, expected in ((slurm.Options(lock_timeout=30), 30.0), (slurm.Options(), None)):
        script, _ = slurm.scripts(lab, tmp_path / "subs", tmp_path / "out", options)
        line = next(line for line in script.splitlines() if " -m harness lab task " in line)
        argv = shlex.split(line.removesuffix(" &").replace('"$task"', "4"))
        args = cli.build_parser().parse_args(argv[argv.index("harness") + 1:])
        given.clear()
        assert args.func(args) == 0 and given["args"][1] == 4 and given["args"][-1] == expected, given


def test_closed_names_the_first_folder_on_the_way_and_follows_links(tmp_path):
    """slurmctl.closed: what a job's user cannot reach, as `can` (os.access, or a test's user) says."""
    from harness.machine import slurmctl

    base = tmp_path.resolve()
    (base / "pyenv" / "bin").mkdir(parents=True)
    target = base / "pyenv" / "bin" / "python"
    target.write_text("")
    (base / "venv").mkdir()
    (base / "venv" / "python").symlink_to(target)
    link = base / "venv" / "python"
    assert slurmctl.closed(link, os.X_OK, lambda path, mode: True) is None
    # the folder on the way the link leads, not only the way as named (a venv's python under /root)
    assert slurmctl.closed(link, os.X_OK, lambda path, mode: path != str(base / "pyenv")) == \
        (base / "pyenv", "search")
    assert slurmctl.closed(link, os.X_OK, lambda path, mode: path != str(target)) == (target, "run")
    assert slurmctl.closed(base / "venv", os.R_OK | os.X_OK, lambda path, mode: path != str(base / "venv")) \
        == (base / "venv", "list and search")
    assert slurmctl.closed(base / "nothing", os.R_OK) == (base / "nothing", "find")


def test_a_path_the_jobs_cannot_reach_is_named_before_anything_is_submitted(tmp_path, monkeypatch):
    """`lab grade --slurm` checks, as the user its jobs run as, that they can reach the interpreter, the
    checkout, the submissions, the weights and MNIST: each task would fail as it starts, and the class
    wait on nothing. Here the weights lie in a folder that user cannot search (os.access says so)."""
    from harness.lab.judge.rules import assignment

    (tmp_path / "lab.toml").write_text(LAB)
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    closed = tmp_path / "closed"
    (closed / "inner").mkdir(parents=True)
    (closed / "inner" / "w.h5").write_bytes(b"")
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: not str(path).startswith(str(closed))
                        and real(path, mode, **kw))
    with pytest.raises(HarnessError) as refused:
        slurm.submit(assignment.load(str(tmp_path / "lab.toml")), tmp_path / "subs", tmp_path / "out",
                     weights=closed / "inner" / "w.h5", no_sandbox=True, report=lambda line: None)
    words = str(refused.value)
    assert words.startswith(f"the weights {closed / 'inner' / 'w.h5'}: ") and "the user the Slurm jobs run as" in words
    assert f"cannot search {closed} (owner " in words and f"chmod o+x {closed})" in words, words
    assert not (tmp_path / "out").exists()  # nothing written, nothing submitted


def test_a_claim_is_one_graders_and_a_stale_one_is_taken_over(tmp_path):
    out = tmp_path / "out"
    assert student_lock.take(out, "ann", "10_1", alive=lambda owner: True)
    assert student_lock.take(out, "ann", "10_1", alive=lambda owner: True)  # the same task, requeued: still its own
    assert not student_lock.take(out, "ann", "11_0", alive=lambda owner: True)  # 10_1 still runs
    assert student_lock.holder(out, "ann") == "10_1"
    assert student_lock.take(out, "ann", "11_0", alive=lambda owner: owner != "10_1")  # 10_1 is gone: stale
    assert student_lock.holder(out, "ann") == "11_0"
    student_lock.release(out, "ann", "10_1")  # no longer 10_1's: kept
    assert student_lock.holder(out, "ann") == "11_0"
    student_lock.release(out, "ann", "11_0")
    assert student_lock.holder(out, "ann") is None
    assert sorted(p.name for p in store.result_dir(out, "ann").iterdir()) == []


def test_of_many_graders_racing_for_a_stale_claim_exactly_one_wins(tmp_path):
    # threads switched every microsecond, 100 races: the interleavings that let two graders win (one
    # judged the claim gone and moved aside the one linked meanwhile) came in about 1 race of 60
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for race_no in range(100):
            out = tmp_path / f"out{race_no}"
            student_lock.take(out, "ann", "dead", alive=lambda owner: True)
            won = []
            start = threading.Barrier(8)

            def race(i: int, out: Path = out, won: list = won, start: threading.Barrier = start) -> None:
                start.wait()
                if student_lock.take(out, "ann", f"20_{i}", alive=lambda owner: owner != "dead"):
                    won.append(i)

            threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(won) == 1, (race_no, won)
            assert student_lock.holder(out, "ann") == f"20_{won[0]}"
            claimed = json.loads((store.result_dir(out, "ann") / student_lock.CLAIM).read_text())
            assert claimed["owner"] == f"20_{won[0]}"
    finally:
        sys.setswitchinterval(interval)


def test_a_claim_of_a_process_here_that_ended_is_stale(tmp_path):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True).stdout.strip()
    import socket

    assert not student_lock.alive_on_slurm(f"{socket.gethostname()}:{ended}")
    assert student_lock.alive_on_slurm(f"{socket.gethostname()}:{os.getpid()}")
    assert student_lock.alive_on_slurm("another-host:1")  # only that host can say: never broken on a guess


def test_each_machine_type_is_ranked_on_its_own():
    """A class timed on two kinds of node: each kind ranked apart, both named above the table; the
    Slurm node (several share a host) named in each row."""
    from harness.lab.judge.rules import assignment
    from harness.lab.term.marks import leaderboard
    from tests import lab_rows

    a100 = {"key": "k-a100", "name": "NVIDIA A100 / Xeon (AVX-512, L3 55 MiB)"}
    h100 = {"key": "k-h100", "name": "NVIDIA H100 / Xeon (AVX-512, L3 105 MiB)"}
    rows = []
    for name, ratio, kind, node in (("ann", 1.2, a100, "gpu-a1"), ("bob", 2.0, a100, "gpu-a2"),
                                    ("cy", 1.5, h100, "gpu-h1"), ("dee", 3.0, h100, "gpu-h1")):
        row = lab_rows.ok_row(name, ratio, ratio * 0.98, ratio * 1.02, 40)
        row["node"] = {**row["node"], "machine_type": kind, "slurm": {"node": node}}
        rows.append(row)
    placed = [(rank, row["student"]) for rank, row in leaderboard.ranked(rows)]
    assert placed == [(1, "ann"), (2, "bob"), (1, "cy"), (2, "dee")]
    board = leaderboard.markdown(rows, assignment.load(str(lab_rows.LAB)))
    assert "Timed on 2 machine types, each ranked on its own" in board
    assert a100["name"] in board and h100["name"] in board and "gpu-h1: " in board
    one = [dict(r, node={**r["node"], "machine_type": a100}) for r in rows]
    assert [rank for rank, _ in leaderboard.ranked(one)] == [1, 2, 3, 4]  # one type: one ranking


def test_the_benchmarks_class_and_its_one_row_check(tmp_path):
    from harness.lab.term import bench
    from tests import lab_rows

    expected = bench.make_class(tmp_path / "class", 100)
    kinds = {name.split("-")[0] for name in expected}
    assert len(expected) == 100 and kinds == {"honest", "wrong", "slow", "hang", "crash"}
    assert sum(s == "ok" for s in expected.values()) == 100 - 4 - 2 - 2  # 4 wrong, 2 hang, 2 crash; slow is ok
    assert sorted(p.name for p in (tmp_path / "class").iterdir()) == sorted(expected)
    assert len(bench.make_class(tmp_path / "small", 3)) == 3  # too few for the odd ones: all honest
    rows = [lab_rows.ok_row("ann", 1.1, 1.0, 1.2, 40), {**lab_rows.failed_row("bob", "cancelled", "x"),
                                                          "from_merge": True},
            lab_rows.ok_row("zed", 1.1, 1.0, 1.2, 40)]
    out = lab_rows.graded(tmp_path / "out", rows)
    assert bench.one_row_each(out, ["ann", "bob", "cy"]) == [
        "cy: no row", "bob: no result (cancelled: x)", "zed: a row, but not a student of the class"]
    result = {"students": 100, "graded_s": 300.0, "setup_s": 10.0}
    assert bench.projection(result, 1, 10) == 400.0  # 300 s of submissions + 10 tasks x 10 s
    assert bench.projection(result, 4, 10) == 100.0


@pytest.mark.slurm
def test_a_class_larger_than_the_clusters_max_array_size_is_submitted_as_several_arrays(tmp_path):
    """The local Slurm's MaxArraySize is 10 (scripts/slurm-local.sh): 12 tasks are two arrays."""
    import shutil

    if not shutil.which("sbatch") or slurm.max_array_size() != 10:
        pytest.skip("needs the local Slurm (MaxArraySize=10): sudo scripts/slurm-local.sh start --nodes 3")
    (tmp_path / "lab.toml").write_text(LAB)
    for i in range(12):
        (tmp_path / "subs" / f"s{i:02d}").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "harness", "lab", "grade", str(tmp_path / "lab.toml"),
                           "--submissions", str(tmp_path / "subs"), "--out", str(tmp_path / "o"), "--slurm",
                           "--dry-run"], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert "# sbatch --array=0-9 task.sh 0" in done.stdout and "# sbatch --array=0-1 task.sh 10" in done.stdout


@pytest.mark.slurm
def test_a_round_slurm_holds_is_named_with_the_command_that_releases_it(tmp_path):
    """A node that fails to start a requeued task leaves it held ("launch failed requeued held") and the
    class waits on it forever. --resume refuses while the round is queued, naming each held task and
    the command that releases them, and `lab status` says so beside the jobs' states; a submission held
    from the start (JobHeldUser) stands in here."""
    import shutil

    from harness.lab.judge.rules import assignment

    if not shutil.which("sbatch") or slurm.max_array_size() != 10:  # installed is not running
        pytest.skip("needs the local Slurm (MaxArraySize=10): sudo scripts/slurm-local.sh start --nodes 3")

    def held(*args: str) -> str:
        done = subprocess.run(["sbatch", "--parsable", "--hold", *args, "--job-name=lenet-slurm-test",
                               f"--chdir={tmp_path}", "--wrap", "true"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().split(";")[0]

    job, merge = held("--array=0-1"), held()
    try:
        (tmp_path / "lab.toml").write_text(LAB)
        (tmp_path / "subs" / "ann").mkdir(parents=True)
        (tmp_path / "out" / "slurm").mkdir(parents=True)
        (tmp_path / "out" / "slurm" / "jobs.txt").write_text(f"array {job}\n")
        with pytest.raises(HarnessError) as refused:
            slurm.submit(assignment.load(str(tmp_path / "lab.toml")), tmp_path / "subs", tmp_path / "out",
                         resume=True, no_sandbox=True, report=lambda line: None)
        words = str(refused.value)
        assert "still queued or running" in words, words
        assert f"Slurm holds {job}_0 (JobHeldUser), {job}_1 (JobHeldUser)" in words, words
        assert words.endswith(f"scontrol release {job}_0,{job}_1"), words
        # lab status says the same, beside each task's state and the merge job's
        store.write_json(tmp_path / "out" / "slurm" / "round.json",
                         {"students": ["ann"], "per_task": 1, "arrays": [{"job": job, "first": 0, "count": 2}]})
        with open(tmp_path / "out" / "slurm" / "jobs.txt", "a") as jobs:
            jobs.write(f"merge {merge}\n")
        assert progress.slurm_lines(tmp_path / "out") == [
            f"Slurm array {job}: PENDING 2", f"Slurm merge job {merge}: PENDING (JobHeldUser)",
            f"Slurm holds {job}_0 (JobHeldUser), {job}_1 (JobHeldUser) and starts them only once released: "
            f"scontrol release {job}_0,{job}_1"]
    finally:
        subprocess.run(["scancel", job, merge], capture_output=True, timeout=30)


TASK_ENV = {"SLURM_ARRAY_JOB_ID": "70", "SLURM_ARRAY_TASK_ID": "2"}  # what Slurm gives the batch shell
FAKE_GRADER = "sh -c 'echo grading; exec sleep 60' &"  # runs until it is killed, as a grader would


def task_script(tmp_path: Path, grader: str = FAKE_GRADER) -> Path:
    """task.sh as `lab grade --slurm` writes it for LAB, its grader line replaced by `grader`: the
    batch shell's own lines (the traps, the requeue, the wait) are what run."""
    from harness.lab.judge.rules import assignment

    (tmp_path / "lab.toml").write_text(LAB)
    script, _ = slurm.scripts(assignment.load(str(tmp_path / "lab.toml")), tmp_path / "subs", tmp_path / "out",
                              slurm.Options())
    lines = script.splitlines()
    at = [i for i, line in enumerate(lines) if " -m harness lab task " in line]
    assert len(at) == 1 and lines[at[0]].endswith(" &"), script
    lines[at[0]] = grader
    (tmp_path / "out" / "slurm").mkdir(parents=True)
    path = tmp_path / "out" / "slurm" / "task.sh"
    path.write_text("\n".join(lines))
    return path


def wait_until(check, what: str, deadline_s: float = 60):
    deadline = time.monotonic() + deadline_s
    while not (found := check()):
        assert time.monotonic() < deadline, f"not {what} after {deadline_s} s"
        time.sleep(0.05)
    return found


@pytest.mark.parametrize("restarts,requeued", [(0, True), (slurm.MAX_REQUEUES - 1, True),
                                               (slurm.MAX_REQUEUES, False)])
def test_a_task_near_its_time_limit_requeues_itself_at_most_max_requeues_times(tmp_path, restarts, requeued):
    """The batch shell's USR1 (Slurm's --signal=B:USR1 before --time ends): the trap asks scontrol
    (a stand-in that records its arguments) to requeue the task's own array task, unless it was
    requeued MAX_REQUEUES times already; either way the grader runs on (Slurm's requeue ends it)."""
    script = task_script(tmp_path)
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "scontrol"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "scontrol.txt"}\n')
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", **TASK_ENV, "SLURM_RESTART_COUNT": str(restarts)}
    # -x: bash writes each command to stderr as it runs it, so the test knows when the trap ran
    shell = subprocess.Popen(["bash", "-x", str(script), "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env, start_new_session=True)
    try:
        os.set_blocking(shell.stdout.fileno(), False)
        os.set_blocking(shell.stderr.fileno(), False)
        said, traced = bytearray(), bytearray()

        def read(pipe, into: bytearray) -> bytes:
            into.extend(pipe.read() or b"")
            return bytes(into)

        wait_until(lambda: b"grading" in read(shell.stdout, said), "grading")  # the trap is set
        shell.send_signal(signal.SIGUSR1)
        # the wait for the grader resumed (`kill -0 $child`, then `wait` again): the trap has run
        wait_until(lambda: b"kill -0" in read(shell.stderr, traced), "back to waiting for its grader")
        assert shell.poll() is None  # still waiting for its grader
        read(shell.stdout, said)
    finally:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
    if requeued:
        assert (tmp_path / "scontrol.txt").read_text() == "requeue 70_2\n"
        assert b"time limit near: requeued" in said
    else:
        assert not (tmp_path / "scontrol.txt").exists() and b"requeued" not in said


def test_the_task_s_sigterm_is_handed_to_its_grader_and_the_shell_waits_for_it(tmp_path):
    """Slurm's SIGTERM (scancel, a requeue, a lost node) reaches the batch shell alone, and once the
    shell ends Slurm kills what is left: the shell hands it to its grader, which ends its attempt and
    clears its scratch (here: says so), and ends only after it."""
    grader = "sh -c 'trap \"sleep 0.3; echo cleared; exit 130\" TERM; echo grading; while :; do sleep 0.05; done' &"
    shell = subprocess.Popen(["bash", str(task_script(tmp_path, grader)), "0"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env={**os.environ, **TASK_ENV}, start_new_session=True)
    try:
        assert shell.stdout.readline().startswith(b"--- task 2")
        assert shell.stdout.readline() == b"grading\n"  # the grader runs: the traps are set
        shell.send_signal(signal.SIGTERM)  # to the shell alone, as Slurm sends it
        said, _ = shell.communicate(timeout=10)
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
    assert said == b"cleared\n" and shell.returncode == 1  # its grader stopped first, then the shell


@pytest.mark.slurm
def test_on_slurm_a_task_signalled_before_its_time_limit_is_requeued(tmp_path):
    """The USR1 Slurm sends the batch shell before --time ends (sent here at once, as slurmctld
    sends it, with scancel --batch --signal): task.sh's trap requeues its own task on a real Slurm."""
    import shutil

    from harness.machine.slurmctl import sbatch

    if not shutil.which("sbatch") or slurm.max_array_size() != 10:  # installed is not running
        pytest.skip("needs the local Slurm (MaxArraySize=10): sudo scripts/slurm-local.sh start --nodes 3")
    script = task_script(tmp_path)
    array = sbatch("--array=0-0", str(script), "0")
    log = script.parent / f"task_{array}_0.out"
    try:
        wait_until(lambda: log.is_file() and "grading" in log.read_text(), "grading", 120)
        done = subprocess.run(["scancel", "--batch", "--signal=USR1", f"{array}_0"], capture_output=True,
                              text=True, timeout=30)
        assert done.returncode == 0, done.stderr

        def requeued() -> dict | None:  # restarted once, and back in the queue (its old run ended)
            state = slurm_task.scontrol_state(array, 0)
            return state if state is not None and state["restarts"] == "1" and state["state"] == "PENDING" else None

        wait_until(requeued, "requeued", 60)
    finally:
        subprocess.run(["scancel", array], capture_output=True, timeout=30)
    assert "time limit near: requeued" in log.read_text()
