"""Moodle's feedback-files zip: each graded student's feedback page (OUT/feedback/<id>.md and its
histogram) in one folder per participant, as the assignment's "Upload multiple feedback files in a
zip" reads it (`lab export --format moodle` writes it beside the worksheet).

The format is Moodle's own, read from its source, mod/assign/feedback/file/importziplib.php
(assignfeedback_file_zip_importer::is_valid_filename_for_import): each path part of an entry is split
at its first four underscores; a part of at least four pieces whose second is a participant id of the
assignment and whose third and fourth name a plugin of it (type, name) is the participant's folder,
and what follows it is the file's name. Entries whose name starts with "." or "~" are ignored. The
folder written here is Moodle's own download's: "Full name_<participant id>_assignsubmission_file"
(Moodle >= 4.1; older versions add a trailing "_", which the importer reads the same), the full name
with its underscores made spaces, as the download does, so that the id is always the second piece.
A feedback file whose name and bytes equal a file of the submission is skipped by the importer
(is_file_modified): the pages are named <id>.md and <id>.png, never lenet.py.

    folder(full_name, participant) -> the folder's name; importer_match(path) -> (participant, file)
    page(out, student), stale(out, students) (pages older than their rows), sources(out, student) -> the
    files of one student's feedback; write(target, students) -> the zip
"""

import os
import re
import zipfile
from pathlib import Path

from harness.errors import HarnessError
from harness.lab import text
from harness.lab.judge import store

PLUGIN = "assignsubmission_file"  # the plugin the download names its folders after


def folder(full_name: str, participant: str) -> str:
    """The participant's folder: its full name (underscores, slashes and control characters made
    spaces; "participant" when nothing is left), its id, the plugin."""
    if not participant.isdigit():
        raise HarnessError(f"Moodle participant id {participant!r}: expected digits (the worksheet's "
                           "Identifier, 'Participant N')")
    name = re.sub(r"[_/\\\x00-\x1f\x7f]+", " ", full_name).strip(" .~") or "participant"
    return f"{name[:100]}_{participant}_{PLUGIN}"


def importer_match(path: str) -> tuple[str, str] | None:
    """(participant id, the feedback file's name) as Moodle's importer reads an entry's path; None
    where it would skip it (is_valid_filename_for_import, without the check of the plugin's type)."""
    base = path.rsplit("/", 1)[-1]
    if not base or base.startswith((".", "~")):
        return None
    parts = path.split("/")
    while parts:
        info = parts.pop(0).split("_", 4)  # PHP explode('_', $pathpart, 5)
        if len(info) < 4 or not info[1].isdigit() or f"{info[2]}_{info[3]}" != PLUGIN:
            continue
        return info[1], "/".join([info[4] if len(info) == 5 else "", *parts])
    return None


def page(out: Path, student: str) -> Path:
    return Path(out) / "feedback" / f"{text.safe_id(student)}.md"


def stale(out: Path, students: list[str]) -> list[str]:
    """The students whose feedback page is missing or older than their row (`lab report` rebuilds it)."""
    found = []
    for student in students:
        path, row = page(out, student), store.result_dir(out, student) / "row.json"
        if not path.is_file() or (row.is_file() and path.stat().st_mtime < row.stat().st_mtime):
            found.append(student)
    return found


def sources(out: Path, student: str) -> list[Path]:
    """The student's feedback page and its histogram."""
    path = page(out, student)
    if not path.is_file():
        raise HarnessError(f"{path}: no feedback page for {student}; rebuild them (python -m harness lab "
                           f"report {out})")
    picture = path.with_suffix(".png")
    return [path] + ([picture] if picture.is_file() else [])


def write(target: Path, students: list[tuple[str, str, list[Path]]]) -> Path:
    """The zip of (full name, participant id, files) folders, whole or not at all."""
    partial = target.with_name(target.name + ".part")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for full_name, participant, files in students:
            for path in files:
                archive.write(path, f"{folder(full_name, participant)}/{path.name}")
    os.replace(partial, target)
    return target
