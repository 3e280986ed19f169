"""One student's hand-in as collect reads it, from an LMS zip (harness.lab.term.intake.collect) or a git clone
(harness.lab.term.intake.clones), and the folder it goes to.

    Submission                          the files (relative path -> bytes) and what the LMS said;
                                        .refuse(why): this hand-in alone refused (no files written)
    folder_name(name, student_id)       `ascii-name-ID`: a safe file name, link and CSV field
    MAX_BYTES, MAX_STUDENT_BYTES        what a whole collection, and one student, may expand to
"""

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field

from harness.lab.judge import files

MAX_BYTES = 512 << 20  # everything an archive (or the clones) may expand to
MAX_STUDENT_BYTES = files.MAX_BYTES  # one student's files: the grader's own cap


@dataclass
class Submission:
    """One student's hand-in: the files (relative path -> bytes) and what the LMS said of them."""

    student_id: str
    name: str
    source: str  # canvas, moodle, git
    submitted_at: str = ""  # ISO 8601
    late: str = ""  # "yes" where the LMS flagged it late
    time_source: str = ""  # lms-export, lms-late-flag, git-commit, none
    files: dict[str, bytes] = field(default_factory=dict)
    note: str = ""
    refused: str = ""  # why this hand-in was refused (then it has no files, and no folder is written)

    def refuse(self, why: str) -> None:
        """This hand-in alone refused: its files dropped, the reason kept for its manifest row."""
        self.files.clear()
        self.refused = self.refused or why

    @property
    def folder(self) -> str:
        return folder_name(self.name, self.student_id)


def folder_name(name: str, student_id: str) -> str:
    """`ascii-name-ID`: accents folded, quotes dropped, anything else not [a-z0-9] a hyphen; a long
    id is cut and its hash added (a folder name stays short)."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    ascii_name = re.sub(r"['\"`’]", "", ascii_name)
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name).strip("-")[:40].strip("-") or "student"
    ident = re.sub(r"[^A-Za-z0-9]+", "-", student_id).strip("-")
    if len(ident) > 40:
        ident = f"{ident[:27]}-{hashlib.sha256(student_id.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"
    return slug if not ident or slug == ident.lower() else f"{slug}-{ident}"


