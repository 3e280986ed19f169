"""Lab grading (harness.lab): the shipped examples and submissions written here that hang, eat
memory, fail to import, crash, patch the clock, memoise, answer stale, or crawl; each gets its
status, the leaderboard lists all of them; the same through a job array on the local Slurm.

Nothing here depends on the machine's speed: the statuses come from limits far from honest
behaviour (a 10 s import limit against a sleep of an hour, 1 GiB against 64 GiB, 100x against a
quarter-second sleep per image), and the one speed comparison is the 10x-slow example."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from harness.errors import HarnessError
from harness.lab import labfile, slurm, store, timing
from tests.conftest import ROOT

LAB = """
[lab]
name = "test_cpu"
references = ["numpy", "onednn/tuned"]
[measure]
calls = 90
rounds = 3
warmup = 5
[gate]
images = 1000
[limits]
wall_s = 60
import_s = 10
memory_mb = 1024
cpu_s = 60
max_ratio = 100
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
    # remembers every answer by the input's bytes; precomputes 5000 training images at import
    "memo": WRAP + """

class Memo(CorrectLeNet):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from harness.data import mnist
        self.cache = {}
        x = mnist.to_input(mnist.load("train")[0][:5000])
        for i in range(0, len(x), 500):
            for image, p in zip(x[i:i + 500], super().predict(x[i:i + 500])):
                self.cache[image.tobytes()] = p

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
                     "        if len(images) == 1:\n            time.sleep(0.25)\n"
                     "        return super().predict(images)\n",
}
EXPECTED = {"correct": "ok", "slow": "ok", "wrong": "wrong", "hang": "timeout", "broken": "import-error",
            "hog": "out-of-memory", "segfault": "crashed", "clock": "timing-inconsistent", "memo": "ok",
            "stale": "wrong", "sleepy": "too-slow"}


def python(*args, timeout=600, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, **kwargs)


@pytest.fixture(scope="module")
def lab_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lab") / "test_cpu.toml"
    path.write_text(LAB)
    return path


@pytest.fixture(scope="module")
def submissions(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("submissions")
    for name in ("correct", "slow", "wrong"):
        shutil.copytree(ROOT / "labs" / "examples" / name, folder / name)
    for name, text in SUBMISSIONS.items():
        (folder / name).mkdir()
        (folder / name / "lenet.py").write_text(text)
    return folder


@pytest.fixture(scope="module")
def graded(lab_file, submissions, tmp_path_factory):
    out = tmp_path_factory.mktemp("graded")
    done = python("lab", "grade", str(lab_file), "--submissions", str(submissions), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out, done


def rows_by_student(out: Path) -> dict:
    return {row["student"]: row for row in store.read_rows(out)}


# --- the lab file ----------------------------------------------------------------------------------
def test_shipped_labs_parse():
    cpu, gpu = labfile.load("cpu_numpy"), labfile.load("cudnn")
    assert [r.label for r in cpu.references] == ["numpy", "onednn/tuned"] and cpu.rank_by.label == "numpy"
    assert cpu.gate == {"images": 10000, "min_agree": 10000, "max_abs_diff": 1e-4}
    assert gpu.device == "gpu" and gpu.rank_by.label == "cudnn/tuned"


@pytest.mark.parametrize("text,expected", [
    ("[limits]\nwall = 5\n", "[limits]: unknown key(s) ['wall']; allowed: ['cpu_s', 'import_s', 'max_ratio', "
                             "'memory_mb', 'wall_s']"),
    ("[labs]\n", "unknown table(s) ['labs']"),
    ("[lab]\nreferences = ['numpy/tuned']\n", "unknown variant 'tuned' of numpy"),
    ("[lab]\nreferences = ['numpy']\nrank_by = 'onednn/tuned'\n", "rank_by: 'onednn/tuned' is not one of"),
    ("[lab]\nreferences = ['cudnn']\n", "cudnn does not run on 'cpu'"),
    ("[gate]\nimages = 20000\n", "images: expected at most 10000"),
    ("[measure]\ncalls = 2\nrounds = 3\n", "expected calls >= rounds"),
])
def test_a_bad_lab_file_names_the_file_and_the_key(text, expected):
    with pytest.raises(HarnessError) as caught:
        labfile.parse(text, "labs/bad.toml")
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


def test_timed_images_are_new_and_secret():
    train = np.random.default_rng(0).integers(0, 256, (100, 28, 28), dtype=np.uint8)
    a, b = timing.timing_images(1, 50, train), timing.timing_images(2, 50, train)
    assert a.shape == (50, 28, 28) and a.dtype == np.uint8 and not np.array_equal(a, b)
    seen = {image.tobytes() for image in train}
    assert not any(image.tobytes() in seen for image in a)
    assert timing.new_seed() != timing.new_seed()


# --- grading the class ---------------------------------------------------------------------------
def test_every_submission_gets_its_status(graded):
    out, done = graded
    rows = rows_by_student(out)
    assert {name: row["status"] for name, row in rows.items()} == EXPECTED, \
        {name: (row["status"], row["reason"]) for name, row in rows.items()}
    assert "[1/11]" in done.stderr and "clock: timing-inconsistent" in done.stderr  # progress on stderr
    assert "import limit of 10 s" in rows["hang"]["reason"]
    assert "MemoryError" in rows["hog"]["reason"]
    assert "SIGSEGV" in rows["segfault"]["reason"]
    assert "forgot something" in rows["broken"]["reason"]
    assert "disagree" in rows["stale"]["reason"] and rows["stale"]["gate"]["agree"] == 1000
    assert rows["wrong"]["gate"]["agree"] < 500 and "test images disagree" in rows["wrong"]["reason"]
    assert "warm-up" in rows["sleepy"]["reason"]


def test_the_ranking_and_what_the_cheats_gained(graded):
    out, _ = graded
    rows = rows_by_student(out)
    ratio = {name: row["ratios"]["numpy"]["ratio"] for name, row in rows.items() if row["status"] == "ok"}
    assert ratio["slow"] > 3 * ratio["correct"]
    assert ratio["memo"] > 0.5 * ratio["correct"]  # unseen images: memoising gains nothing
    row = rows["correct"]
    assert row["loc"] > 20 and row["node"]["cpu"] and len(row["seeds"]) == 3
    assert set(row["ratios"]) == {"numpy", "onednn/tuned"}
    low, high = row["ratios"]["numpy"]["ci95_low"], row["ratios"]["numpy"]["ci95_high"]
    assert low <= ratio["correct"] <= high


def test_the_leaderboard_lists_everyone_and_is_rebuilt_from_the_rows(graded):
    out, _ = graded
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
    assert sorted(ranked) == ["correct", "memo", "slow"] and ranked.index("correct") < ranked.index("slow")
    assert (out / "leaderboard.png").stat().st_size > 10_000
    assert "rank" in (out / "feedback" / "correct.md").read_text()
    assert (out / "feedback" / "correct.png").is_file()
    assert "Next step" in (out / "feedback" / "broken.md").read_text()


def test_resume_skips_finished_submissions_and_a_second_grade_is_refused(graded, lab_file, submissions):
    out, _ = graded
    refused = python("lab", "grade", str(lab_file), "--submissions", str(submissions), "--out", str(out))
    assert refused.returncode == 2 and "--resume" in refused.stderr
    resumed = python("lab", "grade", str(lab_file), "--submissions", str(submissions), "--out", str(out),
                     "--resume", timeout=120)
    assert resumed.returncode == 0 and "0 submission(s) to grade, 11 already graded" in resumed.stderr


def test_an_honest_submission_is_ok_on_a_loaded_machine(lab_file, tmp_path):
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
    try:
        done = python("lab", "grade", str(lab_file), "--submissions", str(ROOT / "labs" / "examples"),
                      "--out", str(tmp_path / "out"), "--only", "correct,slow")
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert done.returncode == 0, done.stderr
    rows = rows_by_student(tmp_path / "out")
    assert {n: r["status"] for n, r in rows.items()} == {"correct": "ok", "slow": "ok"}, done.stderr


def test_a_cpu_hog_is_stopped_by_the_cpu_limit(tmp_path):
    lab = tmp_path / "cpu_limit.toml"
    lab.write_text(LAB.replace("cpu_s = 60", "cpu_s = 3").replace("import_s = 10", "import_s = 60"))
    (tmp_path / "subs" / "spin").mkdir(parents=True)
    (tmp_path / "subs" / "spin" / "lenet.py").write_text("while True:\n    pass\n")
    done = python("lab", "grade", str(lab), "--submissions", str(tmp_path / "subs"), "--out",
                  str(tmp_path / "out"), "--no-report")
    assert done.returncode == 0, done.stderr
    row = store.read_row(tmp_path / "out", "spin")
    assert row["status"] == "timeout" and "CPU-time limit of 3 s" in row["reason"], row


def test_a_student_checks_a_submission_before_handing_in(lab_file):
    good = python("lab", "check", str(lab_file), str(ROOT / "labs" / "examples" / "correct" / "lenet.py"))
    assert good.returncode == 0, good.stderr
    assert "Status: **ok**" in good.stdout and "× numpy" in good.stdout
    bad = python("lab", "check", str(lab_file), str(ROOT / "labs" / "template"))
    assert bad.returncode == 1 and "NotImplementedError" in bad.stdout


# --- Slurm: scripts, the merge's rows, and a real job array --------------------------------------
def test_dry_run_prints_the_batch_scripts(lab_file, submissions, tmp_path):
    done = python("lab", "grade", str(lab_file), "--submissions", str(submissions), "--out", str(tmp_path / "o"),
                  "--slurm", "--max-parallel", "3", "--partition", "gpu", "--gres", "gpu:1", "--dry-run",
                  timeout=60)
    assert done.returncode == 0, done.stderr
    for line in ("#SBATCH --array=0-10%3", "#SBATCH --time=7", "#SBATCH --mem=3072M", "#SBATCH --gres=gpu:1",
                 "#SBATCH --partition=gpu", "#SBATCH --dependency=afterany:$ARRAY_JOB_ID",
                 "lab merge", "--only \"$student\""):
        assert line in done.stdout
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("state,started,status,words", [
    ({"state": "CANCELLED", "reason": "None"}, None, "cancelled", "before it started"),
    ({"state": "CANCELLED", "reason": "None"}, {"host": "n1"}, "cancelled", "while grading on n1"),
    ({"state": "FAILED", "reason": "NonZeroExitCode", "exit_code": "0:9"}, {"host": "n1"}, "crashed",
     "shows as FAILED"),
    ({"state": "TIMEOUT", "reason": "TimeLimit"}, {"host": "n1"}, "timeout", "--time"),
    (None, None, "crashed", "purged"),
])
def test_the_merge_turns_a_task_without_a_row_into_a_row(state, started, status, words):
    row = slurm.missing_row("ann", state, started)
    assert row["status"] == status and words in row["reason"]


def slurm_ready() -> str | None:
    if not shutil.which("sbatch"):
        return "sbatch is not on PATH; start a one-node Slurm with: sudo scripts/slurm-local.sh start"
    sinfo = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=15)
    if sinfo.returncode != 0 or not sinfo.stdout.strip():
        return f"sinfo failed ({sinfo.stderr.strip()}); start it with: sudo scripts/slurm-local.sh start"
    return None


def merge_running(job: str) -> bool:
    """Pending or running; a finished job (or one purged) is not."""
    state = subprocess.run(["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"], capture_output=True, text=True,
                           timeout=30).stdout.strip()
    return state in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")


@pytest.mark.slurm
def test_the_same_lab_on_slurm_gives_the_same_statuses_and_ranking(graded, lab_file, submissions, tmp_path):
    why = slurm_ready()
    if why:
        pytest.skip(why)
    out = tmp_path / "slurm-out"
    done = python("lab", "grade", str(lab_file), "--submissions", str(submissions), "--out", str(out),
                  "--slurm", "--max-parallel", "2", timeout=120)
    assert done.returncode == 0, done.stderr
    jobs = dict(line.split() for line in (out / "slurm" / "jobs.txt").read_text().splitlines())
    names = (out / "slurm" / "students.txt").read_text().split()
    try:
        hang = f"{jobs['array']}_{names.index('hang')}"  # cancelled while it hangs in its import
        deadline = time.monotonic() + 240
        while store.started(out, "hang") is None:
            assert time.monotonic() < deadline, subprocess.run(["squeue"], capture_output=True, text=True).stdout
            time.sleep(0.5)
        subprocess.run(["scancel", hang], check=True, timeout=30)
        while merge_running(jobs["merge"]):
            assert time.monotonic() < deadline, subprocess.run(["squeue"], capture_output=True, text=True).stdout
            time.sleep(1)
    finally:
        subprocess.run(["scancel", jobs["array"], jobs["merge"]], capture_output=True, timeout=30)
    rows = rows_by_student(out)
    assert {n: r["status"] for n, r in rows.items()} == {**EXPECTED, "hang": "cancelled"}, \
        {n: (r["status"], r["reason"]) for n, r in rows.items()}
    assert "while grading" in rows["hang"]["reason"]
    local = rows_by_student(graded[0])
    for run in (rows, local):
        ranked = sorted((r["ratios"]["numpy"]["ratio"], n) for n, r in run.items() if r["status"] == "ok")
        assert [n for _, n in ranked].index("correct") < [n for _, n in ranked].index("slow")
    text = (out / "LEADERBOARD.md").read_text()
    assert all(f"[{name}](feedback/{name}.md)" in text for name in EXPECTED)
    assert json.loads((out / "results" / "hang" / "row.json").read_text())["from_merge"] is True
    assert "interrupted" not in (out / "slurm" / "merge.out").read_text()
    assert (out / "feedback" / "hang.md").is_file() and (out / "leaderboard.png").is_file()
