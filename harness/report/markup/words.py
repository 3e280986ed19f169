"""The report's words: Jinja2 templates in harness/report/templates/, rendered from claims (plain
data computed in Python) with StrictUndefined, so a name a template uses and no claim gives is an
error, never a blank. A template file holds one macro per sentence or paragraph; it formats numbers
through FILTERS (the wing's own formatting) and does no arithmetic, sorting or selection.

    say(template, macro, **claims) -> str   one paragraph: the macro's lines joined by single spaces
                                            (a template wraps its prose freely)
    table_of(name) -> dict                  a data table of words (templates/<name>.toml)
"""

from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import tomllib

from harness.report.markup.tables import fmt_ratio, ms, sig3

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"

def fixed(value: float, digits: int = 1) -> str:
    return f"{value:.{digits}f}"


def percent(share: float) -> str:
    """A share (0.42) as a whole percentage ('42%')."""
    return f"{100 * share:.0f}%"


FILTERS: dict[str, Any] = {
    "ms": ms,  # a time in ms, as every table prints it
    "ratio": fmt_ratio,  # a within-round ratio dict, with its interval
    "sig3": sig3,
    "pct": percent,
    "fixed": fixed,
}


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             autoescape=False)  # Markdown, not HTML: a table cell is escaped by tables.table
    env.filters.update(FILTERS)
    return env


def say(template: str, macro: str, **claims: Any) -> str:
    """One paragraph from `template`'s `macro`, its lines stripped and joined by single spaces."""
    found = getattr(environment().get_template(template).module, macro)
    text = str(found(**claims))
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


@cache
def table_of(name: str) -> dict[str, Any]:
    """templates/<name>.toml: words keyed by what they name (a variant's label), in the file's order."""
    return tomllib.loads((TEMPLATES / f"{name}.toml").read_text())
