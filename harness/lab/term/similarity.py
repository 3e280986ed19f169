"""`lab similarity OUT [--submissions DIR]`: pairwise code similarity of a class's submissions, for
staff. copydetect (winnowed fingerprints of the token stream, MOSS's method) with names, strings and
comments normalised, so renamed variables and reordered functions still match; the lab's starter's
fingerprints are removed as boilerplate, so two honest solutions that both follow it do not.

    OUT/private/similarity.csv              pairs at or over the threshold: score, matched lines
    OUT/private/similarity/<a>--<b>.html    a side-by-side view of each flagged pair
    OUT/private/similarity-skipped.txt      files left out (binary, huge, links), named

A submission is its code files (files.SOURCES: *.py, *.cu, *.cuh) in one document, capped: at most
MAX_CODE_FILES files and MAX_CODE bytes, taken in order of need (the lab's module, the files it
imports, then the rest: files.in_order), so that one student's 16 MB of generated code cannot make a
class of 150 take minutes and gigabytes; what the caps leave out is named (similarity-skipped.txt, the
command's output, and a flagged pair's `note`). The folder is walked as the grader walks it
(files.listing: bounded, no link followed). The score of a pair is the larger of the two shares of
fingerprinted code found in the other (a small file copied into a larger one counts).

Folder and file names may be any bytes (a name that is not UTF-8 included): they are shown through
text.clean (text.csv_cell in the CSV, whose id_a and id_b are text.safe_id's), never verbatim.

    Pair                                    a flagged pair
    run(out, submissions, lab, threshold, starter, report) -> (pairs, skipped); class_code(...),
    code_of(folder, module) -> (Code, skipped), read_code(path, room), is_binary(path)
    segments(text, slices), side_by_side(pair, codes, slices, path) (templates/similarity_pair.html.j2),
    write_csv(pairs, path), flagged(out, students) (LEADERBOARD.md's column)
Code, its document and its fingerprints: harness.lab.term.fingerprints.
"""

import csv
import dataclasses
import itertools
import os
import stat
from collections.abc import Callable
from pathlib import Path

from harness.lab import text
from harness.lab.judge import files, store
from harness.lab.judge.rules import assignment
from harness.lab.term.fingerprints import Code, document, fingerprint, line_ranges

THRESHOLD = 0.5  # the shipped examples' honest pairs score 0.0; copies 0.8-1.0
MAX_CODE = 256 << 10  # bytes of code compared per submission (a lab's hand-written code: 5-50 KiB)
MAX_CODE_FILES = 50  # code files compared per submission
PEEK = 8192  # bytes read of a file that is not code, to name it when it is binary
FIELDS = ["student_a", "student_b", "score", "share_a", "share_b", "lines_a", "lines_b", "view",
          "id_a", "id_b", "note"]
PRIVATE = "private"


@dataclasses.dataclass(frozen=True)
class Pair:
    a: str
    b: str
    score: float
    share_a: float
    share_b: float
    lines_a: str  # "lenet.py:12-30 lenet.py:41-44"
    lines_b: str
    view: str  # the side-by-side page, relative to OUT/private
    note: str = ""  # what the caps left out of either side


def read_code(path: Path, room: int = MAX_CODE) -> str | bytes | None:
    """A regular file's text; None for binary (a NUL byte, or not UTF-8); its first bytes when it is
    longer than `room` (the caller leaves it out). Links are never opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        raw = f.read(room + 1)
    if len(raw) > room:
        return raw
    if b"\0" in raw:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def is_binary(path: Path) -> bool:
    """A NUL byte in the first PEEK bytes (a link or a file gone since the listing: not read, not named)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        return stat.S_ISREG(os.fstat(f.fileno()).st_mode) and b"\0" in f.read(PEEK)


def code_of(folder: Path, module: str = "lenet.py") -> tuple[Code, list[str]]:
    """(the submission's code, what was skipped and why): its code files in order of need until
    MAX_CODE_FILES files or MAX_CODE bytes (in name order in the document)."""
    folder = Path(folder)
    found, skipped = files.listing(folder)
    chosen: list[tuple[str, str]] = []  # (name, code): two names may clean alike, neither is lost
    capped: list[str] = []
    room = MAX_CODE
    for rel in files.in_order(folder, sorted(found), module):
        name, path = text.clean(rel), folder / rel
        if rel.suffix not in files.SOURCES:
            if is_binary(path):  # other text files (alias.txt, notes) are not named
                skipped.append(f"{name}: binary")
            continue
        if len(chosen) >= MAX_CODE_FILES:
            capped.append(name)
            skipped.append(
                f"{name}: past the cap of {MAX_CODE_FILES} code files per submission; not compared")
            continue
        try:
            code = read_code(path, room) if path.lstat().st_size <= room else b""
        except OSError as exc:  # a link put there since the listing, or gone
            skipped.append(f"{name}: not read ({exc.strerror})")
            continue
        if isinstance(code, bytes):  # longer than the room left: not read
            capped.append(name)
            skipped.append(f"{name}: {path.lstat().st_size} bytes, over {MAX_CODE >> 10} KiB of code per "
                           f"submission with the {len(chosen)} file(s) before it; not compared")
        elif code is None:
            skipped.append(f"{name}: binary")
        else:
            chosen.append((name, code))
            room -= len(code.encode())
    return document(chosen, tuple(capped)), [text.clean(entry) for entry in skipped]


def run(out: Path, submissions: Path, lab: assignment.Lab, threshold: float = THRESHOLD,
        starter: Path | None = None, report: Callable[[str], None] = print) -> tuple[list[Pair], list[str]]:
    """Every pair of the class compared; the flagged ones written with their side-by-side views."""
    from copydetect import compare_files

    names = store.listed_students(out) or store.students(submissions, lab.module)
    template, _ = code_of(starter or lab.starter, lab.module)
    boilerplate = fingerprint(template, set()).hashes
    codes, skipped = class_code(Path(submissions), names, lab.module, report)
    prints = {name: fingerprint(codes[name], boilerplate) for name in names}
    pairs = []
    for a, b in itertools.combinations(names, 2):
        _, shares, slices = compare_files(prints[a], prints[b])
        if max(shares) >= threshold:
            view = f"similarity/{text.safe_id(a)}--{text.safe_id(b)}.html"  # names: never verbatim
            note = "; ".join(f"{text.clean(n)}: {len(codes[n].capped)} code file(s) over the caps, "
                             "not compared" for n in (a, b) if codes[n].capped)
            pairs.append(Pair(a, b, round(float(max(shares)), 3), round(float(shares[0]), 3),
                              round(float(shares[1]), 3), line_ranges(codes[a], slices[0]),
                              line_ranges(codes[b], slices[1]), view, note))
            side_by_side(pairs[-1], codes, slices, Path(out) / PRIVATE / view)
    pairs.sort(key=lambda p: -p.score)
    write_csv(pairs, Path(out) / PRIVATE / "similarity.csv")
    (Path(out) / PRIVATE / "similarity-skipped.txt").write_text("".join(f"{s}\n" for s in skipped),
                                                                encoding="utf-8")
    report(f"{len(names)} submissions, {len(pairs)} pair(s) at or over {threshold:g}: "
           f"{Path(out) / PRIVATE / 'similarity.csv'}")
    return pairs, skipped


def class_code(submissions: Path, names: list[str], module: str,
               report: Callable[[str], None]) -> tuple[dict[str, Code], list[str]]:
    """({student: Code}, what was skipped, as "student/entry"); each skipped entry and each capped
    student said through `report`."""
    codes, skipped = {}, []
    for name in names:
        folder = submissions / name
        codes[name], left_out = code_of(folder, module) if folder.is_dir() else \
            (Code("", ()), [f"no folder {text.clean(name)} in {text.clean(submissions)}"])
        skipped += [f"{text.clean(name)}/{entry}" for entry in left_out]
        if codes[name].capped:
            report(f"{text.clean(name)}: capped at {MAX_CODE_FILES} code files and {MAX_CODE >> 10} KiB: "
                   f"{len(codes[name].capped)} code file(s) not compared (similarity-skipped.txt names them)")
    for entry in skipped:
        report(f"skipped: {entry}")
    return codes, skipped


def segments(text: str, slices: object) -> list[tuple[str, bool]]:
    """The document cut into (text, matched?) pieces, for the template to escape and mark."""
    from copydetect.utils import highlight_overlap

    marked, _ = highlight_overlap(text.replace("\x01", " "), slices, "\x00", "\x01")
    pieces = []
    for i, chunk in enumerate(marked.split("\x00")):
        matched, _, rest = chunk.partition("\x01") if i else ("", "", chunk)
        pieces += [(matched, True), (rest, False)]
    return [(piece, matched) for piece, matched in pieces if piece]


def side_by_side(pair: Pair, codes: dict[str, Code], slices: tuple, path: Path) -> Path:
    """The pair's page: names through text.clean (then the template's HTML escaping), code escaped."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    both = ((pair.a, pair.share_a, slices[0]), (pair.b, pair.share_b, slices[1]))
    sides = [{"name": text.clean(name), "share": share, "pieces": segments(codes[name].text, doc_slices)}
             for name, share, doc_slices in both]
    shown = dataclasses.replace(pair, a=text.clean(pair.a), b=text.clean(pair.b))
    path.parent.mkdir(parents=True, exist_ok=True)
    page = env.get_template("similarity_pair.html.j2").render(pair=shown, sides=sides)
    path.write_text(page, encoding="utf-8")
    return path


def write_csv(pairs: list[Pair], path: Path) -> Path:
    """similarity.csv: every text cell through text.csv_value (names, matched lines), scores as numbers."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        writer.writerows(text.csv_row({"student_a": p.a, "student_b": p.b, "id_a": text.safe_id(p.a),
                                       "id_b": text.safe_id(p.b), **{k: getattr(p, k) for k in FIELDS[2:8]},
                                       "note": p.note}) for p in pairs)
    return path


def flagged(out: Path, students: list[str]) -> dict[str, list[tuple[str, float]]] | None:
    """{student: [(the other, score), ...]} from OUT/private/similarity.csv, its rows matched to
    `students` by their ids (the CSV holds names neutralised, not as they are); None without one."""
    path = Path(out) / PRIVATE / "similarity.csv"
    if not path.is_file():
        return None
    by_id = {text.csv_cell(text.safe_id(s)): s for s in students}
    found: dict[str, list[tuple[str, float]]] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            a, b = by_id.get(row.get("id_a") or ""), by_id.get(row.get("id_b") or "")
            if a is None or b is None:
                continue  # a student no longer in the grading, or a file of an older version
            for me, other in ((a, b), (b, a)):
                found.setdefault(me, []).append((other, float(row["score"])))
    return found
