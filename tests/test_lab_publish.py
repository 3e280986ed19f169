"""`lab publish OUT PUBLIC_DIR` (harness.lab.term.public.publish, harness.lab.term.public.alias), from rows written as the
grader writes them (tests/lab_rows.py; nothing is graded): the page's rows are the leaderboard's,
under pseudonyms; no student's name, folder, id, reason or the host's name is in any file under
PUBLIC_DIR (names, text, HTML attributes, the figure's text chunks); bad alias.txt files fall back to
the tag, named in the student's feedback; and headless Chromium opens the page from disk."""

import csv
import html.parser
import json
import os
import shutil
import zlib
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.lab.judge import store
from harness.lab.term.marks import leaderboard
from harness.lab.term.public import alias, publish
from tests import lab_rows

# folder name -> its alias.txt (None: none); the expected outcome is in ALIASES below
CLASS = {
    "zelda_quintero": "Speedy Gonzales",
    "s2093847": None,  # a student id as the folder name
    "marcus_okonkwo": "Quintero fan",  # a classmate's name
    "priya_raman": "<img onerror=alert()>",
    "tomas_berg": "",  # empty
    "ingrid_duarte": "Night Owl",  # chosen by two: neither gets it
    "olaf_nyberg": "night owl",
    "kwame_mensah": "x" * 40,
    "hedda_lindqvist": "anon-abcdefgh",  # posing as a tag
    "ravi_subramanian": "LINK",  # a link out of its folder
}
CHOSEN = {"zelda_quintero": "Speedy Gonzales"}
REFUSED = {"marcus_okonkwo": "a student's name", "priya_raman": "no markup", "tomas_berg": "empty",
           "ingrid_duarte": "same alias", "olaf_nyberg": "same alias", "kwame_mensah": "40 characters",
           "hedda_lindqvist": "grader's own tags", "ravi_subramanian": "empty"}
SECRET = "The secret ingredient of ravi"  # what the link points at: never published
REASON = "gate: 37 of 10000 disagree; worst |dp| 0.91 (WRONG-REASON-priya)"


def rows() -> list[dict]:
    """Three ok rows whose intervals overlap (a tie where the leaderboard has ties), a clear
    winner, and the others unranked with reasons."""
    return [{**lab_rows.ok_row("s2093847", 0.61, 0.58, 0.64, 55), "peak_mb": 41.5},
            lab_rows.ok_row("zelda_quintero", 1.20, 1.10, 1.30, 41),
            lab_rows.ok_row("marcus_okonkwo", 1.25, 1.15, 1.40, 38),
            lab_rows.ok_row("ingrid_duarte", 1.28, 1.05, 1.50, 72),
            lab_rows.ok_row("olaf_nyberg", 3.50, 3.20, 3.90, 90),
            lab_rows.ok_row("kwame_mensah", 0.95, 0.90, 1.00, 47),
            {**lab_rows.failed_row("priya_raman", "wrong", REASON), "peak_mb": 333.0},
            {**lab_rows.failed_row("tomas_berg", "crashed", "predict raised KeyError('conv3') in tomas_berg/lenet.py"),
             "peak_mb": "<b>9 MiB</b>"},  # not a number: never shown
            lab_rows.failed_row("hedda_lindqvist", "timeout", "past wall_s = 600 on " + lab_rows.HOST),
            lab_rows.failed_row("ravi_subramanian", "import-error", "no lenet.py (a regular file)")]


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """(OUT, PUBLIC_DIR, what publish reported): the class graded, its staff report built, published."""
    base = tmp_path_factory.mktemp("publish")
    out = lab_rows.graded(base / "out", rows())
    submissions = base / "submissions"
    for student, text in CLASS.items():
        (submissions / student).mkdir(parents=True)
        (submissions / student / "lenet.py").write_text("# code\n")
        if text == "LINK":
            (base / "secret.txt").write_text(SECRET + "\n")
            os.symlink(base / "secret.txt", submissions / student / alias.FILE)
        elif text is not None:
            (submissions / student / alias.FILE).write_text(text + "\n")
    leaderboard.build(out)
    said: list[str] = []
    publish.publish(out, base / "public", submissions, report=said.append)
    return out, base / "public", said


class Table(html.parser.HTMLParser):
    """The text of every cell of every table, by table id."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.table, self.cell = None, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.table = dict(attrs)["id"]
            self.tables[self.table] = []
        elif tag == "tr" and self.table:
            self.tables[self.table].append([])
        elif tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.tables[self.table][-1].append(self.cell.strip())
            self.cell = None
        elif tag == "table":
            self.table = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def page_tables(public: Path) -> dict[str, list[list[str]]]:
    parser = Table()
    parser.feed((public / publish.PAGE).read_text())
    return parser.tables


def expected_rows(out: Path) -> list[list[str]]:
    """What the leaderboard says, in its order, with each student's public name."""
    saved = json.loads((out / "private" / "aliases.json").read_text())
    graded, _ = store.checked_rows(out)
    return [[str(rank) if rank is not None else "–", saved[row["student"]]["alias"], row["status"]]
            for rank, row in leaderboard.ranked(graded)]


def test_the_page_shows_the_leaderboards_rows_under_pseudonyms(published):
    out, public, _ = published
    assert sorted(p.name for p in public.iterdir()) == sorted([publish.PAGE, publish.FIGURE, publish.TABLE])
    tables = page_tables(public)
    header, *body = tables["leaderboard"]
    assert header == ["rank", "pseudonym", "status", "time per image", "× numpy [95% interval]", "lines of code",
                      "peak memory"]
    assert [cells[:3] for cells in body] == expected_rows(out)  # ranks as the leaderboard's (ties too)
    winner = body[0]
    assert winner[3] == "244 µs" and winner[4] == "0.61 [0.58–0.64]" and winner[5] == "55"
    assert winner[1].startswith("anon-")  # s2093847 chose nothing
    assert ["–", "–", "–"] == body[-1][3:6]  # unranked: no time
    assert winner[6] == "42 MiB" and body[-1][6] == "–"  # peak memory where the grader measured one ...
    peaks = {cells[2]: cells[6] for cells in body}
    assert peaks["wrong"] == "333 MiB" and peaks["crashed"] == "–"  # ... a number, for any row
    refs = {cells[0]: cells[1:] for cells in tables["references"][1:]}
    assert refs["numpy"][:2] == ["400 µs", "1.00"] and refs[lab_rows.FLOOR][:2] == ["90 µs", "0.23"]
    text = (public / publish.PAGE).read_text()
    assert "Leaderboard: LeNet-5 inference in NumPy on the CPU" in text
    assert publish.graded_date(rows()) in text and 'src="leaderboard.png"' in text
    with open(public / publish.TABLE, newline="") as f:
        table = list(csv.DictReader(f))
    assert list(table[0]) == publish.PUBLIC_FIELDS
    assert [[r["rank"] or "–", r["pseudonym"], r["status"]] for r in table] == expected_rows(out)


def forbidden() -> list[str]:
    """Every student's folder name and its parts, the host, the reasons, the feedback's words,
    and what a link in a student's folder pointed at."""
    words = {lab_rows.HOST, SECRET, "WRONG-REASON", "KeyError", "wall_s", "feedback", "Next step", "Test CPU"}
    for row in rows():
        words |= alias.name_parts(row["student"])
    return sorted(words)


def png_text(data: bytes) -> str:
    """The text chunks of a PNG (tEXt, zTXt, iTXt), decompressed where they are."""
    found, at = [], 8
    while at < len(data):
        size, kind = int.from_bytes(data[at:at + 4], "big"), data[at + 4:at + 8]
        body = data[at + 8:at + 8 + size]
        if kind == b"zTXt":
            key, _, rest = body.partition(b"\0")
            found.append(key + b" " + zlib.decompress(rest[1:]))
        elif kind in (b"tEXt", b"iTXt"):
            found.append(body)
        at += 12 + size
    return b"\n".join(found).decode("latin-1")


def test_no_name_id_reason_or_host_is_anywhere_under_the_public_folder(published):
    out, public, _ = published
    files = [p for p in public.rglob("*")]
    assert len(files) == 3
    for path in files:
        data = path.read_bytes()
        text = (data.decode("latin-1") + "\n" + png_text(data) if path.suffix == ".png"
                else data.decode("utf-8")).lower()
        for word in forbidden():
            assert word.lower() not in path.name.lower(), (word, path.name)
            assert word.lower() not in text, (word, path.name)
    assert "Software" in png_text((public / publish.FIGURE).read_bytes())  # the chunks were read


def test_aliases_chosen_refused_and_stable(published):
    out, public, said = published
    saved = json.loads((out / "private" / "aliases.json").read_text())
    for student, wanted in CHOSEN.items():
        assert saved[student] == {"alias": wanted, "chosen": True, "refused": None}
    for student, why in REFUSED.items():
        assert saved[student]["alias"] == alias.tag(out, student) and not saved[student]["chosen"]
        assert why in saved[student]["refused"], (student, saved[student]["refused"])
        feedback = (out / "feedback" / f"{student}.md").read_text()
        assert "alias.txt was not used on the public page" in feedback and saved[student]["alias"] in feedback
        assert any(line.startswith(f"{student}: alias.txt refused") for line in said)
    assert "not used on the public page" not in (out / "feedback" / "zelda_quintero.md").read_text()
    tags = [saved[s]["alias"] for s in saved if not saved[s]["chosen"]]
    assert len(set(tags)) == len(tags) and all(t.startswith("anon-") and len(t) == 13 for t in tags)
    assert alias.tag(out, "s2093847") == saved["s2093847"]["alias"]  # the same key, the same tag
    leaderboard.build(out)  # a regrade's report keeps the refusal in the feedback
    assert "alias.txt was not used" in (out / "feedback" / "priya_raman.md").read_text()
    text = (public / publish.PAGE).read_text()
    assert "Speedy Gonzales" in text and "onerror" not in text


def test_a_tag_is_the_keys_not_the_names(tmp_path):
    out = lab_rows.graded(tmp_path / "a", rows()[:1])
    other = lab_rows.graded(tmp_path / "b", rows()[:1])
    assert alias.tag(out, "s2093847") != alias.tag(other, "s2093847")
    assert alias.tag(out, "s2093847") == alias.tag(out, "s2093847")
    assert alias.refusal("Fast Lane", ["s2093847"]) is None
    assert alias.refusal("s2093847 rocks", ["s2093847"]) == "it contains a student's name"
    assert alias.refusal("ZeldaQuintero", ["zelda_quintero"]) == "it contains a student's name"


def test_publish_refuses_a_folder_that_mixes_with_staff_files(published, tmp_path):
    out, public, _ = published
    for target in (out, out / "public", out.parent):
        with pytest.raises(HarnessError, match="staff files and public files never mix"):
            publish.publish(out, target)
    dirty = tmp_path / "site"
    dirty.mkdir()
    (dirty / "notes.md").write_text("staff notes\n")
    with pytest.raises(HarnessError, match="holds other files"):
        publish.publish(out, dirty)
    copy, again = tmp_path / "out", tmp_path / "again"
    shutil.copytree(out, copy)
    shutil.copytree(public, again)
    publish.publish(copy, again, report=lambda line: None)  # its own files: overwritten
    assert all(row[1].startswith("anon-") for row in page_tables(again)["leaderboard"][1:])  # no --submissions


CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


def microseconds(shown: str) -> float:
    """"244 µs", "1.4 ms" -> µs."""
    value, unit = shown.split()
    return float(value) * {"µs": 1, "ms": 1e3, "s": 1e6}[unit]


def browser():
    """Headless Debian Chromium through Selenium, or a skip saying what is missing."""
    if not CHROMIUM.is_file() or not DRIVER.is_file():
        pytest.skip(f"no Chromium ({CHROMIUM}) or chromedriver ({DRIVER}): apt-get install chromium "
                    "chromium-driver (.ci/run does)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (make install)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,1300"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(str(DRIVER)))


def test_chromium_shows_the_rows_sorts_by_time_and_logs_no_error(published):
    out, public, _ = published
    driver = browser()
    try:
        driver.get((public / publish.PAGE).as_uri())
        from selenium.webdriver.common.by import By

        def shown():
            return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                    for tr in driver.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")]

        assert [cells[:3] for cells in shown()] == expected_rows(out)
        if os.environ.get("LENET_PUBLISH_SCREENSHOT"):  # the closing note's picture
            driver.save_screenshot(os.environ["LENET_PUBLISH_SCREENSHOT"])
        driver.find_elements(By.CSS_SELECTOR, "#leaderboard th button")[3].click()  # time per image
        first = shown()
        times = [microseconds(cells[3]) for cells in first[:6]]
        assert times == sorted(times) and len(set(times)) == 6 and [c[3] for c in first[6:]] == ["–"] * 4
        driver.find_elements(By.CSS_SELECTOR, "#leaderboard th button")[3].click()  # and back
        again = shown()
        assert [microseconds(c[3]) for c in again[:6]] == sorted(times, reverse=True)
        assert [c[3] for c in again[6:]] == ["–"] * 4  # the unranked stay last
        text = driver.find_element(By.TAG_NAME, "body").text.lower()
        assert all(word.lower() not in text for word in forbidden())
        assert driver.find_element(By.TAG_NAME, "img").get_property("naturalWidth") > 500  # the figure loaded
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert errors == []
    finally:
        driver.quit()


def test_the_page_follows_the_leaderboards_ties(published, tmp_path):
    """The page and its CSV show leaderboard.ranked's ranks, ties included (intervals that overlap:
    1.20 [1.10-1.30], 1.25 [1.15-1.40] and 1.28 [1.05-1.50] share third place)."""
    out, public, _ = published
    rows, _ = store.checked_rows(out)
    expected = [str(rank) for rank, _ in leaderboard.ranked(rows) if rank is not None]
    assert expected == ["1", "2", "3", "3", "3", "6"]
    ranks = [cells[0] for cells in page_tables(public)["leaderboard"][1:]]
    assert ranks[:6] == expected
    with open(public / publish.TABLE, newline="") as f:
        assert [r["rank"] for r in csv.DictReader(f)][:6] == expected


def test_no_alias_uses_a_real_name_or_id_from_the_manifest(tmp_path):
    """Folders made by `lab collect` are ascii names with ids; the manifest beside the rows holds the
    real names: an alias.txt naming a classmate's real name or id is refused all the same."""
    import csv as csv_module

    from harness.lab.term.intake import collect

    out = lab_rows.graded(tmp_path / "out", rows()[:2])
    with open(out / collect.MANIFEST, "w", newline="", encoding="utf-8") as f:
        writer = csv_module.DictWriter(f, fieldnames=collect.FIELDS)
        writer.writeheader()
        writer.writerow({"folder": "zoe-quill-4417", "student_id": "4417", "name": "Zoë Quill-Ortega"})
    assert alias.known_names(out) == ["Zoë Quill-Ortega", "4417", "zoe-quill-4417"]  # and the folder
    submissions = tmp_path / "subs"
    for student, choice in [("first", "Ortega Rocket"), ("second", "Team 4417")]:
        (submissions / student).mkdir(parents=True)
        (submissions / student / alias.FILE).write_text(choice + "\n")
    assigned = alias.assign(out, ["first", "second"], submissions)
    assert [assigned[s].refused for s in ("first", "second")] == ["it contains a student's name"] * 2
    assert all(not a.chosen and a.alias == alias.tag(out, s) for s, a in assigned.items())


# A class as `lab collect` writes it from a Canvas zip (names run together, "Last, First" squashed:
# lib/content_zipper.rb) and from Moodle (full names), with each student's alias.txt: the refused
# ones name a classmate in some form; the innocent ones name nobody.
MANIFEST = [("quillfeatherzyxwanda-1001", "1001", "quillfeatherzyxwanda"),
            ("smithann-1002", "1002", "smithann"),
            ("chidi-okafor-503", "503", "Okafor, Chidi"),
            ("zoe-obrien-504", "504", "Zoë O'Brien")]
NAMING = {"x901": "Wanda Speed",  # a first name: the end of a run-together name
          "x902": "Quill Power",  # a last name: its start
          "x903": "Featherweight",  # five letters of it, anywhere
          "x904": "W4nda",  # look-alikes: 4 for a
          "x905": "Sm1th Squad",  # 1 for i
          "x906": "Z0e Rocks",  # 0 for o, and an accent dropped
          "x907": "Chidi Okafor",  # "Last, First" turned round
          "x908": "0kaf0r",
          "x909": "Team 1OO1",  # an id in letters that look like its digits
          "x910": "Ann"}
INNOCENT = {"x911": "Night Owl", "x912": "Blue Comet", "x913": "Kernel Panic", "x914": "Speedy Gonzales",
            "x915": "Fast Lane 5"}  # folder names that name nobody: the check is the manifest's


def test_an_alias_naming_a_classmate_in_any_form_is_refused_and_innocent_ones_pass(tmp_path):
    from harness.lab.term.intake import collect

    students = sorted(NAMING) + sorted(INNOCENT)
    out = lab_rows.graded(tmp_path / "out", [lab_rows.ok_row(s, 1.0 + i / 10, 0.9 + i / 10, 1.05 + i / 10, 40)
                                              for i, s in enumerate(students)])
    with open(out / collect.MANIFEST, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=collect.FIELDS)
        writer.writeheader()
        writer.writerows({"folder": folder, "student_id": sid, "name": name} for folder, sid, name in MANIFEST)
    submissions = tmp_path / "subs"
    for student, choice in {**NAMING, **INNOCENT}.items():
        (submissions / student).mkdir(parents=True)
        (submissions / student / alias.FILE).write_text(choice + "\n")
    assigned = alias.assign(out, students, submissions)
    assert {s: assigned[s].refused for s in NAMING} == dict.fromkeys(NAMING, "it contains a student's name")
    assert {s: assigned[s].alias for s in INNOCENT} == INNOCENT


def test_look_alikes_fold_to_one():
    from harness.lab.term.public import names

    assert names.fold("Ｗａｎｄａ") == names.fold("wanda") == "wanda"  # full width (NFKC)
    assert names.fold("Zoë Ørsted") == "zoe orsted" and names.fold("1Il|") == "llll"
    assert names.fold("Аnna") == "anna"  # a Cyrillic А
    assert names.fold("rnarcus vvu") == "marcus wu"
    assert names.named("Wanda", ["quillfeatherzyxwanda"]) == "quillfeatherzyxwanda"
    assert names.named("Bat Man", ["s2093847", "quillfeatherzyxwanda"]) is None  # an id's digits are no name
    assert names.named("Hal9000", ["patelhal"]) == "patelhal"  # letters and digits apart


def test_lab_publish_reads_the_submissions_folder_lab_grade_recorded(published, tmp_path, capsys):
    """`lab publish OUT PUB` as staff first type it: the aliases, from the folder in OUT/grading.json."""
    from harness import cli

    out, _, _ = published
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    assert cli.main(["lab", "publish", str(copy), str(tmp_path / "site")]) == 2
    assert "records no submissions folder" in capsys.readouterr().err and not (tmp_path / "site").exists()
    store.write_grading(copy, out.parent / "submissions", tmp_path / "weights.h5")
    assert cli.main(["lab", "publish", str(copy), str(tmp_path / "site")]) == 0
    assert "Speedy Gonzales" in (tmp_path / "site" / publish.PAGE).read_text()
    assert cli.main(["lab", "publish", str(copy), str(tmp_path / "site"), "--submissions",
                     str(tmp_path / "none")]) == 2
    assert "--submissions" in capsys.readouterr().err
