"""`lab similarity OUT --submissions DIR` (harness.lab.similarity) on planted pairs: a byte-identical
copy of the correct example, the same with every name renamed, the same with its functions
reordered, and an independent honest solution that follows the starter (tests/similarity/
honest_einsum: einsum over kernel taps where the example uses im2col), which must not be flagged.
Binary and huge files are skipped and named; the flagged pairs are a column of the staff's
LEADERBOARD.md and appear nowhere in the public page. Nothing is graded: rows are written
directly (tests/lab_rows.py)."""

import csv
import os
import shutil

import pytest

from harness import cli
from harness.lab import publish, similarity, store
from tests import lab_rows
from tests.conftest import ROOT

PLANTED = ROOT / "tests" / "similarity"
FOLDERS = {
    "correct": ROOT / "labs" / "examples" / "correct",
    "copycat": ROOT / "labs" / "examples" / "correct",  # byte-identical
    "renamer": PLANTED / "copy_renamed",
    "reorderer": PLANTED / "copy_reordered",
    "honest": PLANTED / "honest_einsum",
}
COPIES = {"copycat", "renamer", "reorderer"}


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """(OUT, submissions, pairs, skipped, the command's output) after `lab similarity`."""
    base = tmp_path_factory.mktemp("similarity")
    submissions = base / "submissions"
    for student, folder in FOLDERS.items():
        shutil.copytree(folder, submissions / student)
    (submissions / "honest" / "weights.npy").write_bytes(b"\x93NUMPY\x01\x00" + bytes(range(256)) * 4)
    (submissions / "honest" / "table.py").write_text("TABLE = [\n" + "    0.0,\n" * 40_000 + "]\n")
    os.symlink(FOLDERS["correct"] / "lenet.py", submissions / "honest" / "borrowed.py")  # never followed
    graded = [lab_rows.ok_row(s, 1.0 + i / 10, 0.9 + i / 10, 1.1 + i / 10, 40) for i, s in enumerate(FOLDERS)]
    out = lab_rows.graded(base / "out", graded)
    lines: list[str] = []
    lab = store.graded_lab(out)
    pairs, skipped = similarity.run(out, submissions, lab, report=lines.append)
    return out, submissions, pairs, skipped, lines


def test_copies_are_flagged_and_the_honest_pair_is_not(checked):
    out, _, pairs, _, _ = checked
    scores = {frozenset((p.a, p.b)): p.score for p in pairs}
    for copy in COPIES:
        assert scores[frozenset(("correct", copy))] >= 0.8, scores
    assert scores[frozenset(("correct", "copycat"))] == 1.0
    assert not [pair for pair in scores if "honest" in pair], scores  # independent, same starter
    with open(out / "private" / "similarity.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert list(table[0]) == similarity.FIELDS and len(table) == len(pairs)
    assert [float(r["score"]) for r in table] == sorted((float(r["score"]) for r in table), reverse=True)
    first = next(r for r in table if {r["student_a"], r["student_b"]} == {"correct", "copycat"})
    assert first["lines_a"].startswith("lenet.py:") and first["lines_a"] == first["lines_b"]


def test_each_flagged_pair_has_a_side_by_side_view(checked):
    out, _, pairs, _, _ = checked
    for pair in pairs:
        page = (out / "private" / pair.view).read_text()
        assert f"<h2>{pair.a} (" in page and f"<h2>{pair.b} (" in page and page.count("<mark>") >= 2
        assert "&lt;" not in page or "<mark>" in page  # the code escaped, the marks not


def test_binary_huge_and_linked_files_are_skipped_and_named(checked):
    out, _, _, skipped, lines = checked
    assert "honest/weights.npy: binary" in skipped
    assert "honest/borrowed.py: a link, skipped" in skipped  # files.listing, as the grader walks it
    assert any(entry.startswith("honest/table.py: ") and "over 256 KiB" in entry for entry in skipped)
    assert (out / "private" / "similarity-skipped.txt").read_text().splitlines() == skipped
    assert "skipped: honest/weights.npy: binary" in lines


def test_flagged_pairs_are_a_staff_column_and_never_public(checked, tmp_path):
    out, submissions, _, _, _ = checked
    assert cli.main(["lab", "report", str(out)]) == 0
    assert cli.main(["lab", "similarity", str(out), "--submissions", str(submissions)]) == 0  # and the report
    text = (out / "LEADERBOARD.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| rank |"))
    assert header.endswith("| similar to ([lab similarity](private/similarity.csv)) |")
    honest = next(line for line in text.splitlines() if "[honest](" in line)
    assert honest.endswith("|  |")  # nobody
    correct = next(line for line in text.splitlines() if "[correct](" in line)
    assert all(f"**{copy}**" in correct for copy in COPIES)
    public = tmp_path / "public"
    publish.publish(out, public, submissions, report=lambda line: None)
    for path in public.iterdir():
        data = path.read_bytes().lower()
        assert b"similar" not in data and b"copycat" not in data, path.name


def test_without_a_similarity_check_the_leaderboard_is_as_before(tmp_path):
    out = lab_rows.graded(tmp_path / "out", [lab_rows.ok_row("solo", 1.0, 0.9, 1.1, 40)])
    assert cli.main(["lab", "report", str(out)]) == 0
    assert "similar to" not in (out / "LEADERBOARD.md").read_text()


def test_a_cuda_header_is_compared_as_code_as_it_is_counted(tmp_path):
    (tmp_path / "lenet.py").write_text("import kernels\n")
    (tmp_path / "kernels.cuh").write_text("__device__ float relu(float x) { return x > 0 ? x : 0; }\n")
    code, skipped = similarity.code_of(tmp_path)
    assert [name for _, name in code.starts] == ["kernels.cuh", "lenet.py"] and not skipped
    assert "__device__ float relu" in code.text
