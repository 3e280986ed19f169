"""The sandbox's second ring (issue 40): a hostile class (tests/lab_hostile.py, RING2) that fills
the disk, makes files and folders by the thousand, leaves notes in the kernel, shaves its clock,
injects text, has odd names, crowds its folder, shadows its module and snoops on the host: one
grading of the class (and a second of one student, for what outlives a grading), many asserts.
Then the parts on their own: the sanitizer, the safe ids, the clean-up of a deep tree, a kill
that fails, the copy's order, the filter and the ranked time."""

import csv
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from harness.lab import text
from harness.lab.box.proc.lifecycle import Box
from harness.lab.box.proc.limits import Limits
from harness.lab.box.walls import bwrap, disk, seccomp
from harness.lab.box.walls.isolation import Isolation
from harness.lab.judge import files, grade, store
from harness.lab.judge.rules import timing
from tests import lab_hostile
from tests.test_lab import IS_ROOT, LAB, hostile_lines, python, rows_by_student

RING2_LAB = LAB + "disk_mb = 64\nfiles = 8000\n"
UID_BASE = 71000  # apart from tests/test_lab.py's class
ODD = lab_hostile.NON_UTF8.decode(errors="surrogateescape")


@pytest.fixture(scope="module")
def ring2(tmp_path_factory):
    """The class graded once, then `notes` alone in a second grading; (out, progress, rows, second row)."""
    base = tmp_path_factory.mktemp("ring2")
    (base / "lab.toml").write_text(RING2_LAB)
    subs = base / "submissions"
    subs.mkdir()
    lab_hostile.write_ring2(subs)
    done = python("lab", "grade", str(base / "lab.toml"), "--submissions", str(subs), "--out", str(base / "out"),
                  uid_base=UID_BASE)
    assert done.returncode == 0, done.stderr
    again = python("lab", "grade", str(base / "lab.toml"), "--submissions", str(subs), "--out",
                   str(base / "again"), "--only", "notes", "--no-report", uid_base=UID_BASE)
    assert again.returncode == 0, again.stderr
    return base / "out", done.stderr, rows_by_student(base / "out"), base / "again"


@pytest.mark.slow
def test_every_student_of_the_second_ring_gets_a_row(ring2):
    out, progress, rows, _ = ring2
    # the shaver's 0.45x clock sits near the clock rule's line (timing.inconsistency: flagged when it
    # reports < 0.5x the CPU it used less the references' protocol allowance, which varies with the
    # references and the load): flagged or ranked at the grader's measure, it gains nothing either way
    statuses = {name: row["status"] for name, row in rows.items()}
    assert statuses.pop("shaver") in ("ok", "timing-inconsistent"), rows["shaver"]["reason"]
    expected = {n: s for n, s in lab_hostile.RING2_EXPECTED.items() if n != "shaver"}
    assert statuses == expected, {name: (row["status"], row["reason"]) for name, row in rows.items()}
    assert "Traceback" not in progress and "warning: clean-up" not in progress


@pytest.mark.slow
@pytest.mark.skipif(not IS_ROOT, reason="the bounded tmpfs is mounted by a grader run as root")
def test_the_disk_and_the_inodes_are_bounded_and_any_tree_is_cleaned_up(ring2):
    out = ring2[0]
    filled = hostile_lines(out, "diskfill")
    written = {k: int(v) for k, v in re.findall(r"'(/[a-z/]+)': (\d+)", filled)}
    assert set(written) == {"/tmp", "/lab/submission", "/dev/shm"} and sum(written.values()) <= 64, filled
    made = int(re.search(r"inodes made (\d+)", hostile_lines(out, "inodes"))[1])
    assert 7000 < made <= 8000 + disk.EXTRA_INODES, made  # the lab's files: no 300,000 files on the host
    assert "nested depth 5000" in hostile_lines(out, "nested")  # and the grader went on to the next
    assert not [m for m in Path("/proc/self/mounts").read_text().splitlines() if "lenet-lab" in m]


@pytest.mark.slow
def test_nothing_left_in_the_kernel_reaches_another_worker_or_grading(ring2):
    out, _, _, again = ring2
    for where, student in ((out, "notes"), (out, "notes2"), (again, "notes")):
        lines = hostile_lines(where, student)
        assert "notes found []" in lines, lines
        assert "key refused (Operation not permitted)" in lines, lines  # keyrings: denied by seccomp


def shaver_gains_nothing(row: dict) -> None:
    """The shaved clock (lab_hostile.SHAVER: every call reports 0.45x its time) as the grader records it,
    asserted on the grader's own counters within its own row, never against other gradings' times
    (those differ by whatever load each met). Its shave is real: each reported time is within 0.45x
    the grader's round trip around the call (the call ran inside it: no load moves that bound). And
    it gains nothing: flagged (no rank), or each round ranked at no less than what its CPU counter
    says (timing.ranked_ns: the CPU time less the references' least protocol cost)."""
    assert row["status"] in ("ok", "timing-inconsistent"), (row["status"], row["reason"])
    for times, trips in zip(row["times_ns"]["submission"], row["trips_ns"]["submission"], strict=True):
        assert all(t <= 0.45 * trip + 1_000 for t, trip in zip(times, trips, strict=True)), (times, trips)
    if row["status"] != "ok":  # flagged: no rank at all
        assert "do not fit the grader's clock" in row["reason"], row["reason"]
        assert "ratios" not in row
        return
    assert row["rounds_used"], row["inconsistent_rounds"]
    for r in row["rounds_used"]:
        measure = np.median(np.asarray(row["cpu_ns"]["submission"][r]) - row["ranking_cpu_gap_ns"][r])
        assert np.median(row["ranked_ns"]["submission"][r]) >= 0.999 * measure, r


@pytest.mark.slow
def test_a_shaved_clock_gains_nothing(ring2):
    rows = ring2[2]
    shaver_gains_nothing(rows["shaver"])
    # and the same rule lets every honest clock through (their verdict, not a margin on their times)
    assert all(rows[n]["status"] == "ok" for n in lab_hostile.RING2_HONEST), \
        {text.clean(n, 12): rows[n]["reason"] for n in lab_hostile.RING2_HONEST}
    ratio = {n: r["ratios"]["numpy"]["ratio"] for n, r in rows.items() if r["status"] == "ok"}
    print("ratio to numpy:", {text.clean(n, 12): round(ratio[n], 3) for n in [*lab_hostile.RING2_HONEST, "shaver"]
                              if n in ratio})
    print("reported/measured, median per round:",
          {text.clean(n, 12): [round(v, 2) for v in rows[n]["clock_ratio"]]
           for n in [*lab_hostile.RING2_HONEST, "shaver"]})


@pytest.mark.slow
def test_the_cheats_rank_behind_every_honest_submission(ring2):
    """The cheats compute twice per call on the slow example's code: behind every honest submission."""
    rows = ring2[2]
    ratio = {n: r["ratios"]["numpy"]["ratio"] for n, r in rows.items() if r["status"] == "ok"}
    honest = [ratio[n] for n in lab_hostile.RING2_HONEST]
    assert all(ratio[n] > 3 * max(honest) for n in lab_hostile.RING2_CHEATS), ratio


@pytest.mark.slow
def test_injected_text_reaches_no_terminal_markdown_or_csv_raw(ring2):
    out, progress, rows, _ = ring2
    assert "\\x1b[31mowned\\x07" in rows["injector"]["reason"]  # kept, escaped
    board = (out / "LEADERBOARD.md").read_text()
    feedback = (out / "feedback" / "injector.md").read_text()
    table = (out / "leaderboard.csv").read_text()
    for name, written in (("progress", progress), ("LEADERBOARD.md", board), ("feedback", feedback),
                          ("csv", table)):
        assert "\x1b" not in written and "\x07" not in written, name
    assert feedback.count("\n```") == 2  # the log tail's one code block: no line of it closes it
    outside = re.sub(r"\n```\n.*?\n```\n", "\n", feedback, flags=re.S)  # what renders as Markdown
    for written in (board, outside):
        assert not re.search(r"^# Injected", written, re.M) and "<img" not in written
    assert sum(line.startswith("|") for line in board.splitlines()) == 2 + len(rows)  # no row split
    reasons = [r["reason"] for r in csv.DictReader(table.splitlines())]
    assert not any(reason.startswith(("=", "+", "-", "@")) for reason in reasons)


@pytest.mark.slow
def test_odd_names_are_graded_under_safe_ids(ring2):
    out, progress, rows, _ = ring2
    for name in (ODD, lab_hostile.LONG_NAME):
        assert rows[name]["status"] == "ok"
        assert store.result_dir(out, name).name == text.safe_id(name) != name
        assert (out / "feedback" / f"{text.safe_id(name)}.md").is_file()
    assert "caf\\xe9" in (out / "LEADERBOARD.md").read_text() and "caf\\xe9" in progress


@pytest.mark.slow
def test_the_module_and_its_imports_are_copied_first_and_nothing_shadows_it(ring2):
    out, _, rows, _ = ring2
    crowded = rows["crowded"]
    assert crowded["status"] == "ok" and len(crowded["skipped_files"]) == lab_hostile.CROWD + 2 - files.MAX_FILES
    assert "a299.dat: past the limit of 200 files" in crowded["skipped_files"]
    assert "past the limit of 200 files" in (out / "feedback" / "crowded.md").read_text()
    assert "lenet.cpython-311-x86_64-linux-gnu.so beside lenet.py" in rows["sofile"]["reason"]
    assert "a folder lenet/ beside lenet.py" in rows["package"]["reason"]
    assert not (store.result_dir(out, "package") / "worker.log").exists()  # refused before a worker started
    assert rows["locbomb"]["loc"] < 100 and rows["locbomb"]["files"] == 1  # big.py: not imported, not counted


@pytest.mark.slow
@pytest.mark.skipif(not IS_ROOT, reason="the UID drop needs root")
def test_no_capability_is_left_and_the_host_paths_are_not_shown(ring2):
    lines = hostile_lines(ring2[0], "snoop")
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert f"{key}:\t0000000000000000" in lines, lines
    assert "snoop scratch in cmdline False in mountinfo False" in lines, lines


# --- the parts on their own --------------------------------------------------------------------------
def test_the_sanitizer_folds_escapes_and_quotes():
    raw = "\x1b[31mred\x07\n# heading\r\n| a | b | <b>`x`</b> caf\udce9 \u202e"
    line = text.clean(raw)
    assert "\n" not in line and "\x1b" not in line and "\x07" not in line and "\\x1b[31mred\\x07" in line
    assert "caf\\xe9" in line and "\\u202e" in line
    cell = text.cell(raw)
    assert "|" not in cell.replace("\\|", "") and "<b>" not in cell and "`" not in cell
    assert text.csv_cell("=1+1") == "'=1+1" and text.csv_cell("ok") == "ok"
    assert text.block(["```", "fine"]) == ["'''", "fine"]
    assert len(text.clean("x" * 1000, 100)) == 100


def test_safe_ids_take_any_bytes_and_any_length():
    assert text.safe_id("ann") == "ann" and text.safe_id("ben.k-2") == "ben.k-2"
    odd = [ODD, "n" * 254, "..", ".hidden", "a/b", "a b", "é", "x" * 61]
    ids = [text.safe_id(name) for name in odd]
    assert len(set(ids)) == len(ids)
    assert all(len(i) <= 60 and text.safe_id(i) == i and re.fullmatch(r"[A-Za-z0-9_.-]+", i) and not i.startswith(".") for i in ids)


def test_a_deep_tree_is_removed_without_recursion(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY)
    for _ in range(5000):  # deeper than PATH_MAX and than Python's recursion limit
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    assert disk.remove_tree(tmp_path / "d") is None and not (tmp_path / "d").exists()
    assert "rm -rf" in disk.remove_tree(Path("/proc/1"))  # a failure is said, not raised


def test_a_kill_that_cannot_empty_the_group_does_not_escape(tmp_path, monkeypatch):
    class Stuck:
        def kill(self):
            raise OSError("cgroup still holds processes [1] after SIGKILL")

        remove = kill

    box = Box("stuck", {}, tmp_path, Isolation("none", None, False, "test"), limits=Limits())
    box.proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    box.group = Stuck()
    box.stop()  # no exception
    assert box.proc.poll() is not None and "still holds processes" in box.log_path.read_text()


def test_the_grader_survives_its_clean_up_failing(monkeypatch, tmp_path):
    said = []
    grader = grade.Grader.__new__(grade.Grader)
    grader.scratch, grader.spaces, grader.report = tmp_path, {}, said.append
    monkeypatch.setattr(disk, "remove_tree", lambda path: "rm -rf: Device or resource busy")
    grader.clean_up(None, tmp_path, "submission")
    assert "clean-up of" in said[0] and "grading goes on" in said[0]


def test_a_failing_reference_is_retired_and_restarted_once(tmp_path):
    """A reference whose chunk fails is killed at once, then stopped like any reference at the end
    (its cgroup removed, its pidfd closed) with its log kept; the fresh one it gets must answer."""
    from harness.errors import Failure
    from harness.lab.box.sandbox import Chunk
    from harness.lab.judge.rules import assignment

    class Worker:
        def __init__(self, name, fails):
            self.name, self.fails, self.done = name, fails, []
            self.box = self
            self.log_path = tmp_path / f"{name}.log"
            self.log_path.write_text(f"{name} said this\n")

        def kill(self):
            self.done.append("kill")

        def stop(self, ask=True):
            self.done.append("stop" if ask else "stop, killed")

        def stream(self, calls, timeout):
            if self.fails:
                raise Failure("crashed", "it fell over")
            return Chunk([1] * len(calls), [1] * len(calls), [1] * len(calls), answers.reshape(len(calls), 1, 10))

    answers = np.full((4, 10), 0.1)
    grader = grade.Grader.__new__(grade.Grader)
    grader.lab, grader.out = assignment.load("cpu_numpy"), tmp_path
    first, fresh = Worker("first", fails=True), Worker("fresh", fails=False)
    grader.refs = {"numpy": first}
    grader.reference = lambda label: grader.refs.setdefault(label, fresh)
    got = grader.chunk("numpy", first, np.zeros((4, 28, 28), np.uint8), answers)
    assert first.done == ["kill", "stop"] and grader.refs == {"numpy": fresh} and got.times_ns == [1] * 4
    assert (tmp_path / "references.log").read_text() == "first said this\n"
    grader.refs = {"numpy": first}
    fresh.fails = True
    with pytest.raises(grade.HarnessError, match="reference numpy failed twice .crashed: it fell over."):
        grader.chunk("numpy", first, np.zeros((4, 28, 28), np.uint8), answers)
    assert fresh.done == ["kill", "stop"] and grader.refs == {}


def test_the_copy_takes_the_module_and_its_imports_first(tmp_path):
    folder = tmp_path / "ann"
    (folder / "zz_pkg").mkdir(parents=True)
    for i in range(files.MAX_FILES + 10):
        (folder / f"a{i:03d}.dat").write_bytes(b"\0")
    (folder / "lenet.py").write_text("import zz_pkg.layers\nfrom zz_util import f\n")
    (folder / "zz_util.py").write_text("import zz_more\n")
    (folder / "zz_more.py").write_text("")
    (folder / "zz_pkg" / "layers.py").write_text("")
    found = files.in_order(folder, files.listing(folder)[0], "lenet.py")
    assert [str(p) for p in found[:4]] == ["lenet.py", "zz_pkg/layers.py", "zz_util.py", "zz_more.py"]
    copied = files.copy_submission(folder, tmp_path / "copy")
    assert (tmp_path / "copy" / "zz_more.py").is_file() and copied["files"] == files.MAX_FILES
    assert files.shadows(tmp_path / "copy", "lenet.py") is None
    (tmp_path / "copy" / "lenet.abi3.so").write_bytes(b"")
    assert "lenet.abi3.so beside lenet.py" in files.shadows(tmp_path / "copy", "lenet.py")


def test_the_filter_denies_the_keyrings_and_nothing_else():
    program = seccomp.program()
    assert program is not None and len(program) % 8 == 0
    ops = [program[i:i + 8] for i in range(0, len(program), 8)]
    assert len(ops) == 10 and ops[-2][4:] == (0x7FFF0000).to_bytes(4, "little")  # allow, then the deny


def test_the_ranked_time_is_never_below_the_graders_own_measure():
    honest = np.array([200_000, 210_000, 190_000])
    cpu = honest + 30_000  # the protocol's CPU, 30 us a call, as the references measured it
    assert timing.ranked_ns(honest, cpu, 30_000) == [200_000, 210_000, 190_000]
    assert timing.ranked_ns(honest * 0.45, cpu, 30_000) == [200_000, 210_000, 190_000]
    assert 0.44 < timing.clock_ratio(honest * 0.45, cpu, 30_000) < 0.46


def test_the_ranking_takes_off_the_least_protocol_cost_of_the_references():
    reported = [np.array([100_000, 110_000, 90_000]), np.array([30_000, 31_000, 29_000])]
    cpu = [reported[0] + 12_000, reported[1] + 45_000]  # numpy's protocol 12 us; the other's jumped to 45
    assert timing.ranking_gap_ns(reported, cpu) == 12_000
    assert timing.ranking_gap_ns([reported[0]], [reported[0] - 5_000]) == 0  # a gap is never negative
    shaved = np.array([90_000, 95_000, 85_000]) * 0.45  # a clock at 0.45x whose CPU was 102-112 us a call
    assert np.median(timing.ranked_ns(shaved, [102_000, 107_000, 97_000], 12_000)) == 90_000


def run_boxed(args: list[str]) -> subprocess.CompletedProcess:
    """bwrap's command run as the box runs it: its options and the seccomp filter read from memfds."""
    argv, fds = bwrap.packed(args, seccomp.program())
    try:
        return subprocess.run(argv, pass_fds=fds, capture_output=True, text=True, timeout=60)
    finally:
        for fd in fds:
            os.close(fd)


@pytest.mark.skipif(bwrap.find() is None, reason="no bubblewrap here")
def test_without_the_graders_tmpfs_bwraps_own_is_bounded_and_the_copy_read_only(tmp_path):
    """The fallback of a grader that is not root: bwrap's --size tmpfs for /tmp and /dev/shm."""
    space = disk.make(tmp_path / "space", 8, 100, None, tmpfs=False)
    space.submission.mkdir()
    (space.submission / "lenet.py").write_text("")
    script = ("import os\nfor place in ('/tmp', '/dev/shm'):\n    n = 0\n    try:\n"
              "        with open(place + '/f', 'wb') as f:\n            for _ in range(64):\n"
              "                f.write(b'x' * (1 << 20)); f.flush(); n += 1\n    except OSError:\n        pass\n"
              "    print(place, n)\ntry:\n    open('/lab/submission/x', 'w')\nexcept OSError as exc:\n"
              "    print('copy', exc.strerror)\n")
    done = run_boxed(bwrap.command(bwrap.find(), space, [sys.executable, "-c", script], str(tmp_path / "space")))
    assert done.returncode == 0, done.stderr
    written = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert int(written["/tmp"]) <= 8 and int(written["/dev/shm"]) <= 8, done.stdout  # not 64
    assert written["copy"] == "Read-only file system"
    assert disk.release(space) is None and not space.root.exists()


@pytest.mark.skipif(bwrap.find() is None or os.geteuid() != 0, reason="needs bubblewrap and root (the grader's tmpfs)")
def test_a_checkout_under_tmp_stays_reachable_through_the_workers_tmp(tmp_path):
    """A CI clone lives in /tmp: its venv and weights are bound on top of the worker's /tmp, and the
    sandbox's root (capabilities dropped) must pass through /tmp to reach them (a 0700 /tmp owned by
    the slot's UID made every worker exit 1 with "execvp ...: Permission denied")."""
    clone = Path(tempfile.mkdtemp(prefix="lenet-clone-", dir="/tmp"))
    (clone / "w.h5").write_text("weights\n")
    space = disk.make(tmp_path / "space", 8, 100, 61999, tmpfs=True)
    try:
        done = run_boxed(bwrap.command(bwrap.find(), space, ["/bin/cat", str(clone / "w.h5")], str(clone / "w.h5")))
        mode = stat.S_IMODE(space.tmp.stat().st_mode)
    finally:  # unmounted whatever happened: a tmpfs left behind fails the leftover-mount check
        released = disk.release(space)
        shutil.rmtree(clone)
    assert (done.returncode, done.stdout) == (0, "weights\n"), done.stderr
    assert mode == 0o1777 and released is None
