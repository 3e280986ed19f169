"""How each LMS names the files of its bulk download, read from its source, parsed so that an
entry can only ever land in the folder of the student whose hand-in it is.

Canvas, "Download Submissions" (instructure/canvas-lms lib/content_zipper.rb: get_filename,
sanitize_user_name, sanitize_file_name, add_upload_submission, sanitize_attachment_filename):

    <name>[_LATE]_<user id>_<attachment id>_<display name>        one entry per file handed in
    <name>[_LATE]_<user id>_text.html | _link.html                online text, a URL (no files)

    name          the sortable name ("O_Neil, Ben") with each `_<digits>_` made its digits, lowercased,
                  then everything but [[:word:]] dropped: letters, marks, digits and connector
                  punctuation stay, `_` included ("o_neilben"); folding can leave `_1_2_` in a name
    LATE          submission.late? (Canvas's own flag, against the student's own due date)
    user id       the student (anon_<5 base58> in an anonymous assignment)
    attachment id the file's: a hand-in of two files is two entries with one user id
    display name  the file's name, runs of NUL / \\ : * ? " < > | made `_`; a student may put `_1_2_`
                  in it. A file renamed because the student's folder held one of that name is
                  `lenet-1.py` (Attachment.make_unique_filename): the suffix is dropped.

Moodle, "Download all submissions" (moodle/moodle mod/assign/classes/downloader.php:
get_student_prefix, load_submissionplugin_filelist; mod/assign/locallib.php before 4.1):

    <full name>_<participant id>_assignsubmission_<plugin>[_]/<path>    (as folders: the default)
    <full name>_<participant id>_assignsubmission_<plugin>_<file name>  (flat)

    full name     every `_` made a space, then clean_filename (PARAM_FILE): no `_`, no `/`
    participant   get_uniqueid_for_user: the grading worksheet's "Participant <id>"

An entry is placed only where exactly one reading of it fits these rules. A student can make their
own name or file name hold a second `_<id>_<id>_` (or `_<id>_assignsubmission_file_`); such an
entry is left out and said, never guessed into a classmate's folder. A folder entry is read from its
end (the folder's last `_<id>_assignsubmission_<plugin>`), where only the LMS writes.

    Entry, parse(path) -> (Entry | None, why left out), canvas(path), moodle(path), canvas_name(text),
    word(char)
"""

import re
import unicodedata
from dataclasses import dataclass

CANVAS_IDS = re.compile(r"(?=_(?:(LATE)_)?([0-9]{1,20})_([0-9]{1,20})_)")
CANVAS_ANON = re.compile(r"^(?:(LATE)_)?(anon_[1-9A-HJ-NP-Za-km-z]{5})_([0-9]{1,20})_(.+)$")
CANVAS_TEXT = re.compile(r"(?=_(?:LATE_)?([0-9]{1,20})_(?:text|link)\.html$)")
CANVAS_RENAMED = re.compile(r"^(.+)-[0-9]+((?:\.[A-Za-z][A-Za-z0-9]*)*\.[A-Za-z0-9]*)$")
MOODLE_FOLDER = re.compile(r"^(.*)_([0-9]{1,20})_assignsubmission_([a-z0-9]+)_?$")
MOODLE_FLAT = re.compile(r"(?=_([0-9]{1,20})_assignsubmission_([a-z0-9]+)_)")
TEXT = "Canvas's online text or URL (not files)"
WORD = ("L", "M", "Nd", "Pc")  # Onigmo's [[:word:]]: Letter, Mark, Decimal_Number, Connector_Punctuation


@dataclass(frozen=True)
class Entry:
    """One reading of an entry's name: whose hand-in, and the file's path inside it."""

    lms: str  # canvas, moodle
    student_id: str
    name: str
    file: str  # "" where the entry is not a file hand-in (skip says what it is)
    late: bool = False  # Canvas's LATE
    attachment: int = 0  # Canvas: the file's attachment id (a later upload has a higher one)
    skip: str = ""


def word(char: str) -> bool:
    return unicodedata.category(char).startswith(WORD)


def canvas_name(text: str) -> bool:
    """A name as content_zipper writes it: [[:word:]] only, lowercased (so never `LATE`)."""
    return all(word(c) for c in text) and text.lower() == text


def canvas(path: str) -> list[Entry]:
    """Every reading of `path` that fits Canvas's rule (several: the entry is ambiguous)."""
    if "/" in path:
        return []
    found = []
    for m in CANVAS_IDS.finditer(path):
        name, file = path[:m.start()], path[m.end(3) + 1:]
        if canvas_name(name) and file:
            renamed = CANVAS_RENAMED.match(file)
            found.append(Entry("canvas", m.group(2), name, "".join(renamed.groups()) if renamed else file,
                               bool(m.group(1)), int(m.group(3))))
    anon = CANVAS_ANON.match(path)
    if anon:
        found.append(Entry("canvas", anon.group(2), "anonymous", anon.group(4), bool(anon.group(1)),
                           int(anon.group(3))))
    if not found:  # online text or a URL: no attachment id
        found = [Entry("canvas", m.group(1), path[:m.start()], "", skip=TEXT)
                 for m in CANVAS_TEXT.finditer(path) if canvas_name(path[:m.start()])]
    return found


def moodle(path: str) -> list[Entry]:
    """Every reading of `path` that fits Moodle's rule; one at most for an entry in a folder."""
    head, slash, tail = path.partition("/")
    if slash:
        m = MOODLE_FOLDER.match(head)
        readings = [(m.group(1), m.group(2), m.group(3), tail)] if m else []
    else:
        readings = [(path[:m.start()], m.group(1), m.group(2), path[m.end(2) + 1:])
                    for m in MOODLE_FLAT.finditer(path)]
    return [Entry("moodle", ident, name, file if plugin == "file" else "",
                  skip="" if plugin == "file" else f"Moodle's {plugin} plugin (not a file hand-in)")
            for name, ident, plugin, file in readings if file or plugin != "file"]


def parse(path: str) -> tuple[Entry | None, str]:
    """The one reading of an entry, or None and why it is left out."""
    found = canvas(path) + moodle(path)
    if not found:
        return None, "not a Canvas or Moodle submission name"
    if len(found) > 1:
        whose = ", ".join(sorted({f"{e.lms} id {e.student_id}" for e in found}))
        return None, (f"could be the hand-in of {whose} (a name or a file name that holds another "
                      "student's ids): never guessed; unpack it by hand")
    if found[0].skip:
        return None, found[0].skip
    return found[0], ""
