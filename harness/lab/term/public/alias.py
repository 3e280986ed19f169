"""Pseudonyms for the public leaderboard: the one a student chose (`alias.txt` in its submission
folder, checked) or else a tag derived from the grader's key, stable across regrades into the same
OUT and not reversible without the key (an HMAC, not a hash of the name).

    OUT/private/aliases.json    {student: {"alias", "chosen", "refused"}}: staff only

    assign(out, students, submissions) -> {student: Alias}; tag(out, student), read_choice(folder),
    refusal(text, names) (a name in any form: harness.lab.term.public.names), name_parts(name),
    known_names(out) (the manifest's real names, ids and folder names);
    write(out, aliases), refusal_lines(out, student) (for the feedback; lines_for(saved) from one entry),
    note_feedback(out, aliases)
"""

import base64
import dataclasses
import hashlib
import hmac
import os
import re
import stat
from pathlib import Path

from harness.lab.judge import store
from harness.lab.term.intake import collect
from harness.lab.term.public import names
from harness.lab.text import safe_id

FILE = "alias.txt"
PRIVATE = "private"
SAVED = "aliases.json"
MIN_LEN, MAX_LEN = 3, 24
ALLOWED = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]*")  # no markup, quotes, slashes or control characters
TAG_PREFIX = "anon-"
NAME_PART = 3  # a folder name's parts this long or longer may not appear in an alias


@dataclasses.dataclass(frozen=True)
class Alias:
    alias: str  # what the public page shows
    chosen: bool  # the student's own alias.txt (else the tag)
    refused: str | None = None  # why its alias.txt was not used


def tag(out: Path, student: str) -> str:
    """anon-xxxxxxx: HMAC-SHA256 of the student's folder name under OUT's grader key."""
    key = (Path(out) / store.KEY).read_bytes()
    digest = hmac.new(key, f"pseudonym:{student}".encode(), hashlib.sha256).digest()
    return TAG_PREFIX + base64.b32encode(digest[:5]).decode().lower()


def read_choice(folder: Path) -> str | None:
    """The first line of folder/alias.txt: a regular file only (never a link out of the folder),
    at most 4 KiB read; None when there is none, "" (refused as empty) when it is not a file."""
    path = Path(folder) / FILE
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return ""  # a link, a pipe, a device: refused as empty, never opened
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError:
        return ""  # replaced by a link or made unreadable since
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return ""
        raw = f.read(4096)
    text = raw.decode("utf-8", errors="replace")
    return text.splitlines()[0].strip() if text.strip() else ""


def name_parts(name: str) -> set[str]:
    """A folder name and its parts (ann_lee -> ann_lee, ann, lee), lowercased."""
    parts = {p for p in re.split(r"[^a-z0-9]+", name.lower()) if len(p) >= NAME_PART}
    return parts | {name.lower()}


def refusal(text: str, known: list[str]) -> str | None:
    """Why an alias cannot be published (None: it can). `known`: every student's folder name (its
    own too: an alias may not say who it is) and every name and id the LMS gave (known_names),
    each in every form and look-alike (names.named)."""
    if not text:
        return "it is empty"
    if len(text) < MIN_LEN or len(text) > MAX_LEN:
        return f"it has {len(text)} characters (allowed: {MIN_LEN} to {MAX_LEN})"
    if not ALLOWED.fullmatch(text):
        return "only letters, digits, spaces, '.', '_' and '-' are allowed (no markup or symbols)"
    if text.lower().startswith(TAG_PREFIX):
        return f"aliases starting with '{TAG_PREFIX}' are the grader's own tags"
    if names.named(text, known) is not None:
        return "it contains a student's name"
    return None


def assign(out: Path, students: list[str], submissions: Path | None) -> dict[str, Alias]:
    """Every student's public name. An alias.txt that is refused, or chosen by two students,
    falls back to the tag (the refusal is kept, for its feedback)."""
    wanted: dict[str, str | None] = {}
    for student in students:
        wanted[student] = read_choice(Path(submissions) / student) if submissions else None
    taken: dict[str, int] = {}
    for text in wanted.values():
        if text:
            taken[text.lower()] = taken.get(text.lower(), 0) + 1
    known = students + known_names(out)
    aliases = {}
    for student, text in wanted.items():
        why = None if text is None else refusal(text, known)
        if why is None and text is not None and taken[text.lower()] > 1:
            why = "another student chose the same alias"
        chosen = text is not None and why is None
        aliases[student] = Alias(text if chosen and text else tag(out, student), chosen, why)
    return aliases


def known_names(out: Path) -> list[str]:
    """The real names, ids and folder names `lab collect`'s manifest (OUT/manifest.csv) holds: no
    alias may use them (a Canvas name is run together: harness.lab.term.public.names reads it in every
    form)."""
    rows = collect.graded_manifest(out).values()
    return [value for row in rows for value in (row["name"], row["student_id"], row["folder"]) if value]


def write(out: Path, aliases: dict[str, Alias]) -> Path:
    path = Path(out) / PRIVATE / SAVED
    path.parent.mkdir(mode=0o700, exist_ok=True)
    store.write_json(path, {s: dataclasses.asdict(a) for s, a in sorted(aliases.items())})
    return path


def refusal_lines(out: Path, student: str) -> list[str]:
    """The feedback's lines about a refused alias.txt (none when it was used, or absent)."""
    everyone = store.read_json(Path(out) / PRIVATE / SAVED)
    return lines_for(everyone.get(student) if isinstance(everyone, dict) else None)


def lines_for(saved: object) -> list[str]:
    """refusal_lines from one student's saved entry ({"alias", "chosen", "refused"})."""
    if not isinstance(saved, dict) or not saved.get("refused"):
        return []
    return ["", f"Your {FILE} was not used on the public page: {saved['refused']}. The page shows you "
                f"as `{saved.get('alias')}`; fix {FILE} ({MIN_LEN} to {MAX_LEN} letters, digits, spaces, "
                "'.', '_' or '-'; not a name) and hand it in again to choose your own."]


def note_feedback(out: Path, aliases: dict[str, Alias]) -> None:
    """Add the refusal to each refused student's existing feedback (`lab report` writes it there too)."""
    for student, alias in aliases.items():
        lines = lines_for(dataclasses.asdict(alias))
        path = Path(out) / "feedback" / f"{safe_id(student)}.md"
        if not lines or not path.is_file():
            continue
        feedback = path.read_text()
        if lines[1] not in feedback:
            path.write_text(feedback.rstrip("\n") + "\n" + "\n".join(lines) + "\n")
