"""`lab collect` against each LMS's real format, every archive built by the LMS's own rule:

- Canvas (instructure/canvas-lms lib/content_zipper.rb): get_filename joins the sortable name
  (sanitize_user_name: each `_<digits>_` made its digits, lowercased), "LATE" where submission.late?
  and the user id with `_`, then sanitize_file_name drops every non-[[:word:]] character (so `_`
  stays: "O_Neil, Ben" is `o_neilben`); add_upload_submission adds `_<attachment id>_<display name>`
  per file (sanitize_attachment_filename: NUL / \\ : * ? " < > | runs made `_`); rubyzip stamps
  every entry with DOSTime.now, the download's time.
- Canvas's Submissions API (lib/api/v1/submission.rb): user_id, submitted_at, late; a page saved
  from the browser starts with `while(1);`.
- Moodle (moodle/moodle mod/assign/classes/downloader.php): prefix = clean_filename(full name with
  `_` made spaces + "_" + participant id); files in `<prefix>_assignsubmission_file/<path>`, or flat
  `<prefix>_assignsubmission_file_<name>`. The grading worksheet (mod/assign/gradingtable.php):
  Identifier "Participant <id>", Status ("<time> late"), "Last modified (submission)" (userdate,
  lang/en/langconfig.php strftimedaydatetime "%A, %d %B %Y, %I:%M %p").
"""

import csv
import io
import json
import re
import struct
import unicodedata
import zipfile
from collections.abc import Callable

import pytest

from harness.errors import HarnessError
from harness.lab import text
from harness.lab.judge.rules import assignment
from harness.lab.term.intake import collect
from harness.lab.term.marks import points
from tests.test_lab_term import CORRECT, lab_text, make_zip, python

DOWNLOADED = (2026, 12, 3, 9, 0, 0)  # two days after `due` (2026-12-01T23:59Z): the TA's download
IM2COL = b"def im2col(x):\n    return x\n"


def word(char: str) -> bool:
    """Onigmo's [[:word:]]: Letter, Mark, Decimal_Number, Connector_Punctuation."""
    category = unicodedata.category(char)
    return category[0] in "LM" or category in ("Nd", "Pc")


def canvas_entry(sortable: str, user_id: int, attachment: int, display: str, late: bool = False) -> str:
    """An entry's name as content_zipper.rb writes it."""
    name = re.sub(r"_([0-9]+)_", r"\1", sortable).lower()  # sanitize_user_name
    joined = "_".join([name, *(["LATE"] if late else []), str(user_id)])  # get_filename
    prefix = "".join(c for c in joined if word(c))  # sanitize_file_name
    return f"{prefix}_{attachment}_" + re.sub(r'[\x00/\\:*?"<>|]+', "_", display)


def moodle_prefix(full_name: str, participant: int) -> str:
    """get_student_prefix: `_` made spaces, clean_filename (PARAM_FILE) drops & < > " ` | ' : \\ /."""
    return re.sub(r"[&<>\"`|':\\/]|[\x00-\x1f\x7f]", "", full_name.replace("_", " ") + f"_{participant}")


def canvas_class(tmp_path):
    """Ann hands in two files and an alias, Ben's name keeps its `_`, Zoë is late; every entry
    carries the download's time."""
    return make_zip(tmp_path / "canvas.zip", [
        (canvas_entry("Smith, Ann", 1002, 9002, "lenet.py"), CORRECT, DOWNLOADED),
        (canvas_entry("Smith, Ann", 1002, 9003, "im2col.py"), IM2COL, DOWNLOADED),
        (canvas_entry("Smith, Ann", 1002, 9004, "alias.txt"), b"Fast Ann\n", DOWNLOADED),
        (canvas_entry("O_Neil, Ben", 1003, 9005, "lenet.py"), CORRECT, DOWNLOADED),
        (canvas_entry("O'Brien, Zoë", 1001, 9006, "lenet.py", late=True), CORRECT, DOWNLOADED),
        (canvas_entry("Smith, Ann", 1002, 0, "x")[:-len("_0_x")] + "_text.html", b"<p>hi</p>", DOWNLOADED)])


def late_days(manifest: dict) -> dict[str, int]:
    grade = assignment.parse(lab_text(), "lab.toml").grade
    return {folder: points.late_days(grade, entry) for folder, entry in manifest.items()}


# --- Canvas: hand-ins of several files, names with `_`, the LATE flag, the download's time --------
def test_canvas_groups_attachments_keeps_underscore_names_and_lateness_is_the_flag(tmp_path):
    assert canvas_entry("O_Neil, Ben", 1003, 9005, "lenet.py") == "o_neilben_1003_9005_lenet.py"
    said = []
    collect.collect(canvas_class(tmp_path), tmp_path / "subs", report=said.append)
    subs = tmp_path / "subs"
    assert sorted(p.name for p in (subs / "smithann-1002").iterdir()) == ["alias.txt", "im2col.py", "lenet.py"]
    assert (subs / "o-neilben-1003" / "lenet.py").read_bytes() == CORRECT
    manifest = collect.read_manifest(subs / "manifest.csv")
    assert sorted(manifest) == ["o-neilben-1003", "obrienzoe-1001", "smithann-1002"]
    assert {f: e["late"] for f, e in manifest.items()} == {"o-neilben-1003": "", "obrienzoe-1001": "yes",
                                                           "smithann-1002": ""}
    assert all(e["submitted_at"] == "" and e["time_source"] == "lms-late-flag" for e in manifest.values())
    assert late_days(manifest) == {"o-neilben-1003": 0, "obrienzoe-1001": 1, "smithann-1002": 0}
    assert any("smithann_1002_text.html: Canvas's online text" in line for line in said)
    assert any("pass --times" in line for line in said)
    hashes = json.loads((subs / "hashes.json").read_text())
    assert sorted(hashes["smithann-1002"]) == ["alias.txt", "im2col.py", "lenet.py"]


def test_canvas_times_from_the_submissions_api_export(tmp_path):
    pages = [[{"id": 1, "user_id": 1002, "submitted_at": "2026-12-01T22:00:00Z", "late": False, "attempt": 2},
              {"id": 2, "user_id": 1003, "submitted_at": "2026-12-01T23:58:59Z", "late": False}],
             [{"id": 3, "user_id": 1001, "submitted_at": "2026-12-03T10:00:00Z", "late": True, "seconds_late": 1},
              {"id": 4, "user_id": 1004, "submitted_at": None, "late": False}]]  # never handed in
    exports = []
    for i, page in enumerate(pages):
        exports.append(tmp_path / f"page{i}.json")
        exports[-1].write_text("while(1);" + json.dumps(page))
    done = python("lab", "collect", canvas_class(tmp_path), "-o", tmp_path / "subs",
                  "--times", exports[0], "--times", exports[1])
    assert done.returncode == 0, done.stderr
    manifest = collect.read_manifest(tmp_path / "subs" / "manifest.csv")
    assert manifest["smithann-1002"]["submitted_at"] == "2026-12-01T22:00:00+00:00"
    assert manifest["obrienzoe-1001"]["submitted_at"] == "2026-12-03T10:00:00+00:00"
    assert all(e["time_source"] == "lms-export" for e in manifest.values())
    assert late_days(manifest) == {"o-neilben-1003": 0, "obrienzoe-1001": 2, "smithann-1002": 0}


def test_the_later_attachment_of_one_name_is_kept_and_said(tmp_path):
    source = make_zip(tmp_path / "c.zip", [
        (canvas_entry("Lee, Ben", 1003, 9010, "lenet.py"), CORRECT, DOWNLOADED),
        (canvas_entry("Lee, Ben", 1003, 9003, "lenet.py"), b"old", DOWNLOADED),
        (canvas_entry("Lee, Ben", 1003, 9011, "lab.zip"), zipped({"lab/util.py": b"U = 1\n"}), DOWNLOADED)])
    collect.collect(source, tmp_path / "subs", report=lambda line: None)
    assert (tmp_path / "subs" / "leeben-1003" / "lenet.py").read_bytes() == CORRECT
    assert (tmp_path / "subs" / "leeben-1003" / "util.py").is_file()
    note = collect.read_manifest(tmp_path / "subs" / "manifest.csv")["leeben-1003"]["note"]
    assert note == "lenet.py in 2 attachments (9003, 9010); kept the latest (9010)"


# --- Moodle: folders, the grading worksheet's times and late status -------------------------------
def worksheet(path, rows):
    with open(path, "w", newline="", encoding="utf-8-sig") as f:
        writer = csv.writer(f)
        writer.writerow(["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
                         "Grade can be changed", "Last modified (submission)", "Online text",
                         "Last modified (grade)", "Feedback comments"])
        for ident, name, status, when in rows:
            writer.writerow([f"Participant {ident}", name, f"{ident}@uni", status, "", "100.00", "Yes", when,
                             "x" * 200_000, "-", ""])  # an online text past csv's field limit
    return path


def test_moodle_folders_and_the_grading_worksheet(tmp_path):
    source = make_zip(tmp_path / "moodle.zip", [
        (f"{moodle_prefix('Ann Smith', 501)}_assignsubmission_file/lenet.py", CORRECT, DOWNLOADED),
        (f"{moodle_prefix('Ann Smith', 501)}_assignsubmission_file/lib/im2col.py", IM2COL, DOWNLOADED),
        (f"{moodle_prefix('Zoë O_Brien', 502)}_assignsubmission_file/lenet.py", CORRECT, DOWNLOADED),
        (f"{moodle_prefix('Zoë O_Brien', 502)}_assignsubmission_onlinetext/onlinetext.html", b"<p/>", DOWNLOADED)])
    said = []
    collect.collect(source, tmp_path / "plain", report=said.append)
    plain = collect.read_manifest(tmp_path / "plain" / "manifest.csv")
    assert all(e["submitted_at"] == "" and e["time_source"] == "none" for e in plain.values())
    assert any("Moodle's zip says nothing of lateness" in line for line in said)
    sheet = worksheet(tmp_path / "worksheet.csv", [
        (501, "Ann Smith", "Submitted for grading - Graded", "Tuesday, 1 December 2026, 11:00 PM"),
        (502, "Zoë O Brien", "Submitted for grading - 1 day 10 hours late", "Thursday, 3 December 2026, 9:59 AM"),
        (503, "Cat Lee", "No submission", "-")])
    collect.collect(source, tmp_path / "subs", report=lambda line: None, times=[sheet])
    manifest = collect.read_manifest(tmp_path / "subs" / "manifest.csv")
    assert (tmp_path / "subs" / "ann-smith-501" / "lib" / "im2col.py").read_bytes() == IM2COL
    assert manifest["ann-smith-501"]["submitted_at"] == "2026-12-01T23:00:00"
    assert manifest["zoe-o-brien-502"]["submitted_at"] == "2026-12-03T09:59:00"
    assert {f: e["late"] for f, e in manifest.items()} == {"ann-smith-501": "", "zoe-o-brien-502": "yes"}
    assert all(e["time_source"] == "lms-export" for e in manifest.values())
    assert late_days(manifest) == {"ann-smith-501": 0, "zoe-o-brien-502": 2}


@pytest.mark.parametrize("content, message", [
    ("Student,ID,SIS User ID,SIS Login ID,Section,Lab (1)\nA,1,,a,S,\n", "gradebook export holds grades"),
    ("Identifiant,Nom\nParticipant 1,A\n", "no 'Identifier' column"),
    ("Identifier,Status,Last modified (submission)\nParticipant 1,Submitted,1 Dezember 2026\n",
     r"\(line 2\): Last modified \(submission\) '1 Dezember 2026' is not a date"),
    ("Identifier,Status\nParticipant 1,Submitted\n", "no 'Last modified \\(submission\\)' column"),
    ('while(1);[{"user_id": "x", "submitted_at": 5}]', r"\(item 0\): expected user_id"),
    ('[{"user_id": 1, "submitted_at": "yesterday", "late": false}]', "'yesterday' is not ISO 8601")])
def test_an_export_that_is_not_the_lms_s_is_refused(tmp_path, content, message):
    export = tmp_path / "export.csv"
    export.write_text(content)
    source = canvas_class(tmp_path)
    with pytest.raises(HarnessError, match=message):
        collect.collect(source, tmp_path / "subs", times=[export])
    assert not (tmp_path / "subs").exists()


# --- a student can never land in a classmate's folder ---------------------------------------------
def test_names_that_hold_another_students_ids_are_left_out_not_guessed(tmp_path):
    mallory = canvas_entry("Smithann_1002 _9999", 1005, 777, "lenet.py")  # folding leaves _1002_9999_
    assert mallory == "smithann_1002_9999_1005_777_lenet.py"
    source = make_zip(tmp_path / "canvas.zip", [
        (canvas_entry("Smith, Ann", 1002, 9002, "lenet.py"), CORRECT, DOWNLOADED),
        (mallory, b"EVIL = 1\n", DOWNLOADED),
        (canvas_entry("Mallory, Eve", 1006, 778, "x_1002_9_lenet.py"), b"EVIL = 2\n", DOWNLOADED)])
    said = []
    collect.collect(source, tmp_path / "subs", report=said.append)
    assert sorted(p.name for p in (tmp_path / "subs").iterdir()) == ["hashes.json", "manifest.csv", "smithann-1002"]
    assert [p.name for p in (tmp_path / "subs" / "smithann-1002").iterdir()] == ["lenet.py"]
    assert (tmp_path / "subs" / "smithann-1002" / "lenet.py").read_bytes() == CORRECT
    assert sum("never guessed" in line and "canvas id 1002" in line for line in said) == 2


def test_a_moodle_name_made_to_look_like_a_classmates_prefix(tmp_path):
    fake = "Ann Smith_1002_assignsubmission_file_"  # Mallory's display name
    source = make_zip(tmp_path / "moodle.zip", [
        (f"{moodle_prefix('Ann Smith', 1002)}_assignsubmission_file/lenet.py", CORRECT, DOWNLOADED),
        (f"{moodle_prefix(fake, 1005)}_assignsubmission_file/lenet.py", b"EVIL = 1\n", DOWNLOADED),
        (f"{fake}_1006_assignsubmission_file/lenet.py", b"EVIL = 2\n", DOWNLOADED),  # were `_` kept
        (f"{fake}_1007_assignsubmission_file_lenet.py", b"EVIL = 3\n", DOWNLOADED)])  # flat, were `_` kept
    said = []
    collect.collect(source, tmp_path / "subs", report=said.append)
    manifest = collect.read_manifest(tmp_path / "subs" / "manifest.csv")
    assert sorted(e["student_id"] for e in manifest.values()) == ["1002", "1005", "1006"]
    assert (tmp_path / "subs" / "ann-smith-1002" / "lenet.py").read_bytes() == CORRECT
    assert [p.name for p in (tmp_path / "subs" / "ann-smith-1002").iterdir()] == ["lenet.py"]
    assert any("_1007_assignsubmission_file_lenet.py: could be the hand-in of moodle id 1002, moodle id 1007"
               in line for line in said)


# --- odd entries: collected safely, or refused cleanly with nothing written -----------------------
def zipped(entries: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def later(entries: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> Callable[[], bytes]:
    """zipped, when a test asks: the large ones take seconds, and every xdist worker imports this file."""
    return lambda: zipped(entries, method)


def patched(data: bytes, old: bytes, new: bytes, flag: int | None = None, size: int | None = None) -> bytes:
    """The zip with a name's bytes replaced, and its general-purpose flag or uncompressed size set
    in every header (local: flag at 6; central directory: flag at 8, size at 24)."""
    data = bytearray(data.replace(old, new))
    for sig, flag_at, size_at in ((b"PK\x03\x04", 6, 22), (b"PK\x01\x02", 8, 24)):
        at = data.find(sig)
        while at >= 0:
            if flag is not None:
                data[at + flag_at:at + flag_at + 2] = struct.pack("<H", flag)
            if size is not None:
                data[at + size_at:at + size_at + 4] = struct.pack("<I", size)
            at = data.find(sig, at + 4)
    return bytes(data)


ANN = canvas_entry("Smith, Ann", 1002, 9002, "lenet.py")
BOB = canvas_entry("Lee, Bob", 1004, 9004, "lenet.py")  # the student whose odd entry refuses his hand-in
DEEP = f"{moodle_prefix('Cat Day', 7)}_assignsubmission_file/" + "/".join(["d" * 200] * 20) + "/x.py"
THEIRS = {  # one student's odd hand-in -> what the refusal names; the others are collected
    "a file named ..": ([(canvas_entry("Lee, Bob", 1004, 9005, ".."), b"x")], r"'\.\.' is not a file"),
    "a file named .": ([(canvas_entry("Lee, Bob", 1004, 9005, "."), b"x")], r"'\.' is not a file"),
    "a 300-byte name": ([(canvas_entry("Lee, Bob", 1004, 9005, "é" * 150 + ".py"), b"x")],
                        "a name of 303 bytes"),
    "a 4 KB path": ([(DEEP, b"x")], "path past 1024 bytes or 8 folders"),
    "a file that is a folder too": ([(f"{moodle_prefix('Cat Day', 7)}_assignsubmission_file/lib", b"x"),
                                     (f"{moodle_prefix('Cat Day', 7)}_assignsubmission_file/lib/a.py", b"x")],
                                    "'lib' is handed in both as a file and as a folder"),
    "a zip of 100,001 entries": ([(canvas_entry("Lee, Bob", 1004, 9005, "lab.zip"),
                                   later({f"f{i}.py": b"" for i in range(100_001)}, zipfile.ZIP_STORED))],
                                 r"lab.zip: 100001 entries, past the cap of 100000"),
    "a zip of 1,001 files": ([(canvas_entry("Lee, Bob", 1004, 9005, "lab.zip"),
                               later({f"f{i}.py": b"" for i in range(1001)}))],
                             r"lab.zip: 1001 files, past the cap of 1000 for one student"),
    "a zip that inflates 1000 times": ([(canvas_entry("Lee, Bob", 1004, 9005, "lab.zip"),
                                         later({"data.npy": b"\0" * (20 << 20)}))], r"'data.npy' inflates \d+ times"),
    "a zip bomb": ([(canvas_entry("Lee, Bob", 1004, 9005, "lab.zip"), later({"data.npy": b"\0" * (33 << 20)}))],
                   r"lab.zip: its entries expand to 33 MiB, past the cap of 32 MiB \(a zip bomb\?\)"),
    "a nested zip with one name twice": ([(canvas_entry("Lee, Bob", 1004, 9005, "lab.zip"),
                                           zipped({"a.py": b"1", "b.py": b"2"}).replace(b"b.py", b"a.py"))],
                                         "'a.py' appears twice"),
    "a zip that climbs out": ([(canvas_entry("Lee, Bob", 1004, 9005, "lab.zip"), zipped({"../../x.py": b"1"}))],
                              r"entry '\.\./\.\./x.py' points outside"),
    "a zip with an absolute path": ([(canvas_entry("Lee, Bob", 1004, 9005, "lab.zip"), zipped({"/tmp/x.py": b"1"}))],
                                    r"entry '/tmp/x.py' points outside"),
    "an unreadable zip": ([(canvas_entry("Lee, Bob", 1004, 9005, "lab.zip"), zipped({"lenet.py": CORRECT})[:-30])],
                          r"lab.zip: not a readable zip"),
    "a file past the size cap": ([(canvas_entry("Lee, Bob", 1004, 9005, "data.npy"), b"\0" * (33 << 20))],
                                 r"'lee.*data.npy' expands past the size cap of one student \(32 MiB"),
}
WHOLE = {  # the download itself is not as the LMS writes it -> refused whole, nothing written
    "two ids, one name each": ([(canvas_entry("Smith, Ann", 1002, 9003, "a.py", late=True), b"x")],
                               "names canvas id 1002 'smithann' LATE, another of its entries 'smithann'"),
    "a top-level entry that inflates 1000 times": ([(canvas_entry("Lee, Bob", 1004, 9005, "d.npy"),
                                                     b"\0" * (20 << 20))], r"d.npy' inflates \d+ times"),
    "a top-level entry that climbs out": ([("../" + BOB, b"x")], r"entry '\.\./lee.*' points outside"),
}


@pytest.mark.parametrize("case", sorted(THEIRS))
def test_odd_hand_ins_refuse_that_student_alone(tmp_path, case):
    entries, message = THEIRS[case]
    source = make_zip(tmp_path / "odd.zip", [(ANN, CORRECT, DOWNLOADED), (BOB, CORRECT, DOWNLOADED),
                                            *((n, d() if callable(d) else d, DOWNLOADED) for n, d in entries)])
    said: list[str] = []
    subs = collect.collect(source, tmp_path / "subs", report=said.append)
    [refused] = collect.refused(subs)
    assert re.search(message, refused.refused) and "nothing of theirs was written" in refused.refused
    assert "Traceback" not in refused.refused and "ask the student to hand in again" in refused.refused
    assert (tmp_path / "subs" / "smithann-1002" / "lenet.py").read_bytes() == CORRECT  # the others' bytes
    assert {p.name for p in (tmp_path / "subs").iterdir()} == {"hashes.json", "manifest.csv", "smithann-1002",
                                                              "leebob-1004", refused.folder} - {refused.folder}
    assert not list(tmp_path.rglob("x.py")) and not list(tmp_path.rglob("*.npy"))  # nothing of theirs, anywhere
    row = collect.read_manifest(tmp_path / "subs" / collect.MANIFEST)[refused.folder]
    assert row["status"] == "refused" and re.search(message, row["note"]) and row["sha256"] == ""
    assert f"nothing of theirs written: {refused.folder} " in said[-1]


@pytest.mark.parametrize("case", sorted(WHOLE))
def test_an_odd_download_is_refused_whole(tmp_path, case):
    entries, message = WHOLE[case]
    source = make_zip(tmp_path / "odd.zip", [(ANN, CORRECT, DOWNLOADED), *((n, d, DOWNLOADED) for n, d in entries)])
    with pytest.raises(HarnessError, match=message) as refused:
        collect.collect(source, tmp_path / "subs")
    assert "nothing was written" in str(refused.value) and "Traceback" not in str(refused.value)
    assert not (tmp_path / "subs").exists()


def test_lying_headers_and_names_refused_from_the_command_line(tmp_path):
    good = zipped({ANN: CORRECT, canvas_entry("Lee, Bé", 1003, 9004, "lenet.py"): CORRECT})
    cases = {  # the archive as the TA has it -> what the error names
        "not-utf8.zip": (patched(good, "bé".encode(), b"b\xc3\x28"), r"entry b'leeb\\xc3\(_1003_9004_lenet.py'"),
        "short-header.zip": (patched(zipped({ANN: b"\0" * (3 << 20)}), b"", b"", size=1000),
                             rf"entry '{ANN}' cannot be read \(Bad CRC-32"),
        "dup.zip": (zipped({ANN: CORRECT, "b" + ANN[1:]: CORRECT}).replace(b"b" + ANN[1:].encode(), ANN.encode()),
                    f"entry '{ANN}' appears twice")}
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        done = python("lab", "collect", tmp_path / name, "-o", tmp_path / name.replace(".zip", ""))
        assert done.returncode == 2 and done.stderr.startswith("ERROR: ") and "Traceback" not in done.stderr
        assert re.search(message, done.stderr), (name, done.stderr)
        assert not (tmp_path / name.replace(".zip", "")).exists()


def test_odd_names_collected_safely_and_the_manifest_bounded(tmp_path):
    formula = "=HYPERLINK(\"http://x\")"
    many = zipped({f"lab/{'m' * 200}{i:03d}.py": b"" for i in range(300)})
    unflagged = patched(zipped({canvas_entry("Lee, Bé", 1003, 9004, "lenet.py"): CORRECT}), b"", b"", flag=0)
    (tmp_path / "infozip.zip").write_bytes(unflagged)
    source = make_zip(tmp_path / "m.zip", [
        (f"{moodle_prefix(formula, 11)}_assignsubmission_file/lenet.py", CORRECT, DOWNLOADED),
        (f"{moodle_prefix('N' * 5000, 12)}_assignsubmission_file/lenet.py", CORRECT, DOWNLOADED),
        (f"{moodle_prefix('Many', 13)}_assignsubmission_file/lab.zip", many, DOWNLOADED)])
    collect.collect(source, tmp_path / "subs", report=lambda line: None)
    raw = (tmp_path / "subs" / "manifest.csv").read_text(encoding="utf-8")
    cells = [c for row in csv.reader(io.StringIO(raw)) for c in row]
    assert max(map(len, cells)) <= collect.MAX_CELL and not any(c.startswith(text.FORMULA) for c in cells)
    manifest = collect.read_manifest(tmp_path / "subs" / "manifest.csv")
    by_id = {e["student_id"]: e for e in manifest.values()}
    assert by_id["11"]["name"] == "'=HYPERLINK(httpx)"  # clean_filename dropped " : /, csv_cell the =
    assert by_id["13"]["sha256"] == "hashes.json"
    assert len(json.loads((tmp_path / "subs" / "hashes.json").read_text())[by_id["13"]["folder"]]) == 300
    collect.collect(tmp_path / "infozip.zip", tmp_path / "subs2", report=lambda line: None)  # Info-ZIP: no flag
    assert (tmp_path / "subs2" / "leebe-1003" / "lenet.py").read_bytes() == CORRECT
    assert collect.read_manifest(tmp_path / "subs2" / "manifest.csv")["leebe-1003"]["name"] == "leebé"
