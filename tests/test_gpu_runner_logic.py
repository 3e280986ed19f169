"""The runner's GPU-side logic, run for real on the CPU: the null implementation accepts
device="gpu", and NVML's answers are replaced by scripted samples."""

import os
import subprocess
import sys

import pytest

from harness.machine import gpu
from harness.measure import runner
from harness.measure.plan import study
from harness.measure.store import results
from tests.conftest import ROOT

STUDY = """
[study]
name = "g"
[measure]
calls = 40
rounds = 4
warmup = 2
[[cells]]
implementation = "null"
devices = ["gpu"]
[[cells]]
implementation = "tests.fake_impls:NullGpuLeNet"
[[cells]]
implementation = "null"
devices = ["cpu"]
"""
FOREIGN_PID = 999_999


def our_children() -> list[int]:
    """Live child processes of this test process (the run's workers), from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == os.getpid():
                found.append(int(entry))
    return found


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    monkeypatch.setenv("LENET_LOCK_DIR", str(tmp_path))
    monkeypatch.setattr(gpu, "absent_reason", lambda: None)
    calls = {"n": 0, "seen_own": []}
    # children this process had before the run (an earlier test's multiprocessing forkserver, in
    # a pytest-xdist worker) are not the run's workers and hold no GPU memory
    earlier = set(our_children())

    def sample(own_pids=()):
        calls["n"] += 1
        calls["seen_own"].append(list(own_pids))
        # every worker of this run holds GPU memory; a stranger shows up at the 5th sample only
        workers = [pid for pid in our_children() if pid not in earlier]
        on_gpu = workers + ([FOREIGN_PID] if calls["n"] == 5 else [])
        return {"utilization_pct": 0.0, "other_pids": sorted(set(on_gpu) - set(own_pids))}

    monkeypatch.setattr(gpu, "sample", sample)
    return calls


def run(tmp_path, lock_timeout=None):
    plan = study.parse(STUDY, "g.toml")
    run_dir, states = runner.start_run(plan, tmp_path / "out", "r", lock_timeout_s=lock_timeout,
                                       report=lambda line: None)
    rows = results.read_rows(run_dir)
    return {r["cell_id"]: r for r in rows if r["kind"] == "cell"}, rows


def test_only_a_foreign_process_flags_contention(tmp_path, fake_gpu):
    finals, rows = run(tmp_path)
    gpu_cells = [finals["null/default/gpu/b1/float32"],
                 finals["tests.fake_impls:NullGpuLeNet/default/gpu/b1/float32"]]
    assert [c["status"] for c in gpu_cells] == ["ok", "ok"]
    # exactly one request was sampled with the stranger present; the other GPU worker of this
    # run, idle while its neighbour measures, never counts as "another process"
    # the GPU watch's reasons (a round may also be flagged for the machine's CPU load: round N: ...)
    reasons = [r for c in gpu_cells for r in c["contended_reasons"] if not r.startswith("round ")]
    assert reasons == [f"other processes on the GPU: pids [{FOREIGN_PID}]"]
    # samples 1 and 2 come before any worker exists (before the run, before the first setup);
    # from then on our worker pids are always passed to be excluded
    assert fake_gpu["seen_own"][0] == [] and all(fake_gpu["seen_own"][2:])
    cpu_reasons = finals["null/default/cpu/b1/float32"]["contended_reasons"]
    assert not [r for r in cpu_reasons if not r.startswith("round ")]  # CPU cells are not GPU-sampled
    assert not runner.gpu_peers_path().exists()  # the workers' pid list goes with them


HOLD = "from harness.machine.gpulock import GpuLock; import time; GpuLock('0').acquire(); print('held', flush=True); time.sleep(60)"


def test_gpu_cells_flagged_when_the_lock_is_held_elsewhere(tmp_path, fake_gpu):
    holder = subprocess.Popen([sys.executable, "-c", HOLD], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "LENET_LOCK_DIR": str(tmp_path)})
    try:
        assert holder.stdout.readline().strip() == "held"
        finals, _ = run(tmp_path, lock_timeout=0.3)
    finally:
        holder.kill()
        holder.wait()
    cell = finals["null/default/gpu/b1/float32"]
    assert cell["status"] == "ok" and cell["contended"]
    assert any(r.startswith("GPU lock not obtained in time (held by ") for r in cell["contended_reasons"])
