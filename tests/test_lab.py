"""Lab grading (harness.lab): the shipped examples, submissions written here that hang, eat
memory, fail to import, crash, patch the clock, memoise, answer stale, or crawl, and a hostile
class (tests/lab_hostile.py) that attacks the grader, its classmates, the project and --out; all
graded in one run, each gets its status, the leaderboard lists all of them; the same through a job
array on the local Slurm.

Nothing here depends on the machine's speed: the statuses come from limits far from honest
behaviour (a 5 s import limit against a sleep of an hour, 1 GiB against 64 GiB, 300x against a
one-second sleep per image, about 4000x, while the cheats compute at about 60x), and the speed
comparisons are the 30x-slow example against the correct one, and the cheats (twice the slow
example's work) against every honest submission."""

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from harness import registry
from harness.errors import HarnessError
from harness.lab.box.walls import isolation
from harness.lab.judge import attempts, slurm_task, store
from harness.lab.judge.rules import assignment, timing
from harness.measure import fastest_call
from tests import lab_hostile
from tests.conftest import ROOT

IS_ROOT = os.geteuid() == 0

LAB = """
[lab]
name = "test_cpu"
references = ["numpy", "onednn/tuned"]
[measure]
calls = 36
rounds = 3
warmup = 5
[gate]
images = 300
[limits]
wall_s = 60
import_s = 5  # what the hung ones wait; an honest import takes 0.06 s
memory_mb = 1024
cpu_s = 60
max_ratio = 300
"""

CORRECT = (ROOT / "labs" / "examples" / "correct" / "lenet.py").read_text()
WRAP = "import importlib.util, sys, time\nimport numpy as np\n" + CORRECT.split('"""', 2)[2]
SUBMISSIONS = {
    "hang": "import time\ntime.sleep(3600)\n",
    "broken": "raise RuntimeError('the student forgot something')\n",
    "hog": WRAP + "\n\nclass Hog(CorrectLeNet):\n    def predict(self, images):\n"
                  "        self.ballast = np.ones(64 << 30, dtype=np.uint8)\n"
                  "        return super().predict(images)\n",
    "segfault": WRAP + "\n\nclass Segv(CorrectLeNet):\n    def predict(self, images):\n"
                       "        import ctypes\n        return ctypes.string_at(0)\n",
    # a clock that runs 20x slow: every timed call looks 20x faster
    "clock": WRAP + "\n\n_real = time.perf_counter_ns\ntime.perf_counter_ns = lambda: _real() // 20\n\n"
                    "class Clocked(CorrectLeNet):\n    pass\n",
    # remembers every answer by the input's bytes (the gate's images included)
    "memo": WRAP + """

class Memo(CorrectLeNet):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cache = {}

    def predict(self, images):
        images = np.asarray(images, dtype=np.float32)
        missing = [i for i, image in enumerate(images) if image.tobytes() not in self.cache]
        if missing:
            for i, p in zip(missing, super().predict(images[missing])):
                self.cache[images[i].tobytes()] = p
        return np.stack([self.cache[image.tobytes()] for image in images])
""",
    # honest on batches (the gate), then answers every single image with the first one's answer
    "stale": WRAP + """

class Stale(CorrectLeNet):
    last = None

    def predict(self, images):
        if len(images) == 1 and self.last is not None:
            return self.last
        out = super().predict(images)
        if len(images) == 1:
            self.last = out
        return out
""",
    "sleepy": WRAP + "\n\nclass Sleepy(CorrectLeNet):\n    def predict(self, images):\n"
                     "        if len(images) == 1:\n            time.sleep(1.0)\n"
                     "        return super().predict(images)\n",
}
EXPECTED = {"correct": "ok", "slow": "ok", "wrong": "wrong", "hang": "timeout", "broken": "import-error",
            "hog": "out-of-memory", "segfault": "crashed", "clock": "timing-inconsistent", "memo": "ok",
            "stale": "wrong", "sleepy": "too-slow", **lab_hostile.EXPECTED}
HONEST = lab_hostile.HONEST | {"memo"}


# The class's workers take their UIDs from here, apart from other gradings that pytest-xdist runs
# beside it (tests/test_lab_slurm.py, tests/test_lab_limits.py): what is left behind is counted by UID.
CLASS_UID_BASE = 70000


def python(*args, timeout=600, uid_base=None, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if uid_base is not None:
        env["LENET_LAB_UID_BASE"] = str(uid_base)
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, **kwargs)


@pytest.fixture(scope="module")
def lab_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lab") / "test_cpu.toml"
    path.write_text(LAB)
    return path


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("graded")


@pytest.fixture(scope="module")
def listener():
    """A TCP port on the host's loopback that no sandboxed worker may reach."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


@pytest.fixture(scope="module")
def submissions(tmp_path_factory, out_dir, listener) -> Path:
    folder = tmp_path_factory.mktemp("submissions")
    for name in ("correct", "slow", "wrong"):
        shutil.copytree(ROOT / "labs" / "examples" / name, folder / name)
    for name, text in SUBMISSIONS.items():
        (folder / name).mkdir()
        (folder / name / "lenet.py").write_text(text)
    lab_hostile.write(folder, folder, out_dir, listener, uuid.uuid4().hex[:8])
    return folder


def snapshot(folder: Path) -> dict:
    """{relative path: kind and content hash} of a tree, without following links or opening pipes."""
    found = {}
    for path in sorted(Path(folder).rglob("*")):
        if "__pycache__" in path.parts or ".pytest_cache" in path.parts:
            continue
        mode = path.lstat().st_mode
        if stat.S_ISREG(mode):
            found[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[str(path.relative_to(folder))] = stat.S_IFMT(mode)
    return found


def checkout_snapshot() -> dict:
    return {name: snapshot(ROOT / name) for name in ("harness", "labs", "lenet_numpy", "lenet_onednn", "weights")}


def sandbox_processes(uid_base: int) -> list[str]:
    """Processes left by the gradings given uid_base: a UID of theirs (as root), else (no UID drop
    without root) any lab worker of this checkout."""
    left = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            uid = int((entry / "status").read_text().split("Uid:")[1].split()[0])
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        if IS_ROOT and uid_base <= uid < uid_base + isolation.BLOCKS * isolation.SLOTS or not IS_ROOT and \
                cmdline.startswith(f"{sys.executable} -m harness.lab.box.worker"):  # not another checkout's
            left.append(f"{entry.name} uid {uid}: {cmdline[:80]}")
    return left


@pytest.fixture(scope="module")
def graded(lab_file, submissions, out_dir):
    """One `lab grade` of the whole class, hostile students included, with what it left behind."""
    before_class, before_checkout = snapshot(submissions), checkout_snapshot()
    done = python("lab", "grade", str(lab_file), "--submissions", str(submissions), "--out", str(out_dir),
                  uid_base=CLASS_UID_BASE)
    assert done.returncode == 0, done.stderr
    after = {"class": snapshot(submissions), "checkout": checkout_snapshot(),
             "processes": sandbox_processes(CLASS_UID_BASE)}
    return out_dir, done, {"class": before_class, "checkout": before_checkout}, after


def rows_by_student(out: Path) -> dict:
    return {row["student"]: row for row in store.read_rows(out)}


# --- the lab file ----------------------------------------------------------------------------------
def test_shipped_labs_parse():
    cpu, gpu = assignment.load("cpu_numpy"), assignment.load("cudnn")
    fastest = fastest_call.fastest_measured("cpu").label  # cpu_numpy names the "floor": the committed rows'
    assert [r.label for r in cpu.references] == ["numpy", fastest] and cpu.rank_by.label == "numpy"
    assert cpu.gate == assignment.Gate(images=10000, min_agree=10000, max_abs_diff=1e-4)
    assert gpu.device == "gpu" and gpu.rank_by.label == "cudnn/tuned"


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "labs").glob("*.toml")))
def test_every_lab_s_starter_builds_on_the_lab_s_device(name):
    """The starter a lab hands out (its kit's) declares the lab's device and defaults to it: the
    cuDNN lab once handed out the CPU starter, which its grader refused on the GPU (import-error)."""
    import importlib.util
    import inspect

    from harness import base
    from harness.base import lenet_classes

    lab = assignment.load(name)
    spec_of = importlib.util.spec_from_file_location(f"starter_{name}", lab.starter / lab.module)
    module = importlib.util.module_from_spec(spec_of)
    spec_of.loader.exec_module(module)
    (cls,) = lenet_classes(module, getattr(base, lab.kind.base))  # the one class of its kind's base
    assert lab.device in cls.spec.devices and cls.spec.api_level == lab.rung, (name, cls.spec)
    assert inspect.signature(cls.__init__).parameters["device"].default == lab.device


def test_a_lab_rung_is_any_level_of_the_registry():
    """The rungs a lab may name are the registry's API levels: a level added there is a rung."""
    levels = {spec.api_level for spec in registry.REGISTRY.values() if spec.package}
    assert set(assignment.API_LEVELS) == levels and {"hand-written-c", "inference-engine", "cuda"} <= levels
    for level in levels:
        assignment.parse(f"[lab]\nrung = '{level}'\n", "labs/any.toml")


@pytest.mark.parametrize("text,expected", [
    ("[limits]\nwall = 5\n", "[limits]: unknown key(s) ['wall']; allowed: ['cpu_s', 'disk_mb', 'files', "
                             "'import_s', 'max_ratio', 'memory_mb', 'output_mb', 'peak_mb', 'pids', 'wall_s']"),
    ("[limits]\nfiles = 3\n", "files: expected a whole number >= 16, found 3"),
    ("[lab]\nallow_imports = ['lenet_nope']\n", "allow_imports: expected a list of the project's level packages"),
    ("[limits]\npids = 2\n", "pids: expected a whole number >= 4, found 2"),
    ("[labs]\n", "unknown table(s) ['labs']"),
    ("[lab]\nreferences = ['numpy/tuned']\n", "unknown variant 'tuned' of numpy"),
    ("[lab]\nreferences = ['numpy']\nrank_by = 'onednn/tuned'\n", "rank_by: 'onednn/tuned' is not one of"),
    ("[lab]\nreferences = ['cudnn']\n", "cudnn does not run on 'cpu'"),
    ("[gate]\nimages = 20000\n", "images: expected at most 10000"),
    ("[measure]\ncalls = 2\nrounds = 3\n", "expected calls >= rounds"),
    ("[lab]\nrung = 'tvm'\n", "rung: unknown API level 'tvm'; allowed: ['numpy', 'tensorflow-ops'"),
])
def test_a_bad_lab_file_names_the_file_and_the_key(text, expected):
    with pytest.raises(HarnessError) as caught:
        assignment.parse(text, "labs/bad.toml")
    assert str(caught.value).startswith("labs/bad.toml") and expected in str(caught.value)


# --- the timing rule, on numbers -----------------------------------------------------------------
def loaded_round(rng, calls=30, work_us=250.0, protocol_us=30.0):
    """An honest worker on a loaded machine: CPU per call = work + protocol; its clock around
    predict sees the work plus waits for a core (never less than the work)."""
    work = rng.normal(work_us, 20, calls).clip(50) * 1e3
    waits = np.where(rng.random(calls) < 0.3, rng.exponential(4000e3, calls), 0.0)
    times = work + waits * rng.random(calls)  # part of each wait falls inside the clock
    cpu = work + protocol_us * 1e3
    trips = times + protocol_us * 1e3 + waits
    return times, cpu, trips


def test_the_rule_never_flags_an_honest_worker_on_a_loaded_machine():
    rng = np.random.default_rng(1)
    for _ in range(300):
        ref_t, ref_cpu, _ = loaded_round(rng, work_us=rng.uniform(20, 300))
        gap = timing.protocol_gap_ns(ref_t, ref_cpu)
        t, cpu, _ = loaded_round(rng, work_us=rng.uniform(5, 20000), protocol_us=rng.uniform(10, 60))
        assert timing.inconsistency(t, cpu, gap) is None


def test_the_rule_flags_a_slow_clock_and_a_faked_median():
    rng = np.random.default_rng(2)
    ref_t, ref_cpu, _ = loaded_round(rng)
    gap = timing.protocol_gap_ns(ref_t, ref_cpu)
    t, cpu, _ = loaded_round(rng)
    assert "median reported" in timing.inconsistency(t / 20, cpu, gap)
    faked = np.full_like(t, 1e3)
    faked[:3] = t.sum() / 3  # the sum kept honest, the median tiny
    assert "median reported" in timing.inconsistency(faked, cpu, gap)
    assert timing.too_many(2, 3) and timing.too_many(1, 2) and not timing.too_many(1, 3)


def test_background_work_and_impossible_times_are_flagged():
    assert timing.busy_while_idle(40e3, 50e6) is None  # an honest worker finishing its last reply
    assert timing.busy_while_idle(1.5e6, 300e6) is None
    assert "used 8.0 ms of CPU while the references were timed" in timing.busy_while_idle(8e6, 50e6)
    assert timing.busy_while_idle(3e6, 500e6) is None and timing.busy_while_idle(11e6, 500e6)
    assert timing.longer_than_trip([100, 200], [150, 250]) is None
    assert "1 call(s) reported a time longer" in timing.longer_than_trip([100, 300], [150, 250])


def test_timed_images_are_new_and_secret():
    train = np.random.default_rng(0).integers(0, 256, (100, 28, 28), dtype=np.uint8)
    a, b = timing.timing_images(1, 50, train), timing.timing_images(2, 50, train)
    assert a.shape == (50, 28, 28) and a.dtype == np.uint8 and not np.array_equal(a, b)
    seen = {image.tobytes() for image in train}
    assert not any(image.tobytes() in seen for image in a)
    assert timing.new_seed() != timing.new_seed()


# --- grading the class ---------------------------------------------------------------------------
@pytest.mark.slow  # the class graded once: about a minute
def test_every_submission_gets_its_status(graded):
    out, done = graded[:2]
    rows = rows_by_student(out)
    assert {name: row["status"] for name, row in rows.items()} == EXPECTED, \
        {name: (row["status"], row["reason"]) for name, row in rows.items()}
    assert f"[1/{len(EXPECTED)}]" in done.stderr and "clock: timing-inconsistent" in done.stderr  # progress
    assert "import limit of 5 s" in rows["hang"]["reason"]
    assert "MemoryError" in rows["hog"]["reason"]
    assert "SIGSEGV" in rows["segfault"]["reason"]
    assert "forgot something" in rows["broken"]["reason"]
    stale = rows["stale"]  # right on the gate's images, caught on unseen single images: by the probe's
    # 3 calls (unless all 3 images share the first one's class, then by the warm-up, after the gate)
    assert re.search(r"timed calls: [1-9]\d* of \d+ answers on unseen images disagree", stale["reason"]), stale
    assert stale["gate_first"]["agree"] == 100 and stale.get("gate", {"agree": 300})["agree"] == 300
    assert rows["wrong"]["gate"]["agree"] < 150 and "test images disagree" in rows["wrong"]["reason"]
    # too slow: said by a probe of a few calls after the gate's first images, then gated on [gate]
    # slow_images only (here min(1000, the lab's 300): all of them), never timed
    sleepy = rows["sleepy"]
    assert "x numpy in a probe of 3 calls before the full gate" in sleepy["reason"], sleepy["reason"]
    assert "us per call, numpy" in sleepy["reason"] and \
        "not gated on more than its first 300 test images (which it passed) nor timed" in sleepy["reason"]
    assert sleepy["gate"]["agree"] == 300 and sleepy["probe_ratio"] > 300 and sleepy["seconds"] < 30
    assert rows["slow"]["probe_ratio"] < 300 and rows["correct"]["gate"]["images"] == 300


@pytest.mark.slow  # the class graded once: about a minute
def test_the_ranking_and_what_the_cheats_gained(graded):
    out = graded[0]
    rows = rows_by_student(out)
    ratio = {name: row["ratios"]["numpy"]["ratio"] for name, row in rows.items() if row["status"] == "ok"}
    assert ratio["slow"] > 3 * ratio["correct"]
    assert ratio["memo"] > 0.5 * ratio["correct"]  # unseen images: memoising gains nothing
    row = rows["correct"]
    assert row["loc"] > 20 and row["node"]["cpu"] and len(row["seeds"]) == 3
    assert set(row["ratios"]) == {"numpy", "onednn/tuned"}
    low, high = row["ratios"]["numpy"]["ci95_low"], row["ratios"]["numpy"]["ci95_high"]
    assert low <= ratio["correct"] <= high


@pytest.mark.slow  # the class graded once: about a minute
def test_the_leaderboard_lists_everyone_and_is_rebuilt_from_the_rows(graded):
    out = graded[0]
    for name in ("leaderboard.csv", "LEADERBOARD.md", "leaderboard.png"):
        (out / name).unlink()
    done = python("lab", "report", str(out), timeout=120)
    assert done.returncode == 0, done.stderr
    text = (out / "LEADERBOARD.md").read_text()
    for name, status in EXPECTED.items():
        assert f"[{name}](feedback/{name}.md) | {status} |" in text
    lines = (out / "leaderboard.csv").read_text().splitlines()
    assert len(lines) == 1 + len(EXPECTED)
    ranked = [line.split(",")[1] for line in lines[1:] if line.split(",")[0]]
    assert sorted(ranked) == sorted(n for n, status in EXPECTED.items() if status == "ok")
    assert ranked.index("correct") < ranked.index("slow")
    assert (out / "leaderboard.png").stat().st_size > 10_000
    assert "rank" in (out / "feedback" / "correct.md").read_text()
    assert (out / "feedback" / "correct.png").is_file()
    assert "Next step" in (out / "feedback" / "broken.md").read_text()
    wrong = (out / "feedback" / "wrong.md").read_text()  # its commands name the lab, none is left unfilled
    assert "`python -m lenet_lab check lenet.py`" in wrong and "lab-kit-test_cpu.zip" in wrong
    assert "LAB" not in wrong and "{" not in wrong


@pytest.mark.slow  # the class graded once: about a minute
def test_resume_skips_finished_submissions_and_a_second_grade_is_refused(graded, lab_file, submissions):
    out = graded[0]
    refused = python("lab", "grade", str(lab_file), "--submissions", str(submissions), "--out", str(out))
    assert refused.returncode == 2 and "--resume" in refused.stderr
    resumed = python("lab", "grade", str(lab_file), "--submissions", str(submissions), "--out", str(out),
                     "--resume", "--no-report", timeout=120)
    assert resumed.returncode == 0 and f"0 submission(s) to grade, {len(EXPECTED)} already graded" in resumed.stderr


@pytest.mark.slow  # the class graded once: about a minute
def test_changed_files_are_regraded_on_resume_and_named_students_by_regrade(graded, lab_file, submissions,
                                                                           tmp_path):
    """Every row records its files' sha256; --resume regrades a student whose files changed since,
    `--only` (with or without --resume) and `lab regrade OUT --only` grade the named ones again and
    keep the rest; the leaderboard is rebuilt."""
    copy = tmp_path / "out"
    shutil.copytree(graded[0], copy)
    rows = rows_by_student(copy)
    assert all(len(rows[n]["files_sha256"]) == 64 for n in ("correct", "broken", "wrong"))
    file = submissions / "broken" / "lenet.py"
    original = file.read_text()
    try:
        file.write_text(original + "# handed in again\n")
        done = python("lab", "grade", str(lab_file), "--submissions", str(submissions), "--out", str(copy),
                      "--resume", "--no-report", timeout=300)
    finally:
        file.write_text(original)
    assert done.returncode == 0, done.stderr
    assert "broken: files changed since its row was made: graded again" in done.stderr
    assert f"1 submission(s) to grade, {len(EXPECTED) - 1} already graded (kept)" in done.stderr
    changed = rows_by_student(copy)["broken"]
    assert changed["files_sha256"] != rows["broken"]["files_sha256"] and changed["status"] == "import-error"
    only = python("lab", "grade", str(lab_file), "--submissions", str(submissions), "--out", str(copy),
                  "--only", "broken", "--no-report", timeout=300)  # no --resume needed: graded again
    assert only.returncode == 0 and "1 submission(s) to grade" in only.stderr, only.stderr
    assert rows_by_student(copy)["broken"]["files_sha256"] == rows["broken"]["files_sha256"]
    regrade = python("lab", "regrade", str(copy), "--only", "broken,wrong", timeout=300)  # the folder: recorded
    assert regrade.returncode == 0 and "2 submission(s) to grade" in regrade.stderr, regrade.stderr
    after = rows_by_student(copy)
    assert after["wrong"]["started"] > rows["wrong"]["started"] and after["wrong"]["status"] == "wrong"
    assert after["correct"] == rows["correct"]  # kept as it was
    assert (copy / "LEADERBOARD.md").stat().st_mtime > (copy / "results" / "wrong" / "row.json").stat().st_mtime
    assert "attempt" in json.loads((store.result_dir(copy, "broken") / "started.json").read_text())
    nothing = python("lab", "regrade", str(copy), "--submissions", str(submissions), "--only", "nobody",
                     timeout=120)
    assert nothing.returncode == 2 and "--only: no submission folder ['nobody']" in nothing.stderr


# --- the hostile class ------------------------------------------------------------------------------
def hostile_lines(out: Path, student: str) -> str:
    log = (store.result_dir(out, student) / "worker.log").read_text(errors="replace")
    return "\n".join(line for line in log.splitlines() if line.startswith("HOSTILE"))


@pytest.mark.slow  # the class graded once: about a minute
def test_the_hostile_class_leaves_everything_outside_its_sandbox_as_it_was(graded):
    out, _, before, after = graded
    assert after["class"] == before["class"]  # nobody edited a classmate's folder
    assert after["checkout"] == before["checkout"]  # nor the project's reference or harness
    assert after["processes"] == []  # fork bombs, thread bombs and daemons all gone
    assert not list(Path("/tmp").glob("lenet-loot-*"))  # nothing copied out to the host's /tmp
    assert sorted(p.name for p in (out / "results").iterdir()) == sorted(EXPECTED)  # no ghost
    rows, notes = store.checked_rows(out)
    assert notes == [] and len(rows) == len(EXPECTED)  # every row as the grader wrote it
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert size < 20 << 20, f"--out is {size} bytes after a student printed 1 GiB"


@pytest.mark.slow  # the class graded once: about a minute
def test_what_the_hostile_students_could_see_and_do(graded):
    out = graded[0]
    spy = hostile_lines(out, "spy")
    assert "spy pids [1, 2]" in spy  # bwrap's init and itself: no grader, reference or classmate
    assert "spy seen []" in spy  # no submissions, --out, reference code, tests, MNIST or /etc/shadow
    assert "spy net refused" in spy  # no network: not even the host's loopback
    if IS_ROOT:  # slot 0 of the block this grading held: the submission's own UID. Which block depends
        # on the gradings running beside it (the blocks' locks are shared), so it is read from the progress
        block = re.search(r"own UID per worker \((\d+)-(\d+)\)", graded[1].stderr)
        uid = int(block[1])
        assert (uid - CLASS_UID_BASE) % isolation.SLOTS == 0 and int(block[2]) == uid + isolation.SLOTS - 1
        assert CLASS_UID_BASE <= uid < CLASS_UID_BASE + isolation.BLOCKS * isolation.SLOTS, block[0]
        assert f"Uid:\t{uid}\t{uid}\t{uid}\t{uid}" in spy and "Groups:\t" in spy
        assert "CapEff:\t0000000000000000" in spy and "CapPrm:\t0000000000000000" in spy
        assert "NoNewPrivs:\t1" in spy
    assert "assassin hit []" in hostile_lines(out, "assassin")
    vandal = hostile_lines(out, "vandal")  # what it wrote went to its private /tmp, if anywhere
    assert str(ROOT) not in vandal and "vandal did" in vandal, vandal
    bombs = hostile_lines(out, "forkbomb") + "\n" + hostile_lines(out, "threadbomb")
    counts = [int(word) for word in bombs.split() if word.isdigit()]
    assert len(counts) == 2 and all(0 < n < 64 for n in counts), bombs  # the lab's pids limit


@pytest.mark.slow  # the class graded once: about a minute
def test_the_cheats_are_ranked_behind_every_honest_submission(graded):
    """Behind every honest submission that computes as the correct example does (tests/lab_hostile.py)."""
    rows = rows_by_student(graded[0])
    ratio = {n: r["ratios"]["numpy"]["ratio"] for n, r in rows.items() if r["status"] == "ok"}
    honest = max(ratio[n] for n in HONEST)
    assert all(ratio[n] > 3 * honest for n in lab_hostile.CHEATS), ratio


@pytest.mark.slow  # the class graded once: about a minute
def test_the_hostile_students_statuses_say_why(graded):
    out = graded[0]
    rows = rows_by_student(out)
    for name in ("forger", "garbage", "flood"):
        assert "not a reply" in rows[name]["reason"], rows[name]["reason"]
    assert "without a newline" in rows["flood"]["reason"]
    assert "one of the project's own levels" in rows["importer"]["reason"]
    assert "lenet_onednn" in rows["importer"]["reason"]
    assert "output limit of 16 MB" in rows["spammer"]["reason"], rows["spammer"]["reason"]
    log = (store.result_dir(out, "spammer") / "worker.log").read_text()
    assert "bytes cut" in log and len(log) < 100_000
    assert "while the references were timed" in rows["daemon"]["reason"]
    assert "CPU" in rows["helper"]["reason"]  # its helper's CPU counts: the cgroup sees it
    skipped = " ".join(rows["oddfiles"]["skipped_files"])
    for entry, kind in (("ghost.py", "a link"), ("passwd", "a link"), ("sibling", "a link"),
                        ("pipe", "a named pipe"), ("socket", "a socket")):
        assert f"{entry}: {kind}" in skipped, skipped
    assert "socket: a socket" in (out / "feedback" / "oddfiles.md").read_text()
    assert rows["oddfiles"]["files"] == 1
    assert "sandbox: bubblewrap" in graded[1].stderr


@pytest.mark.slow  # the class graded once: about a minute
def test_an_edited_row_and_a_ghost_row_are_named_not_ranked(graded, tmp_path):
    copy = tmp_path / "out"
    shutil.copytree(graded[0], copy)
    path = store.result_dir(copy, "slow") / "row.json"
    row = json.loads(path.read_text())
    row["ratios"]["numpy"]["ratio"] = 0.01  # a student's dream, written after the grader
    path.write_text(json.dumps(row))
    ghost = json.loads((store.result_dir(copy, "correct") / "row.json").read_text())
    (copy / "results" / "ghost").mkdir()
    (copy / "results" / "ghost" / "row.json").write_text(json.dumps({**ghost, "student": "ghost"}))
    done = python("lab", "report", str(copy), timeout=120)
    assert done.returncode == 0, done.stderr
    text = (copy / "LEADERBOARD.md").read_text()
    assert "[slow](feedback/slow.md) | tampered |" in text
    assert "results/slow/row.json: changed after the grader wrote it" in text
    assert "results/ghost: not a student of this grading" in text
    assert "[ghost](" not in text
    csv = (copy / "leaderboard.csv").read_text()
    assert ",ghost," not in csv and ",slow,tampered," in csv


@pytest.mark.slow  # the class graded once: about a minute
def test_a_submission_whose_grading_was_cut_off_is_graded_once_more(graded, lab_file, submissions, tmp_path):
    """correct: its grading cut off once (graded again); wrong: MAX_ATTEMPTS times, none its own doing
    (ungraded, never crashed); broken: on Slurm, its own death twice, then the merge's placeholder row
    (crashed: no third try)."""
    copy = tmp_path / "out"
    shutil.copytree(graded[0], copy)
    for name in ("correct", "wrong", "broken"):
        (store.result_dir(copy, name) / "row.json").unlink()
        (store.result_dir(copy, name) / "started.json").unlink()
    attempts.begin(copy, "correct", fresh=False)
    for _ in range(attempts.MAX_ATTEMPTS):
        attempts.begin(copy, "wrong", fresh=False)
        attempts.end(copy, "wrong", attempts.BY_GRADER, "SIGTERM")
    for _ in range(attempts.MAX_OWN_DEATHS):
        attempts.begin(copy, "broken", fresh=False)
        attempts.end(copy, "broken", attempts.BY_SUBMISSION, "its task past --mem")
    store.write_row(copy, {"student": "broken", "status": "cancelled", "reason": "the task was cancelled",
                           "from_merge": True})  # as slurm_task.merge writes it
    done = python("lab", "grade", str(lab_file), "--submissions", str(submissions), "--out", str(copy),
                  "--resume", "--only", "correct,wrong,broken", "--no-report", timeout=300)
    assert done.returncode == 0, done.stderr
    rows = rows_by_student(copy)
    assert rows["correct"]["status"] == "ok"
    assert rows["wrong"]["status"] == "ungraded" and "the grader was stopped (SIGTERM)" in rows["wrong"]["reason"]
    assert rows["broken"]["status"] == "crashed" and "the submission died (its task past --mem)" in rows["broken"]["reason"]
    ended = attempts.history(copy, "correct")[-1]["ended"]  # graded this time: its row ended it
    assert (ended["by"], ended["how"]) == ("row", "ok")


@pytest.mark.slow  # the class graded once, and the grader's set-up again: about half a minute
def test_a_sigterm_to_the_grader_is_never_the_submission_s_attempt(graded, lab_file, submissions, tmp_path):
    """scancel's or a preemption's SIGTERM while `hang` is being graded: no row (not a timeout, not
    crashed), its attempt ended by the grader, its worker gone; exit 130."""
    copy = tmp_path / "out"
    shutil.copytree(graded[0], copy)
    shutil.rmtree(store.result_dir(copy, "hang"))
    grader = subprocess.Popen([sys.executable, "-m", "harness", "lab", "grade", str(lab_file), "--submissions",
                               str(submissions), "--out", str(copy), "--resume", "--only", "hang", "--no-report"],
                              cwd=ROOT, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "LENET_LAB_UID_BASE": str(CLASS_UID_BASE)})
    try:
        assert grader.stderr is not None
        for line in grader.stderr:
            if "hang: grading" in line:
                break
        time.sleep(1)  # its worker is up, asleep in its import (the import limit is 5 s)
        grader.send_signal(signal.SIGTERM)
        rest = grader.stderr.read()
        grader.wait(timeout=120)
    finally:
        grader.kill()
    assert grader.returncode == 130, rest
    assert "not graded: the grader received SIGTERM (not the submission's doing" in rest
    assert store.read_row(copy, "hang") is None
    assert attempts.history(copy, "hang")[-1]["ended"]["by"] == "grader"
    assert sandbox_processes(CLASS_UID_BASE) == []


# --- Slurm: scripts, the merge's rows, and a real job array --------------------------------------
@pytest.mark.parametrize("state,started,status,words", [
    ({"state": "CANCELLED", "reason": "None"}, None, "cancelled", "before it started"),
    ({"state": "CANCELLED", "reason": "None"}, {"host": "n1"}, "cancelled", "while grading on n1"),
    ({"state": "FAILED", "reason": "NonZeroExitCode", "exit_code": "0:9"}, {"host": "n1"}, "crashed",
     "shows as FAILED"),
    ({"state": "TIMEOUT", "reason": "TimeLimit"}, {"host": "n1"}, "timeout", "--time"),
    (None, None, "crashed", "purged"),
])
def test_the_merge_turns_a_task_without_a_row_into_a_row(state, started, status, words):
    row = slurm_task.missing_row("ann", state, started)
    assert row["status"] == status and words in row["reason"]
