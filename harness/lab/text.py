"""Text and names that come from a submission (failure reasons, log tails, class names, file and
folder names), made safe before they reach a terminal, Markdown, CSV or a file name. A student
chooses every byte of them: terminal escapes (ESC, BEL), newlines that start a Markdown heading
outside a table, `|` that splits a cell, HTML, a spreadsheet formula, a folder name that is not
UTF-8 or is 254 bytes long.

    clean(text, limit) -> str       one line: control characters escaped (\\x1b), newlines folded,
                                    bytes that are not UTF-8 (surrogates) escaped, cut to limit
    cell(text, limit) -> str        clean, then safe in a Markdown table cell (| ` < > & escaped)
    block(lines) -> list[str]       a log tail for a Markdown code block: cleaned lines, no fence
    csv_cell(text) -> str           clean, and never read as a formula by a spreadsheet (text cells)
    csv_value(value)                a CSV cell: a number the tool computed stays a number, all else
                                    is text (csv_cell); csv_row(row) does it to every cell of a row
    safe_id(name) -> str            the internal id a grader names files and groups by
    unpathed(text) -> str           every absolute path cut to its last two parts (.../core/x.py):
                                    what a student reads never shows the server's folders
"""

import hashlib
import html
import os
import re
import unicodedata

ID_CHARS = re.compile(r"[^A-Za-z0-9_.-]")
# an absolute path of two or more parts, not inside a word or a relative path (feedback/x.md)
PART = r"/[^\s/'\"`:,;()<>|]+"  # one part of a path: a slash and a name
ABSOLUTE_PATH = re.compile(rf"(?<![\w.~/-])(?:{PART})*({PART}{PART})")
ID_MAX = 60  # characters of the readable part of an id
# OWASP's CSV injection rule (owasp.org/www-community/attacks/CSV_Injection, from
# OWASP/www-community pages/attacks/CSV_Injection.md): a cell a spreadsheet opens must not begin with
# = + - @, tab, CR or LF, nor may a field separator inside it start a new cell that does (`;` is the
# separator of Excel's CSV where the decimal mark is a comma; Python's csv quotes a cell holding `,`).
FORMULA = ("=", "+", "-", "@", "\t", "\r", "\n")
AFTER_SEPARATOR = re.compile(r";(\s*)(?=[=+\-@])")


def _escaped(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (os.fsdecode's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: object, limit: int = 500) -> str:
    """One printable line: newlines and tabs folded to ` / ` and spaces, every other control or
    format character (ESC, BEL, DEL, C1, bidi overrides) and every surrogate escaped as \\xNN."""
    raw = str(text)
    raw = re.sub(r"\s*[\r\n\u2028\u2029\x85]+\s*", " / ", raw).replace("\t", " ")
    out = "".join(_escaped(c) if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn") else c
                  for c in raw)
    return out if len(out) <= limit else out[:limit - 3] + "..."


def cell(text: object, limit: int = 500) -> str:
    """Safe inside a Markdown table cell (and the Markdown around it): no HTML, no new cell, no code span."""
    return html.escape(clean(text, limit), quote=False).replace("|", "\\|").replace("`", "'")


def block(lines: list[str]) -> list[str]:
    """Lines for a ``` block: each cleaned; a line of backticks cannot close the fence."""
    return [clean(line, 300).replace("```", "'''") for line in lines]


def csv_cell(text: object, limit: int = 500) -> str:
    """Text for a CSV cell that a spreadsheet shows as the text it is: clean (one line), a quote
    before a leading = + - @ (the spreadsheet's own "this is text" mark, not shown), and before such
    a character after a `;`. For text only: a student's "-1" is text and gets its quote; a number
    the tool computed goes through csv_value and stays a number."""
    out = AFTER_SEPARATOR.sub(r";\1'", clean(text, limit))
    return "'" + out if out.startswith(FORMULA) else out


def csv_value(value: object, limit: int = 500) -> object:
    """A cell of a CSV that staff open. A number the tool computed (int or float: points, a ratio,
    -0.5) is written as the number it is: a quote would make it text in the spreadsheet. Everything
    else (str, None: "") is text, whatever it looks like, and goes through csv_cell."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return csv_cell("" if value is None else value, limit)


def csv_row(row: dict, limit: int = 500) -> dict:
    """csv_value of every cell of a csv.DictWriter row."""
    return {key: csv_value(value, limit) for key, value in row.items()}


def safe_id(name: str) -> str:
    """`name` itself when it is a short plain name ([A-Za-z0-9_.-], not starting with a dot), else
    its plain characters and a hash of its bytes: any bytes, any length, never a path, at most
    ID_MAX characters (so an id is its own id)."""
    if name and len(name) <= ID_MAX and not ID_CHARS.search(name) and not name.startswith("."):
        return name
    raw = os.fsencode(name)
    readable = ID_CHARS.sub("_", name.encode("ascii", "replace").decode())[:ID_MAX - 13].lstrip(".") or "x"
    return f"{readable}-{hashlib.sha256(raw).hexdigest()[:12]}"  # plain and short: its own id


def unpathed(text: str) -> str:
    """Absolute paths (the grader's checkout, its Python, its scratch folders, a worker's view) cut to
    their last two parts, '.../core/x.py': a traceback keeps its file names, the server its folders."""
    return ABSOLUTE_PATH.sub(lambda m: "..." + m[1], text)
