"""The report's words: Jinja2 templates in harness/report/templates/, rendered from claims (plain
data computed in Python) with StrictUndefined, so a name a template uses and no claim gives is an
error, never a blank. A template file holds one macro per sentence or paragraph; it formats numbers
through FILTERS (the wing's own formatting) and does no arithmetic, sorting or selection.

    say(template, macro, **claims) -> str   one paragraph: the macro's lines joined by single spaces
                                            (a template wraps its prose freely)
    render(template, **claims) -> str       a whole document
    table_of(name) -> dict                  a data table of words (templates/<name>.toml)
"""

import time
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import tomllib

from harness.draw.style import fmt_ms
from harness.report.markup import quote
from harness.report.markup.tables import fmt_ratio, includes_one, ms, sig3

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def fixed(value: float, digits: int = 1) -> str:
    return f"{value:.{digits}f}"


def percent(share: float, digits: int = 0) -> str:
    """A share (0.42) as '42%'; one between none and all never reads 0% or 100% (0.99989: '99.99%')."""
    while 0 < share < 1 and digits < 6 and float(f"{100 * share:.{digits}f}") in (0.0, 100.0):
        digits += 1
    return f"{100 * share:.{digits}f}%"


def paragraph(text: str) -> str:
    """A template's wrapped lines as one line of the document: stripped and joined by single spaces."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def utc(seconds: float) -> str:
    """A run's start (seconds since the epoch) as '2026-11-27 20:48 UTC'."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))


FILTERS: dict[str, Any] = {
    "paragraph": paragraph,
    "utc": utc,
    "commit": lambda sha: sha[:10],  # a commit as the report names it
    "thousands": "{:,}".format,
    "sig3g": "{:.3g}".format,
    "g": "{:g}".format,
    "ms": ms,  # a time in ms, as every table prints it
    # a time in ns, or (rate) images per second
    "amount": lambda value, rate=False: f"{value / 1e6:.3g} M images/s" if rate else ms(value / 1e6),
    "ns": lambda ns: ("-" if ns < 0 else "") + fmt_ms(abs(ns) / 1e6),  # a time in ns, its sign kept
    "ratio": fmt_ratio,  # a within-round ratio dict, with its interval
    "sig3": sig3,
    "pct": percent,
    "signed_pct": lambda share: f"{100 * share:+.1f}%",  # a move: -0.033 -> '-3.3%'
    "fixed": fixed,
    "sig2g": "{:.2g}".format,
    "whole": "{:,.0f}".format,  # 1399.2 -> '1,399'
    "quoted": quote.quoted,  # a cell's median with its interval and marks (headline=True: first screen's)
    "rate": quote.rate,  # a cell's images/s with its interval and marks
    "times": quote.times,  # a within-round ratio as a multiple: '1700x [1530–1780]'
    "plain": quote.plain,  # REPORT.md's: a median with its interval and its marks as symbols
    "same": includes_one,  # a within-round ratio whose interval holds 1: no measurable difference
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
    return paragraph(str(found(**claims)))


def render(template: str, **claims: Any) -> str:
    """A whole document from `template` (its {% filter paragraph %} blocks each one line)."""
    return environment().get_template(template).render(**claims)


@cache
def table_of(name: str) -> dict[str, Any]:
    """templates/<name>.toml: words keyed by what they name (a variant's label), in the file's order."""
    return tomllib.loads((TEMPLATES / f"{name}.toml").read_text())
