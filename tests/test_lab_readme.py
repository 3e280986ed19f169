"""The staff's pages say what the commands do: the student folders `lab collect` makes and the grader's
progress line (docs/staff.md), and how a Slurm task gets the privileges its sandbox asks for
(docs/slurm.md)."""

import zipfile

from harness.lab.judge import grade, store
from harness.lab.judge.rules import assignment
from harness.lab.term.intake import collect
from tests.conftest import ROOT

STAFF = (ROOT / "docs" / "staff.md").read_text()
SLURM = (ROOT / "docs" / "slurm.md").read_text()


def test_the_staff_page_s_student_folders_are_what_collect_makes(tmp_path):
    """Its regrade example names folders as `lab collect` makes them from Moodle's download, and so do
    its words on Moodle's and Canvas's names."""
    named = STAFF.split("lab regrade grading/cpu_numpy --only ", 1)[1].split()[0].split(",")
    assert named == ["ann-smith-1002", "ben-oneil-1003"]
    source = tmp_path / "moodle.zip"
    with zipfile.ZipFile(source, "w") as archive:
        for name, uid in (("Ann Smith", 1002), ("Ben O'Neil", 1003)):
            archive.writestr(f"{name}_{uid}_assignsubmission_file/lenet.py", "# a submission\n")
    collect.collect(source, tmp_path / "subs", report=lambda _: None)
    assert store.students(tmp_path / "subs", "lenet.py") == named
    canvas = tmp_path / "canvas.zip"
    with zipfile.ZipFile(canvas, "w") as archive:
        archive.writestr("oneilben_1003_9003_lenet.py", "# a submission\n")
    collect.collect(canvas, tmp_path / "canvas", report=lambda _: None)
    assert store.students(tmp_path / "canvas", "lenet.py") == ["oneilben-1003"]
    said = " ".join(STAFF.split())
    assert "participant 1003, is `ben-oneil-1003`; Canvas's `oneilben_1003_...` is `oneilben-1003`" in said


def test_the_staff_page_s_progress_line_is_the_grader_s():
    """The sample line is what grade.one_line prints for such a row."""
    sample = STAFF.split("one line per submission (`", 1)[1].split("`)", 1)[0].replace("\n", " ")
    shown, seconds = sample.rsplit(" (", 1)
    row = {"status": "ok", "rank_by": "numpy", "median_per_image_ns": 412_000.0, "loc": 35,
           "seconds": float(seconds.split()[0]),
           "ratios": {"numpy": {"ratio": 1.62, "ci95_low": 1.48, "ci95_high": 1.75}}}
    assert f"[3/40] ben: {grade.one_line(row)}" == sample


def test_the_slurm_page_s_privileges_hold():
    """A task runs as its submitter with the submitter's environment (sbatch's default --export=ALL:
    no --export in the task's script), so SUDO_UID reaches store.hand_over in every task."""
    from harness.lab.judge import slurm

    lab = assignment.load("cpu_numpy")
    task, merge = slurm.scripts(lab, ROOT / "labs" / "examples", ROOT / "nowhere", slurm.Options())
    assert "--export" not in task and "--uid" not in task and "lab task" in task
    said = " ".join(SLURM.split())
    assert "(sbatch's default `--export=ALL`)" in said and "no `DisableRootJobs=YES`" in said
    owner = store.hand_over(ROOT / "nowhere", {"SUDO_UID": "1234", "SUDO_GID": "1234"})
    assert owner is None  # not a folder: nothing handed over (a task's OUT is, under root)
