"""Every file staff open is safe to open (docs/staff.md): a class whose
folder names, LMS names and failure reasons are written to attack a spreadsheet (=HYPERLINK, +1,
-2+3, @SUM, a `;` then a formula) and Markdown or HTML (|, <script>, backticks, newlines) goes
through `lab similarity`, `lab report`, `lab export` (Canvas, Moodle, plain CSV) and `lab publish`;
each file is read back: no CSV cell a spreadsheet would run (OWASP's rule, harness.lab.text), the
numbers the tool computed still numbers, no Markdown row split, no HTML let through. Nothing is
graded: rows are written directly (tests/lab_rows.py)."""

import csv
import io
import re
import shutil

import pytest

from harness.lab import text
from harness.lab.judge import store
from harness.lab.term import similarity
from harness.lab.term.intake import collect
from harness.lab.term.marks import export, leaderboard
from harness.lab.term.public import publish
from tests import lab_rows
from tests.conftest import ROOT

CORRECT = ROOT / "labs" / "examples" / "correct"
HOSTILE = ['=HYPERLINK("http:evil.example","open me")', "+1", "-2+3", "@SUM(A1)", "a|b",
           "<script>alert(1)</script>", "`tick`", "new\nline", "\tTab", "x;=1+2"]
REASON = "=cmd|' /C calc'!A0"  # a failure reason, as a worker may word it
FORMULA = ("=", "+", "-", "@", "\t", "\r", "\n")  # OWASP's list, written out again here


def is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def neutral(path, numbers: set[str]) -> list[dict]:
    """The rows of the CSV at `path`, after checking every cell: a column in `numbers` may hold a
    number; every other cell, the header's too, starts with no formula character, has none right
    after a `;` and no line break."""
    with open(path, newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    header = table[0]
    for i, row in enumerate(table):
        for name, cell in zip(header, row, strict=True):
            if i and name in numbers and is_number(cell):
                continue
            assert not cell.startswith(FORMULA), (path.name, name, cell)
            assert not re.search(r";\s*[=+\-@]", cell), (path.name, name, cell)
            assert "\n" not in cell and "\r" not in cell, (path.name, name, cell)
    return [dict(zip(header, row, strict=True)) for row in table[1:]]


def test_text_cells_are_neutralised_and_numbers_stay_numbers():
    assert text.csv_cell("=1+1") == "'=1+1" and text.csv_cell("@SUM(A1)") == "'@SUM(A1)"
    assert text.csv_cell("-0.5") == "'-0.5"  # text that looks like a number is text: a student wrote it
    assert text.csv_cell("x;=1+2") == "x;'=1+2" and text.csv_cell("a; -1") == "a; '-1"
    assert text.csv_cell("\tTab") == " Tab" and text.csv_cell("new\nline") == "new / line"
    assert text.csv_cell("ok, fine") == "ok, fine" and text.csv_cell("anon-k3v9") == "anon-k3v9"
    assert text.csv_value(-0.5) == -0.5 and text.csv_value(0) == 0 and text.csv_value(1.25) == 1.25
    assert text.csv_value(None) == "" and text.csv_value(True) == "True" and text.csv_value("-0.5") == "'-0.5"
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, ["points", "name", "ratio"], lineterminator="\n")
    writer.writerow(text.csv_row({"points": -0.5, "name": "-0.5", "ratio": 0.93}))
    assert buffer.getvalue() == "-0.5,'-0.5,0.93\n"  # a spreadsheet reads -0.5 and 0.93 as numbers


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """(base, OUT, submissions): a class of hostile folder names, each a copy of the correct example
    (every pair flagged), graded (half ok, half wrong with a hostile reason), `lab similarity` and
    `lab report` run; the manifest names them in the LMS by hostile names too."""
    base = tmp_path_factory.mktemp("hostile")
    submissions = base / "submissions"
    for name in HOSTILE:
        shutil.copytree(CORRECT, submissions / name)
    rows = [lab_rows.ok_row(name, 1.0 + i / 5, 0.95 + i / 5, 1.05 + i / 5, 40) if i % 2 == 0 else
            lab_rows.failed_row(name, "wrong", REASON) for i, name in enumerate(HOSTILE)]
    out = lab_rows.graded(base / "out", rows)
    with open(out / collect.MANIFEST, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=collect.FIELDS)
        writer.writeheader()
        writer.writerows({"folder": name, "student_id": str(1001 + i), "name": name} for i, name in enumerate(HOSTILE))
    similarity.run(out, submissions, store.graded_lab(out), report=lambda line: None)
    leaderboard.build(out, report=lambda line: None)
    return base, out, submissions


def test_the_staff_leaderboard_csv(hostile):
    _, out, _ = hostile
    numbers = {"rank", "points", "median_us_per_image", "ratio", "ratio_ci95_low", "ratio_ci95_high", "loc",
               "files"}
    table = neutral(out / "leaderboard.csv", numbers)
    assert sorted(r["student"] for r in table) == sorted(text.csv_cell(name) for name in HOSTILE)
    assert all(r["reason"] == "'" + REASON for r in table if r["status"] == "wrong")
    ranked = [r for r in table if r["status"] == "ok"]
    assert len(ranked) == 5 and all(is_number(r[c]) for r in ranked for c in ("rank", "points", "ratio"))


def test_the_leaderboard_markdown_and_its_similar_to_column(hostile):
    _, out, _ = hostile
    board = (out / "LEADERBOARD.md").read_text(encoding="utf-8")
    lines = board.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| rank |"))
    assert lines[head].endswith("| similar to ([lab similarity](private/similarity.csv)) |")
    table = lines[head:head + 2 + len(HOSTILE)]
    assert all(line.startswith("| ") and line.endswith("|") for line in table)  # no row split by a newline
    assert lines[head + 2 + len(HOSTILE)] == ""  # and no more rows than students
    cells = {len(re.findall(r"(?<!\\)\|", line)) for line in table}
    assert cells == {len(re.findall(r"(?<!\\)\|", lines[head]))}  # no `|` of a name makes a new cell
    rows = "\n".join(table[2:])
    assert "<script" not in board and "`" not in rows
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rows and "a\\|b" in rows
    script_row = next(line for line in table if "[&lt;script&gt;" in line)
    assert f"**{text.cell(HOSTILE[0], 80)}** 1.00" in script_row  # its flagged classmates, escaped
    assert "**a\\|b** 1.00" in script_row and "**'tick'** 1.00" in script_row


def test_the_similarity_csv_and_pages(hostile):
    _, out, _ = hostile
    table = neutral(out / "private" / "similarity.csv", {"score", "share_a", "share_b"})
    assert len(table) == len(HOSTILE) * (len(HOSTILE) - 1) // 2  # copies: every pair flagged
    assert {r["student_a"] for r in table} | {r["student_b"] for r in table} == {text.csv_cell(n) for n in HOSTILE}
    assert all(r["score"] == "1.0" for r in table)
    assert {r["id_a"] for r in table} | {r["id_b"] for r in table} == {text.csv_cell(text.safe_id(n)) for n in HOSTILE}
    for row in table:
        page = (out / "private" / row["view"]).read_text(encoding="utf-8")
        assert "<script" not in page and "new\nline" not in page
    pages = "".join(p.read_text(encoding="utf-8") for p in (out / "private" / "similarity").iterdir())
    assert "<h2>&lt;script&gt;alert(1)&lt;/script&gt; (" in pages and "<h2>new / line (" in pages


@pytest.mark.parametrize("fmt", export.FORMATS)
def test_the_gradebook_csv(hostile, fmt, tmp_path):
    """The roster's own cells (a name is what a student typed into the LMS) and the grading's: the
    Moodle feedback carries a hostile reason after "; "."""
    _, out, _ = hostile
    roster = tmp_path / "roster.csv"
    with open(roster, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        if fmt == "canvas":
            writer.writerow(export.CANVAS_FIXED + ["@lab (777)"])
            writer.writerows([name, 1001 + i, "+1", "-x@uni", "@SUM(A1)", ""] for i, name in enumerate(HOSTILE))
        elif fmt == "moodle":
            writer.writerow(["Identifier", "Full name", "Email address", "Grade", "Last modified (grade)",
                             "Feedback comments"])
            writer.writerows([f"Participant {1001 + i}", name, "=1+1@uni", "", "-", ""] for i, name in enumerate(HOSTILE))
        else:
            writer.writerow(["id", "name"])
            writer.writerows([1001 + i, name] for i, name in enumerate(HOSTILE))
    done = export.export(out, roster, fmt, tmp_path / "grades.csv", column="@lab (777)" if fmt == "canvas" else None)
    assert done.graded == len(HOSTILE) and not done.unmatched
    points = {"canvas": "'@lab (777)", "moodle": "Grade", "csv": "points"}[fmt]  # the header neutralised too
    table = neutral(tmp_path / "grades.csv", {points, "max_points", "late_days"})
    by_name = {r[{"canvas": "Student", "moodle": "Full name", "csv": "name"}[fmt]]: r for r in table}
    assert set(by_name) >= {text.csv_cell(name) for name in HOSTILE}
    assert all(is_number(r[points]) for r in table)  # Canvas's "Points Possible" row too
    assert by_name[text.csv_cell(HOSTILE[0])][points] == "100" and by_name["'+1"][points] == "0"
    if fmt == "moodle":
        assert "; '" + REASON in by_name["'+1"]["Feedback comments"]
        assert by_name["'+1"]["Last modified (grade)"] == "'-"


def test_the_public_csv(hostile, tmp_path):
    _, out, submissions = hostile
    publish.publish(out, tmp_path / "public", submissions, report=lambda line: None)
    table = neutral(tmp_path / "public" / publish.TABLE, {"rank", "median_us", "ratio", "ci95_low", "ci95_high", "loc"})
    assert len(table) == len(HOSTILE) and all(r["pseudonym"].startswith("anon-") for r in table)
