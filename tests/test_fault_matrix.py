"""The fault matrix: every kind of bad input or bad luck a shared course server sees gets a
clear message, a non-zero exit (or a failure row), no traceback, and loses no finished row."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from harness import DEFAULT_WEIGHTS, registry
from harness.machine import gpu
from harness.machine.gpulock import GpuLock
from harness.measure.store import results
from tests.conftest import ROOT, random_weights, write_keras3_file
from tests.conftest import harness_in_process as in_process
from tests.test_runner import final_rows, lab_cell, only_run, run_cli, write_study

NO_GPU = gpu.absent_reason()


def harness(*args, env=None):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


def assert_clean_error(run, code, *fragments):
    assert run.returncode == code, (run.returncode, run.stderr)
    assert "Traceback" not in run.stderr
    error_lines = [line for line in run.stderr.splitlines() if line.startswith("ERROR: ")]
    assert len(error_lines) == 1, run.stderr
    for fragment in fragments:
        assert fragment in error_lines[0], error_lines[0]


# --- weights files ----------------------------------------------------------------------------

def bad_weights(tmp_path, kind):
    path = tmp_path / f"{kind}.weights.h5"
    if kind == "missing":
        return path
    if kind == "corrupt":
        path.write_bytes(os.urandom(4096))
    elif kind == "truncated":
        path.write_bytes(DEFAULT_WEIGHTS.read_bytes()[:20_000])
    elif kind == "other-architecture":  # a 3-layer MLP's weights
        import h5py

        with h5py.File(path, "w") as f:
            for i, (a, b) in enumerate([(784, 128), (128, 64), (64, 10)]):
                g = f.create_group(f"layers/dense_{i}/vars")
                g["0"], g["1"] = np.zeros((a, b), np.float32), np.zeros(b, np.float32)
    elif kind == "wider-conv1":
        layers = random_weights()
        write_keras3_file(path, layers, {"conv1/kernel": np.zeros((5, 5, 1, 32), np.float32)})
    elif kind in ("nan", "inf"):
        layers = random_weights()
        bad = layers["conv2"].kernel.copy()
        bad[0, 0, 0, 0] = np.nan if kind == "nan" else np.inf
        write_keras3_file(path, layers, {"conv2/kernel": bad})
    return path


WEIGHT_CASES = {
    "missing": "weights file not found",
    "corrupt": "expected a Keras weights file: .weights.h5 (Keras 3 model.save_weights), .keras",
    "truncated": "an HDF5 file that cannot be read (truncated or damaged?)",
    "other-architecture": "not a LeNet-5 weights file: expected 5 weighted layers",
    "wider-conv1": "conv1/kernel (/layers/conv2d/vars/0): expected shape (5, 5, 1, 6), found (5, 5, 1, 32)",
    "nan": "conv2/kernel: 1 non-finite value(s) (NaN or Inf)",
    "inf": "conv2/kernel: 1 non-finite value(s) (NaN or Inf)",
}


@pytest.mark.parametrize("kind", WEIGHT_CASES)
@pytest.mark.parametrize("command", ["verify", "run"])
def test_bad_weights_file(tmp_path, capsys, kind, command):
    path = bad_weights(tmp_path, kind)
    args = (["verify", "--implementations", "numpy"] if command == "verify"
            else ["run", "smoke", "--out", tmp_path / "out"])
    run = in_process(capsys, *args, "--weights", path)
    assert_clean_error(run, 2, str(path), WEIGHT_CASES[kind])
    assert not (tmp_path / "out").exists()  # nothing started


# --- study files ------------------------------------------------------------------------------

@pytest.mark.parametrize("text,fragment", [
    ("[[cells]\nimplementation = 'numpy'\n", "TOML syntax error"),
    ("[measure]\nrepeats = 3\n[[cells]]\nimplementation = 'numpy'\n", "unknown key(s) ['repeats']; allowed:"),
    ("[[cells]]\nimplementation = 'pytorch'\n", "unknown implementation 'pytorch'; expected one of"),
    ("[[cells]]\nimplementation = 'numpy'\ndevices = ['tpu']\n", "devices: unknown value 'tpu'; allowed: ['cpu', 'gpu']"),
])
def test_bad_study_file(tmp_path, capsys, text, fragment):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    run = in_process(capsys, "run", path, "--out", tmp_path / "out")
    assert_clean_error(run, 2, str(path), fragment)


def test_unknown_study_name_lists_the_studies(tmp_path):
    run = harness("run", "api_level", "--out", tmp_path)
    assert_clean_error(run, 2, "study 'api_level' not found", "api_levels")


# --- a GPU asked for where there is none ------------------------------------------------------

@pytest.mark.skipif(NO_GPU is None, reason="this machine has a GPU")
def test_gpu_requested_without_gpu(tmp_path, capsys):
    run = in_process(capsys, "verify", "--implementations", "cudnn", "--device", "gpu", "--limit", "10")
    assert run.returncode == 3 and "Traceback" not in run.stderr
    assert "unavailable" in run.stderr and "could not run here" in run.stderr
    run = in_process(capsys, "run", "api_levels", "--devices", "gpu", "--out", tmp_path)
    assert_clean_error(run, 3, "--devices gpu", NO_GPU)
    run = in_process(capsys, "run", "smoke", "--devices", "gpu", "--out", tmp_path)
    assert_clean_error(run, 2, "no cell of study 'smoke' left")


@pytest.mark.skipif(NO_GPU is None, reason="this machine has a GPU")
def test_gpu_cells_of_a_study_are_skipped_with_the_reason(tmp_path):
    path = write_study(tmp_path, extra='[[cells]]\nimplementation = "null"\ndevices = ["gpu"]\n')
    run = run_cli(path, "--out", tmp_path)
    assert run.returncode == 0, run.stderr
    skipped = final_rows(only_run(tmp_path))["null/default/gpu/b1/float32"]
    assert skipped["status"] == "skipped" and skipped["reason"] == NO_GPU


# --- out of memory ----------------------------------------------------------------------------

def test_out_of_memory_is_a_failed_cell_not_a_failed_study(tmp_path):
    path = write_study(tmp_path, extra=lab_cell("MemoryHogLeNet"))
    run = run_cli(path, "--out", tmp_path)
    assert run.returncode == 0, run.stderr
    rows = final_rows(only_run(tmp_path))
    hog = rows["tests.fake_impls:MemoryHogLeNet/default/cpu/b1/float32"]
    assert hog["status"] == "error" and hog["reason"].startswith("out of memory: MemoryError")
    assert "smaller batch" in hog["reason"]
    assert rows["null/default/cpu/b1/float32"]["status"] == "ok"


@pytest.mark.gpu
@pytest.mark.skipif(NO_GPU is not None, reason=f"needs an NVIDIA GPU: {NO_GPU}")
def test_gpu_out_of_memory_with_a_low_cupy_limit(tmp_path):
    path = write_study(tmp_path, extra='[[cells]]\nimplementation = "cudnn"\nbatch_sizes = [512]\n')
    run = run_cli(path, "--out", tmp_path, env={"CUPY_GPU_MEMORY_LIMIT": "65536"})
    assert run.returncode == 0, run.stderr
    rows = final_rows(only_run(tmp_path))
    cell = rows["cudnn/tuned/gpu/b512/float32"]
    assert cell["status"] in ("error", "skipped") and "memory" in cell["reason"].lower()
    assert rows["null/default/cpu/b1/float32"]["status"] == "ok"


# --- workers that hang, runs that are interrupted or killed ----------------------------------

@pytest.mark.slow
def test_hanging_worker_times_out(tmp_path):
    path = write_study(tmp_path, timeout=2, extra=lab_cell("HangingLeNet"))
    # the hang is in the first (cold-start) call, so it is the setup timeout that fires
    text = path.read_text().replace("timeout_s = 2", "timeout_s = 2\nsetup_timeout_s = 3")
    path.write_text(text)
    started = time.monotonic()
    run = run_cli(path, "--out", tmp_path)
    assert run.returncode == 0, run.stderr
    assert time.monotonic() - started < 60
    rows = final_rows(only_run(tmp_path))
    hung = rows["tests.fake_impls:HangingLeNet/default/cpu/b1/float32"]
    assert hung["status"] == "timeout" and "no answer within 3 s" in hung["reason"]
    assert rows["null/default/cpu/b1/float32"]["status"] == "ok"




@pytest.mark.slow
@pytest.mark.parametrize("kill_after_rounds", [1, 7, 15])
def test_sigkill_of_the_runner_loses_no_finished_row_and_resume_completes(tmp_path, kill_after_rounds):
    path = write_study(tmp_path, calls=400, rounds=10, extra=lab_cell("SleepyLeNet"))
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(path), "--out", str(tmp_path),
                             "--run-id", "k"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    run_dir = tmp_path / "t" / "k"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rows = results.read_rows(run_dir)
        if sum(r["kind"] == "round" for r in rows) >= kill_after_rounds:
            break
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # the runner and its workers, at once
    proc.wait()
    kept = [r for r in results.read_rows(run_dir) if r["kind"] == "round"]
    assert len(kept) >= kill_after_rounds
    run = run_cli(path.stem, "--out", tmp_path, "--resume", "--run-id", "k")
    assert run.returncode == 0, run.stderr
    rows = results.read_rows(run_dir)
    rounds = [(r["cell_id"], r["round"]) for r in rows if r["kind"] == "round"]
    assert len(rounds) == len(set(rounds)) == 20  # nothing redone, nothing missing
    for r in kept:  # every row finished before the kill is still there, unchanged
        assert r in rows
    finals = final_rows(tmp_path / "t" / "k")
    assert {f["status"] for f in finals.values()} == {"ok"} and len(finals) == 2
    assert all(len(f["rounds_ns"]) == 10 for f in finals.values())



def gated_run(tmp_path, *extra_args, sigint_ignored=False):
    """A run whose gated cell blocks in its third round (after 250 calls) until tmp_path/gate
    exists: by then 5 round rows are written, and the run cannot end on its own."""
    path = write_study(tmp_path, calls=1000, rounds=10, extra=lab_cell("GatedLeNet"))
    env = {**os.environ, "LENET_TEST_GATE": str(tmp_path / "gate"), "LENET_TEST_GATE_AFTER": "250"}
    command = [sys.executable, "-m", "harness", "run", str(path), "--out", str(tmp_path), *extra_args]
    if sigint_ignored:  # as `cmd &` in a script: SIGINT ignored, inherited through exec. A shell
        # rather than preexec_fn: no Python runs between fork and exec, which can deadlock in a
        # pytest(-xdist) process that imported JAX for an earlier test
        command = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *command]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    return path, proc, env


def wait_for_rounds(rows_glob, count, proc):
    """Until `count` round rows are written (no timing: the gated cell holds the run open)."""
    deadline = time.monotonic() + 120  # a guard against a broken harness, not a timing check
    while time.monotonic() < deadline and proc.poll() is None:
        found = list(rows_glob())
        rows = results.read_rows(found[0].parent) if found else []
        if sum(r["kind"] == "round" for r in rows) >= count:
            return rows
        time.sleep(0.02)
    raise AssertionError(f"never saw {count} round rows (runner exit code {proc.poll()})")


def test_ctrl_c_mid_run_keeps_rows_leaves_no_process_and_resumes(tmp_path):
    path, proc, env = gated_run(tmp_path, "--run-id", "c")
    rows_path = tmp_path / "t" / "c" / "results.jsonl"
    wait_for_rounds(lambda: [rows_path] if rows_path.exists() else [], 4, proc)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in stderr
    assert "--resume" in stderr and "--run-id c" in stderr
    kept = results.read_rows(rows_path.parent)
    pids = {r["pid"] for r in kept if r["kind"] == "setup"}
    for pid in pids:  # every worker is gone (the runner waits for each one it kills)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert 4 <= sum(r["kind"] == "round" for r in kept) < 20
    (tmp_path / "gate").touch()  # open the gate: the resumed run can finish
    run = run_cli("t", "--out", tmp_path, "--resume", "--run-id", "c", env=env)
    assert run.returncode == 0, run.stderr
    finals = final_rows(tmp_path / "t" / "c")
    assert {f["status"] for f in finals.values()} == {"ok"}
    assert all(sum(len(r) for r in f["rounds_ns"]) == 1000 for f in finals.values())


def test_interrupt_works_when_started_in_the_background(tmp_path):
    """`harness run ... &` from a script inherits SIGINT ignored; kill -INT still stops it cleanly."""
    _, proc, _ = gated_run(tmp_path, sigint_ignored=True)
    wait_for_rounds(lambda: (tmp_path / "t").glob("*/results.jsonl"), 1, proc)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "--resume" in stderr and "Traceback" not in stderr


@pytest.mark.slow
def test_sigterm_is_handled_like_ctrl_c(tmp_path):
    _, proc, _ = gated_run(tmp_path)
    wait_for_rounds(lambda: (tmp_path / "t").glob("*/results.jsonl"), 1, proc)
    proc.terminate()
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in stderr and "Traceback" not in stderr


def test_partial_last_line_is_skipped_by_readers_and_cut_by_resume(tmp_path):
    rows_path = tmp_path / "results.jsonl"
    first = {"schema": 1, "run_id": "r", "time": 1.7e9, "kind": "load", "round": 0}
    rows_path.write_text(json.dumps(first) + '\n{"kind": "cell", "cut')  # killed mid-write
    assert results.read_rows(tmp_path) == [first]
    writer = results.RowWriter(tmp_path, "r")
    writer.write({"kind": "load", "round": 1})
    writer.close()
    lines = rows_path.read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line) for line in lines)


# --- a server shared by a class ----------------------------------------------------------------

@pytest.mark.slow
def test_two_users_at_once_write_separate_run_folders(tmp_path, capsys):
    path = write_study(tmp_path, extra='[[cells]]\nimplementation = "numpy"\n')  # smoke's two levels, one process each
    procs = [subprocess.Popen([sys.executable, "-m", "harness", "run", str(path), "--out", str(tmp_path)],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    runs = list((tmp_path / "t").iterdir())
    assert len(runs) == 2
    for run_dir in runs:
        finals = final_rows(run_dir)
        assert len(finals) == 2 and all(f["run_id"] == run_dir.name for f in finals.values())
    compared = in_process(capsys, "compare", *runs)  # and the two runs can be compared cell by cell
    assert compared.returncode == 0, compared.stderr
    assert "null/default/cpu/b1/float32" in compared.stdout and "numpy/default" in compared.stdout


HOLD_LOCK = """
import sys, time
from harness.machine.gpulock import GpuLock
lock = GpuLock("0")
assert lock.acquire()
print("held", flush=True)
time.sleep(float(sys.argv[1]))
"""


def test_gpu_lock_makes_a_second_run_wait_then_flag(tmp_path, monkeypatch):
    monkeypatch.setenv("LENET_LOCK_DIR", str(tmp_path))
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, "30"], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, env={**os.environ, "LENET_LOCK_DIR": str(tmp_path)})
    assert holder.stdout.readline().strip() == "held"
    messages = []
    lock = GpuLock("0", timeout_s=0.5, report=messages.append)
    started = time.monotonic()
    assert lock.acquire() is False and lock.waited_in_vain
    assert 0.4 < time.monotonic() - started < 60  # it waited its timeout, then gave up (a guard, not a timing check)
    assert "GPU busy:" in messages[0] and f"pid {holder.pid}" in messages[0] and "flagged contended" in messages[1]
    holder.kill()  # a killed holder never leaves a stale lock
    holder.wait()
    waiting = GpuLock("0", timeout_s=5, report=messages.append)
    assert waiting.acquire() is True
    waiting.release()


def test_contention_flags_other_processes_and_a_busy_gpu():
    quiet = {"utilization_pct": 0.0, "other_pids": []}
    assert gpu.contention([quiet, quiet]) is None
    assert "pids [4242]" in gpu.contention([quiet, {"utilization_pct": 90.0, "other_pids": [4242]}])
    assert gpu.contention([quiet], busy_before_run={"utilization_pct": 60.0, "other_pids": []}) == \
        "GPU 60% busy before this run started"
    if NO_GPU:
        assert gpu.sample() is None


def test_gpu_option_sets_cuda_visible_devices_for_workers():
    code = ("import os, sys; from harness.cli import main; "
            "sys.argv = ['x']; main(['--gpu', '3', 'list']); "
            "print('CVD=' + os.environ['CUDA_VISIBLE_DEVICES'])")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "CVD=3" in done.stdout


@pytest.mark.slow
@pytest.mark.skipif(NO_GPU is None, reason="this machine has a GPU")
def test_doctor_gives_each_gpu_row_its_reason_in_one_line():
    run = harness("doctor", "--implementations", "numpy,cudnn")
    assert run.returncode == 0, run.stderr
    rows = {tuple(line.split()[:2]): line for line in run.stdout.splitlines()
            if line.split()[:1] in (["numpy"], ["cudnn"])}
    assert rows[("numpy", "cpu")].split()[2] == "ok"
    assert "runs on cpu only" in rows[("numpy", "gpu")]
    assert "cpu" in rows[("cudnn", "cpu")] and "n/a" in rows[("cudnn", "cpu")]
    assert NO_GPU in rows[("cudnn", "gpu")] and "fix:" in rows[("cudnn", "gpu")]
    assert "cuDNN: version" in run.stdout or "cuDNN: no usable libcudnn" in run.stdout
    assert "TensorFlow" not in run.stdout  # no level asked for runs on it: its 5-7 s import is skipped


def test_doctor_asks_tensorflow_only_for_the_levels_that_run_on_it():
    from harness.machine import doctor

    assert [n for n in registry.REGISTRY if doctor.uses_tensorflow(n)] == ["tf", "keras"]
