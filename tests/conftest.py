import atexit
import copy
import fcntl
import gzip
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from types import SimpleNamespace

# One BLAS thread in the suite's processes and every process they start (inherited through the
# environment), set before NumPy loads OpenBLAS: its idle threads spin, and on 2 cores they cost
# as much CPU again as the NumPy work of a test. One OpenMP thread likewise, before libgomp loads
# (the oneDNN level's, torch's): a parallel region's threads spin-wait for each other, and where
# the suite's workers keep both cores busy a region waits for a thread that is not running (the
# oneDNN level's tests took 8-15 s beside two busy processes, 3 s with one thread). Timed processes
# get their threads from the harness (harness.machine.procenv) whatever is set here; a caller's
# own setting stands.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from harness import DEFAULT_DATA_DIR, DEFAULT_RESULTS, DEFAULT_WEIGHTS  # noqa: E402
from harness.data import mnist, weights  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# Every JAX process the suite starts (verify, explain, verify-train, Keras on JAX) compiles the same
# small XLA programs: Keras' initializers alone take 3.5 s of a 4 s model build on 2 cores. One
# compilation cache per test process and the subprocesses it starts (inherited through the
# environment) compiles each once. Only the tests set it: `make run-all` and the studies never do.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:  # the first pytest process: xdist's workers inherit it
    _JAX_CACHE = tempfile.mkdtemp(prefix="lenet-tests-jax-cache-")
    atexit.register(shutil.rmtree, _JAX_CACHE, ignore_errors=True)  # by its maker, after the workers
    os.environ.update({"JAX_COMPILATION_CACHE_DIR": _JAX_CACHE, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                       "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"})
# Numba's kernels likewise (lenet_numba.kernels.CACHE): about 3 s of a core in each of the suite's
# processes that builds the Numba level (verify, explain, the studies' workers, the bill).
if "NUMBA_CACHE_DIR" not in os.environ:
    _NUMBA_CACHE = tempfile.mkdtemp(prefix="lenet-tests-numba-cache-")
    atexit.register(shutil.rmtree, _NUMBA_CACHE, ignore_errors=True)
    os.environ["NUMBA_CACHE_DIR"] = _NUMBA_CACHE


# The longest groups, longest first (summed from --durations=0 on three workers, on a Zen 5 host):
# each worker takes the next group when it is nearly done, so no long one starts last while the others
# idle. test_lab_sandbox.py (seconds) first: it forks with a preexec_fn in-process, before any file of
# that worker has imported JAX (whose threads can deadlock Python code between fork and exec).
LONGEST_FIRST = ("test_lab_sandbox.py", "test_explain.py", "test_lab_train_kinds.py", "test_explain.py:2",
                 "slurm", "test_lab.py", "test_framework_levels.py", "test_report.py", "test_training.py",
                 "test_fault_matrix.py", "test_cuda_level.py", "test_gpu_study.py", "test_lab_hang.py",
                 "test_lab_kit.py", "test_lab_ring2.py", "test_weight_formats.py", "test_report_truth.py",
                 "test_lab_limits.py", "test_add_a_level.py", "test_shared_server_users.py")


def xdist_group_of(item, slurm_files) -> str:
    if item.get_closest_marker("gpu"):
        return "gpu"
    return "slurm" if item.path in slurm_files else item.path.name


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(config, items):
    """Groups for `pytest -n N --dist loadgroup` (make test): a group runs on one worker, in order.

    A file is one group, so its module fixtures (a lab graded, a study run, Keras files written)
    and the frameworks it imports in-process are built once, not once per worker. Every file with
    a Slurm test is one group "slurm": the one-node Slurm has 2 CPUs, and jobs from two workers
    would queue behind each other past the tests' deadlines. GPU tests are one group "gpu": one
    at a time on the GPU, as in a serial run."""
    slurm_files = {item.path for item in items if item.get_closest_marker("slurm")}
    groups = {}
    for item in items:
        marked = item.get_closest_marker("xdist_group")
        groups[item] = marked.args[0] if marked and marked.args else xdist_group_of(item, slurm_files)
        if not marked:
            item.add_marker(pytest.mark.xdist_group(groups[item]))
    # xdist sets option.loadgroup in its workers (they collect; their option.dist reads "no");
    # a serial run keeps the files' order
    if getattr(config.option, "loadgroup", False):
        rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(groups[item], len(rank)))  # stable: files stay whole


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """LENET_SLURM_REQUIRED=1 (.ci/run, once it started the local Slurm): a Slurm test that skips
    fails instead, with its skip reason, so CI never passes with its cluster tests unrun."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("LENET_SLURM_REQUIRED") == "1" and item.get_closest_marker("slurm"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"a Slurm test skipped while .ci/run's Slurm runs (LENET_SLURM_REQUIRED=1): {reason}"


def closed_to(user: str, needs: list) -> str | None:
    """None when `user` (a Slurm job's, a test's own) can reach each of `needs` ((what, path, mode), as
    harness.machine.slurmctl.check_reachable takes them); else the words naming the folder to open.
    Asked of the user itself (runuser ... test), at once: a job that cannot start makes a test wait
    out its deadline and fail with words about something else."""
    import subprocess

    from harness.errors import HarnessError
    from harness.machine import slurmctl

    def can(path: str, mode: int) -> bool:
        flags = [flag for bit, flag in ((os.R_OK, "-r"), (os.W_OK, "-w"), (os.X_OK, "-x")) if mode & bit]
        return all(subprocess.run(["runuser", "-u", user, "--", "test", flag, path], capture_output=True,
                                  timeout=30).returncode == 0 for flag in flags)

    try:
        slurmctl.check_reachable(needs, user, can)
    except HarnessError as exc:
        return str(exc)
    return None


def harness_in_process(capsys, *args) -> SimpleNamespace:
    """`python -m harness ARGS` through the function it calls, cli.main, in this process (one
    interpreter fewer where the command's own start is not what a test checks): its exit code,
    stdout and stderr. What the command sets for itself and its children is put back after it:
    this process's signal handlers and environment (thread counts, CUDA_VISIBLE_DEVICES, the data
    folder), which would otherwise reach every later test's children."""
    from harness import cli

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    environment = dict(os.environ)
    capsys.readouterr()
    try:
        code = cli.main(list(map(str, args)))
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        os.environ.clear()
        os.environ.update(environment)
    out, err = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


@pytest.fixture
def mnist_copy(tmp_path) -> Path:
    """A writable copy of the shipped MNIST folder, for damaging files."""
    folder = tmp_path / "mnist"
    shutil.copytree(DEFAULT_DATA_DIR, folder)
    return folder


@pytest.fixture(scope="session")
def loc_counted() -> list[dict]:
    from harness.report.claims import loc

    return loc.count()  # pygount over every level's sources: 1-2 s, and ten tests read it


@pytest.fixture
def loc_rows(loc_counted) -> list[dict]:
    """The lines-of-code rows of this checkout (harness.report.claims.loc.count()), counted once per
    session; each test gets a copy of its own."""
    return copy.deepcopy(loc_counted)


def session_folder(tmp_path_factory) -> Path:
    """The session's temporary folder, which its xdist workers share (each has its own below it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def committed_report(loc_counted):
    """The committed results as `make report` reads them (with this checkout's line counts), read once
    a session for the tests that read them unchanged: a test that changes the results reads a copy."""
    from harness.report.claims import rundata

    if not any(DEFAULT_RESULTS.glob("api_levels/*/results.jsonl*")):
        pytest.skip("no committed reference results (make run-all writes them)")
    return rundata.load_report(DEFAULT_RESULTS, copy.deepcopy(loc_counted))


@pytest.fixture(scope="session")
def committed_texts(committed_report) -> tuple[str, str]:
    """(REPORT.md, DETAILS.md) built from committed_report (markdown.build, details.build), once a
    session for the tests that read them: about a second of a core a pair."""
    from harness.report import details, markdown

    return markdown.build(committed_report), details.build(committed_report)


@pytest.fixture(scope="session")
def shared_weights() -> dict:
    return weights.read(DEFAULT_WEIGHTS)


def read_only(*arrays):
    for array in arrays:
        array.setflags(write=False)  # shared by the whole session: a test that writes fails loudly
    return arrays


@pytest.fixture(scope="session")
def mnist_test() -> tuple[np.ndarray, np.ndarray]:
    """The shipped test split (images (10000, 28, 28) uint8, labels), read and checked once."""
    return read_only(*mnist.load("test"))


def oracle_sample(images: np.ndarray, count: int, dtype: str = "float32") -> tuple[np.ndarray, np.ndarray]:
    """The first `count` images as a level takes them (count, 28, 28, 1) float32, and the NumPy
    oracle's probabilities for them (count, 10) in `dtype`: what each level's tests compare with."""
    from lenet_numpy.model import NumpyLeNet

    x = mnist.to_input(images[:count])
    return x, NumpyLeNet(DEFAULT_WEIGHTS, dtype=dtype).predict(x.astype(dtype))


def assert_matches_oracle(level, x: np.ndarray, reference: np.ndarray, dtype: str, tolerance: float) -> None:
    """The level's probabilities agree with the oracle's (from `oracle_sample`) in argmax and within
    `tolerance`, at the whole sample, 1, 7 and the whole sample again: a size seen before reuses
    what the level built for it (its buffers, bound calls)."""
    for batch in (x, x[:1], x[:7], x):
        probs = level.predict(batch)
        assert probs.shape == (len(batch), 10) and probs.dtype == np.dtype(dtype)
        assert np.array_equal(probs.argmax(1), reference[: len(batch)].argmax(1))
        assert np.abs(probs - reference[: len(batch)]).max() <= tolerance


@pytest.fixture(scope="session")
def mnist_train() -> tuple[np.ndarray, np.ndarray]:
    """The shipped training split (60000 images), read and checked once."""
    return read_only(*mnist.load("train"))


def random_weights(seed=0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        name: weights.Layer(
            rng.normal(0, 0.2, kernel).astype(np.float32), rng.normal(0, 0.1, bias).astype(np.float32)
        )
        for name, (kernel, bias) in weights.SHAPES.items()
    }


def write_keras3_file(path: Path, layers: dict, overrides=None) -> Path:
    """A file in the Keras 3 save_weights layout: /layers/<group>/vars/{0,1} with a name attr."""
    import h5py

    groups = {"conv1": "conv2d", "conv2": "conv2d_1", "fc1": "dense", "fc2": "dense_1", "fc3": "dense_2"}
    overrides = overrides or {}
    with h5py.File(path, "w") as f:
        for name, layer in layers.items():
            group = f.create_group(f"layers/{groups[name]}/vars")
            group.attrs["name"] = name
            group["0"] = overrides.get(f"{name}/kernel", layer.kernel)
            group["1"] = overrides.get(f"{name}/bias", layer.bias)
    return path


def gzip_idx(folder: Path, name: str, raw: bytes, fix_checksum=False) -> None:
    (folder / f"{name}.gz").write_bytes(gzip.compress(raw))
    if fix_checksum:
        sums = folder / "SHA256SUMS"
        lines = [line for line in sums.read_text().splitlines() if not line.endswith(name)]
        lines.append(f"{hashlib.sha256(raw).hexdigest()}  {name}")
        sums.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    """The CUDA kernels compiled for the CPU (tests/fake_cuda.py), once a session: the first worker
    to ask builds them into the session's folder (3-4 s of g++), the others wait and load that
    library; skipped without a C++ compiler."""
    from tests import fake_cuda

    folder = session_folder(tmp_path_factory) / "cuda-emu"
    folder.mkdir(exist_ok=True)
    with open(folder.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return fake_cuda.build(folder)
        except FileNotFoundError as exc:
            pytest.skip(str(exc))


SLURM_HINT = "start a one-node Slurm with: sudo scripts/slurm-local.sh start"


def slurm_missing() -> str | None:
    """Why no Slurm answers here (no sbatch, or no controller behind sinfo), or None when one does:
    the reason a test that submits real jobs skips with."""
    if not shutil.which("sbatch"):
        return f"sbatch is not on PATH; {SLURM_HINT}"
    try:
        sinfo = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"sinfo failed ({exc}); {SLURM_HINT}"
    if sinfo.returncode != 0 or not sinfo.stdout.strip():
        reason = (sinfo.stderr.strip().splitlines() or ["no nodes"])[-1]
        return f"sinfo failed ({reason}); {SLURM_HINT}"
    return None
