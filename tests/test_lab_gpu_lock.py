"""The shared server's GPU lock (harness.machine.gpulock, harness.machine.gpu.lock_id): keyed on the
GPU's UUID, so two Slurm jobs that each see their GPU as 0 never share a lock and one GPU never has
two, in a node-wide folder (never a job's own TMPDIR); --lock-timeout on `lab grade` and `lab check`;
the students' kit's check takes it too. No GPU here: nvidia-smi's listing is given, the lock is real."""

import os
import subprocess
import sys

import pytest

from harness.lab.judge import grade
from harness.lab.judge.rules import assignment
from harness.machine import gpu, gpulock
from tests.conftest import ROOT


def python(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)


LISTING = "GPU-aaaaaaaa-1111\nGPU-bbbbbbbb-2222\n"


@pytest.mark.parametrize("visible,listing,expected", [
    ("1", LISTING, "GPU-bbbbbbbb-2222"),  # a server's second GPU
    ("0", "GPU-bbbbbbbb-2222\n", "GPU-bbbbbbbb-2222"),  # the same GPU in a Slurm job, renumbered 0
    ("GPU-cccc-3333", LISTING, "GPU-cccc-3333"),  # named by its UUID already
    ("MIG-dddd-4444", None, "MIG-dddd-4444"),
    ("3", LISTING, None), ("0", None, None), ("0", "No devices were found\n", None),
])
def test_the_gpu_lock_is_keyed_on_the_gpu_s_uuid(visible, listing, expected):
    assert gpu.uuid_of(visible, listing) == expected


def test_one_lock_for_one_gpu_whatever_its_number_in_each_job(monkeypatch):
    """Two Slurm jobs on one node: one sees the GPU as 1 (no device cgroup), the other as 0 (its cgroup
    shows it alone); both lock the same file, in a folder no job has its own copy of."""
    monkeypatch.delenv("LENET_LOCK_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", "/tmp/job-1234")  # a site's per-job TMPDIR
    paths = []
    for visible, listing in (("1", LISTING), ("0", "GPU-bbbbbbbb-2222\n")):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        monkeypatch.setattr(gpu, "gpu_listing", lambda listing=listing: listing)
        paths.append(gpulock.lock_path(gpu.lock_id()))
    assert paths[0] == paths[1] and paths[0].name == "lenet-levels-gpuGPU-bbbbbbbb-2222.lock"
    assert str(paths[0].parent) in gpulock.NODE_FOLDERS + ("/tmp",) and "job-1234" not in str(paths[0])
    monkeypatch.setattr(gpu, "gpu_listing", lambda: None)  # no nvidia-smi: the index, as before
    assert gpu.lock_id() == "0"


def test_lab_grade_waits_at_most_lock_timeout_for_the_gpu(monkeypatch, tmp_path):
    """--lock-timeout on lab grade and lab check: the lock the grader takes waits that long, then the
    rows say they were timed without it."""
    monkeypatch.setenv("LENET_LOCK_DIR", str(tmp_path))
    monkeypatch.setattr(gpu, "absent_reason", lambda: None)
    monkeypatch.setattr(gpu, "gpu_listing", lambda: "GPU-bbbbbbbb-2222\n")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from harness.machine.gpulock import GpuLock; "
                               "GpuLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(60)",
                               "GPU-bbbbbbbb-2222"], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        said: list[str] = []
        lock = grade.gpu_lock(assignment.load("cudnn"), said.append, 0.3)
        assert lock is not None and lock.acquire() is False
        assert "GPU busy" in said[0] and "GPU-bbbbbbbb-2222" in said[0]
    finally:
        holder.kill()
        holder.wait()
    for command in ("grade", "check"):
        assert "--lock-timeout" in python("lab", command, "--help").stdout


def test_the_kit_s_check_takes_the_gpu_lock_and_says_who_holds_it(tmp_path):
    """`lenet-lab check` of a GPU lab, in the kit (only its files: kit.INTERFACE): while another run
    holds the GPU it says who, waits --lock-timeout, then checks anyway; a machine with no usable lock
    folder checks without one."""
    from harness.lab.term.handout import kit

    for relative in kit.INTERFACE:
        (tmp_path / "kit" / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "kit" / relative).write_bytes((ROOT / relative).read_bytes())
    locks = tmp_path / "locks"
    locks.mkdir()
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path / "kit"), "LENET_LOCK_DIR": str(locks),
           "CUDA_VISIBLE_DEVICES": "GPU-bbbbbbbb-2222"}
    holder = subprocess.Popen([sys.executable, "-c", "import time; from harness.machine.gpulock import GpuLock; "
                               "GpuLock('GPU-bbbbbbbb-2222').acquire(); print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    check = ("import sys; from harness.lab.term.handout import sharing\n"
             "with sharing.gpu_lock(print, 0.3) as held: print('checked, lock held:', held)")
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=60)
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 0, done.stderr
    assert "GPU busy: " in done.stdout and f"pid {holder.pid} is timing on it" in done.stdout and "checked, lock held: False" in done.stdout
    alone = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env, cwd=tmp_path,
                           timeout=60)
    assert "checked, lock held: True" in alone.stdout, alone.stderr
    nowhere = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=tmp_path,
                             env={**env, "LENET_LOCK_DIR": str(tmp_path / "no-such-folder")}, timeout=60)
    assert "no GPU lock here" in nowhere.stdout and "checked, lock held: None" in nowhere.stdout, nowhere.stderr
