"""`lab similarity OUT --submissions DIR`: pairwise code similarity of a class's submissions, for
staff. copydetect (winnowed fingerprints of the token stream, MOSS's method) with names, strings and
comments normalised, so renamed variables and reordered functions still match; the lab's starter's
fingerprints are removed as boilerplate, so two honest solutions that both follow it do not.

    OUT/private/similarity.csv              pairs at or over the threshold: score, matched lines
    OUT/private/similarity/<a>--<b>.html    a side-by-side view of each flagged pair
    OUT/private/similarity-skipped.txt      files left out (binary, huge, links), named

A submission is all its code files (files.SOURCES: *.py, *.cu, *.cuh) in one document. The score of
a pair is the larger of the two shares of fingerprinted code found in the other (a small file copied
into a larger one counts).

    Code, Prints, Pair                      a submission's code, its fingerprints, a flagged pair
    run(out, submissions, lab, threshold, starter, report) -> (pairs, skipped); code_of(folder),
    read_code(path), fingerprint(code, boilerplate), stable_kgrams(text, k),
    line_ranges(code, slices), segments(text, slices), side_by_side(pair, codes, slices, path)
    (templates/similarity_pair.html.j2), write_csv(pairs, path), flagged(out) (LEADERBOARD.md's column)
"""

import csv
import dataclasses
import hashlib
import itertools
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.lab import assignment, files, store, text

K, WINDOW = 25, 6  # copydetect's defaults: 25-character k-grams, a match of 30 is always seen
THRESHOLD = 0.5  # the shipped examples' honest pairs score 0.0; copies 0.8-1.0
MAX_FILE = 256 << 10  # a larger "source" file is data, not code written by hand
FIELDS = ["student_a", "student_b", "score", "share_a", "share_b", "lines_a", "lines_b", "view"]
PRIVATE = "private"


@dataclasses.dataclass(frozen=True)
class Code:
    text: str  # every code file, each after a "# file: NAME" line
    starts: tuple[tuple[int, str], ...]  # (line where the file starts, its name)


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


def read_code(path: Path) -> str | None:
    """A regular file's text; None for binary (a NUL byte, or not UTF-8). Links are never opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        raw = f.read(MAX_FILE + 1)
    if b"\0" in raw:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def code_of(folder: Path) -> tuple[Code, list[str]]:
    """(the submission's code, what was skipped and why)."""
    parts, starts, skipped, line = [], [], [], 1
    for path in sorted(Path(folder).rglob("*")):
        rel = str(path.relative_to(folder))
        mode = path.lstat().st_mode
        if "__pycache__" in path.parts or stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            skipped.append(f"{rel}: not a regular file")
        elif path.stat().st_size > MAX_FILE:
            skipped.append(f"{rel}: {path.stat().st_size} bytes (over {MAX_FILE >> 10} KiB)")
        elif path.suffix in files.SOURCES:
            text = read_code(path)
            if text is None:
                skipped.append(f"{rel}: binary")
                continue
            starts.append((line, rel))
            parts.append(f"# file: {rel}\n{text.rstrip()}\n")
            line += parts[-1].count("\n")
        elif b"\0" in path.read_bytes()[:8192]:  # other text files (alias.txt, notes) are not named
            skipped.append(f"{rel}: binary")
    return Code("".join(parts), tuple(starts)), skipped


@dataclasses.dataclass(frozen=True)
class Prints:
    """A document's winnowed fingerprints: the attributes copydetect.compare_files reads of its own
    CodeFingerprint, made here with a stable hash (copydetect hashes k-grams with Python's hash(),
    which changes with every process: scores would move from run to run)."""

    filtered_code: str
    offsets: object  # (M, 2) array: characters removed by filtering, for mapping back to the text
    hashes: set[int]
    hash_idx: dict[int, list[int]]
    k: int
    token_coverage: float


def stable_kgrams(text: str, k: int) -> Any:  # an int64 array, one hash per k-gram
    import numpy as np

    return np.array([int.from_bytes(hashlib.blake2b(text[i:i + k].encode(), digest_size=8).digest(), "little",
                                    signed=True) for i in range(len(text) - k + 1)], dtype=np.int64)


def fingerprint(code: Code, boilerplate: set[int]) -> Prints:
    """Tokens with names, strings and comments normalised (copydetect's Python filter; a .cu file
    reads close enough to it), 25-grams hashed, winnowed, the starter's fingerprints removed."""
    import numpy as np
    from copydetect import utils

    filtered, offsets = utils.filter_code(code.text, "code.py")
    grams = stable_kgrams(filtered, K)
    hashes, idx = utils.winnow(grams, WINDOW, remove_duplicates=False) if len(grams) else (grams, grams)
    where: dict[int, list[int]] = {}
    for value, at in zip(np.asarray(hashes).tolist(), np.asarray(idx).tolist(), strict=True):
        if value not in boilerplate:
            where.setdefault(value, []).append(at)
    coverage = float(utils.get_token_coverage(where, K, len(filtered)))
    return Prints(filtered, offsets, set(where), where, K, coverage)


def line_ranges(code: Code, slices: object) -> str:
    """Character slices of the document -> "file:first-last" per matched stretch (touching
    stretches of one file merged)."""
    import numpy as np

    found: list[list] = []  # [file, first, last], lines counted in that file
    for start, end in sorted(np.asarray(slices, dtype=np.int64).T.tolist()):
        first, last = code.text.count("\n", 0, start) + 1, code.text.count("\n", 0, max(end - 1, start)) + 1
        file_start, name = max(((s, n) for s, n in code.starts if s <= first), default=(0, "?"))
        first, last = first - file_start, last - file_start
        if found and found[-1][0] == name and first <= found[-1][2] + 1:
            found[-1][2] = max(found[-1][2], last)
        else:
            found.append([name, first, last])
    return " ".join(f"{name}:{first}-{last}" for name, first, last in found)


def run(out: Path, submissions: Path, lab: assignment.Lab, threshold: float = THRESHOLD,
        starter: Path | None = None, report: Callable[[str], None] = print) -> tuple[list[Pair], list[str]]:
    """Every pair of the class compared; the flagged ones written with their side-by-side views."""
    from copydetect import compare_files

    names = store.listed_students(out) or store.students(submissions, lab.module)
    template, _ = code_of(starter or lab.starter)
    boilerplate = fingerprint(template, set()).hashes
    codes, prints, skipped = {}, {}, []
    for name in names:
        codes[name], left_out = code_of(Path(submissions) / name) if (Path(submissions) / name).is_dir() \
            else (Code("", ()), [f"no folder {name} in {submissions}"])
        skipped += [f"{name}/{entry}" for entry in left_out]
        prints[name] = fingerprint(codes[name], boilerplate)
    pairs = []
    for a, b in itertools.combinations(names, 2):
        _, shares, slices = compare_files(prints[a], prints[b])
        if max(shares) >= threshold:
            view = f"similarity/{text.safe_id(a)}--{text.safe_id(b)}.html"  # names: never verbatim
            pairs.append(Pair(a, b, round(float(max(shares)), 3), round(float(shares[0]), 3),
                              round(float(shares[1]), 3), line_ranges(codes[a], slices[0]),
                              line_ranges(codes[b], slices[1]), view))
            side_by_side(pairs[-1], codes, slices, Path(out) / PRIVATE / view)
    pairs.sort(key=lambda p: -p.score)
    write_csv(pairs, Path(out) / PRIVATE / "similarity.csv")
    (Path(out) / PRIVATE / "similarity-skipped.txt").write_text("".join(f"{s}\n" for s in skipped))
    for entry in skipped:
        report(f"skipped: {entry}")
    report(f"{len(names)} submissions, {len(pairs)} pair(s) at or over {threshold:g}: "
           f"{Path(out) / PRIVATE / 'similarity.csv'}")
    return pairs, skipped


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
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    both = ((pair.a, pair.share_a, slices[0]), (pair.b, pair.share_b, slices[1]))
    sides = [{"name": name, "share": share, "pieces": segments(codes[name].text, doc_slices)}
             for name, share, doc_slices in both]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(env.get_template("similarity_pair.html.j2").render(pair=pair, sides=sides))
    return path


def write_csv(pairs: list[Pair], path: Path) -> Path:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        writer.writerows({"student_a": p.a, "student_b": p.b, **{k: getattr(p, k) for k in FIELDS[2:]}}
                         for p in pairs)
    return path


def flagged(out: Path) -> dict[str, list[tuple[str, float]]] | None:
    """{student: [(the other, score), ...]} from OUT/private/similarity.csv; None without one."""
    path = Path(out) / PRIVATE / "similarity.csv"
    if not path.is_file():
        return None
    found: dict[str, list[tuple[str, float]]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            for me, other in ((row["student_a"], row["student_b"]), (row["student_b"], row["student_a"])):
                found.setdefault(me, []).append((other, float(row["score"])))
    return found
