"""`lab similarity OUT [--submissions DIR]` (harness.lab.term.similarity) on planted pairs: a byte-identical
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
from harness.lab import text
from harness.lab.judge import store
from harness.lab.term import similarity
from harness.lab.term.public import publish
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


def test_a_folder_name_that_is_not_utf8_is_compared_and_shown_escaped(tmp_path):
    """A folder name of any bytes (here Latin-1's é): the pair is flagged, its CSV row and page
    written (the name escaped as \\xe9, the id text.safe_id's), and `lab similarity OUT` finds the
    submissions folder in OUT/grading.json."""
    odd = os.fsdecode(b"caf\xe9-copy")
    submissions = tmp_path / "submissions"
    for student in ("correct", odd):
        shutil.copytree(FOLDERS["correct"], submissions / student)
    out = lab_rows.graded(tmp_path / "out", [lab_rows.ok_row(s, 1.0, 0.9, 1.1, 40) for s in ("correct", odd)])
    store.write_grading(out, submissions, tmp_path / "weights.h5")
    assert cli.main(["lab", "similarity", str(out)]) == 0
    with open(out / "private" / "similarity.csv", newline="", encoding="utf-8") as f:
        (row,) = list(csv.DictReader(f))
    assert {row["student_a"], row["student_b"]} == {"correct", "caf\\xe9-copy"} and float(row["score"]) == 1.0
    assert {row["id_a"], row["id_b"]} == {"correct", text.safe_id(odd)}
    page = (out / "private" / row["view"]).read_text(encoding="utf-8")
    assert "<h2>caf\\xe9-copy (" in page
    assert cli.main(["lab", "report", str(out)]) == 0  # the leaderboard's column: the name escaped
    board = (out / "LEADERBOARD.md").read_text(encoding="utf-8")
    assert "**caf\\xe9-copy** 1.00" in board and "[caf\\xe9-copy](feedback/" in board


def generated(folder, count: int, size: int) -> list[str]:
    """`count` Python files of `size` bytes each (a table written by a script), beside the correct example."""
    shutil.copytree(FOLDERS["correct"], folder)
    line = "TABLE.append(0.123456789)  # generated\n"
    for i in range(count):
        (folder / f"gen_{i:03d}.py").write_text("TABLE = []\n" + line * ((size - 11) // len(line)))
    return [f"gen_{i:03d}.py" for i in range(count)]


def test_sixteen_megabytes_of_code_are_capped_and_the_rest_named(tmp_path):
    """64 generated files of 256 KiB (16 MiB): the module (lenet.py) is compared, the rest left out
    by the cap of MAX_CODE bytes, each named; the class's run says who was capped and the pair's
    note says its comparison was partial."""
    names = generated(tmp_path / "submissions" / "hoarder", 64, 256 << 10)
    assert sum(p.stat().st_size for p in (tmp_path / "submissions" / "hoarder").iterdir()) > 16 << 20
    code, skipped = similarity.code_of(tmp_path / "submissions" / "hoarder")
    assert [name for _, name in code.starts] == ["lenet.py"]  # the module first, in order of need
    assert sorted(code.capped) == names and len(code.text.encode()) <= similarity.MAX_CODE + 100
    assert all(any(entry.startswith(f"{name}: ") and "over 256 KiB of code per submission" in entry
                   for entry in skipped) for name in names)
    shutil.copytree(FOLDERS["correct"], tmp_path / "submissions" / "correct")
    out = lab_rows.graded(tmp_path / "out", [lab_rows.ok_row(s, 1.0, 0.9, 1.1, 40) for s in ("correct", "hoarder")])
    lines: list[str] = []
    (pair,), _ = similarity.run(out, tmp_path / "submissions", store.graded_lab(out), report=lines.append)
    assert "hoarder: capped at 50 code files and 256 KiB: 64 code file(s) not compared" in lines[0]
    assert pair.note == "hoarder: 64 code file(s) over the caps, not compared"
    with open(out / "private" / "similarity.csv", newline="", encoding="utf-8") as f:
        assert next(csv.DictReader(f))["note"] == pair.note
    listed = (out / "private" / "similarity-skipped.txt").read_text().splitlines()
    assert len([entry for entry in listed if entry.startswith("hoarder/gen_")]) == 64


def test_past_fifty_code_files_the_rest_are_named_not_compared(tmp_path):
    names = generated(tmp_path / "many", 80, 1 << 10)
    code, skipped = similarity.code_of(tmp_path / "many")
    assert len(code.starts) == similarity.MAX_CODE_FILES and "lenet.py" in [name for _, name in code.starts]
    assert len(code.capped) == 80 + 1 - similarity.MAX_CODE_FILES and set(code.capped) <= set(names)
    assert sum("past the cap of 50 code files per submission" in entry for entry in skipped) == len(code.capped)


def test_without_submissions_or_a_record_of_them_similarity_says_what_to_add(tmp_path, capsys):
    out = lab_rows.graded(tmp_path / "out", [lab_rows.ok_row("solo", 1.0, 0.9, 1.1, 40)])
    assert cli.main(["lab", "similarity", str(out)]) == 2
    assert "records no submissions folder" in capsys.readouterr().err
    store.write_grading(out, tmp_path / "moved", tmp_path / "weights.h5")
    assert cli.main(["lab", "similarity", str(out)]) == 2
    err = capsys.readouterr().err
    assert "is not a folder now; add --submissions DIR" in err and str(tmp_path / "moved") in err
    shutil.copytree(FOLDERS["correct"], tmp_path / "elsewhere" / "solo")
    assert cli.main(["lab", "similarity", str(out), "--submissions", str(tmp_path / "elsewhere")]) == 0
