"""The report read as a newcomer reads it (issue 90): REPORT.md opens with the six questions, its first
screen uses no word of the project's own, its prose and DETAILS.md stay within their word budgets, no
paragraph is printed in both, and a ratio whose interval holds 1 reads "no measurable difference"."""

import re

import pandas as pd
import pytest

from harness import ROOT
from harness.report import markdown
from harness.report.markup import quote
from harness.report.sections import device_tables

REPORT, DETAILS = ROOT / "reports" / "REPORT.md", ROOT / "reports" / "DETAILS.md"
REPORT_PROSE_WORDS = 1500  # REPORT.md's words beside its tables
DETAILS_WORDS = 20000  # all of DETAILS.md
# the project's own words, which a reader new to it does not know (the glossary defines those that stay)
OWN_WORDS = ("process-dependent", "bill", "cell", "cells", "ladder", "stale", "floor", "peeled", "thin",
             "the run that answers")


def first_screen(text: str) -> str:
    """What a reader sees before the first figure: the questions, their answers and each device's table."""
    return text.split("\n![", 1)[0]


def prose(text: str) -> str:
    """The text without its tables, figure lines and HTML comments."""
    return "\n".join(line for line in text.splitlines() if not line.startswith(("|", "![")))


def words_in(text: str) -> int:
    return len(text.split())


def paragraphs(text: str) -> set[str]:
    """The document's paragraphs of prose (a line of at least 12 words that is not a table row)."""
    return {line.strip() for line in prose(text).splitlines() if words_in(line) >= 12}


def own_words(text: str) -> list[str]:
    return [w for w in OWN_WORDS if re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", text, re.IGNORECASE)]


def test_the_helpers_find_what_they_look_for():
    text = "# t\n\nA cell and a floor.\n\n| a | b |\n|---|---|\n| thin | 1 |\n\n![Fig. 1](f.png)\n\nladder\n"
    assert first_screen(text).endswith("| thin | 1 |\n") and own_words(first_screen(text)) == ["cell", "floor", "thin"]
    assert own_words("within the cellar, nothing thinner") == []  # words, not parts of words
    assert "| thin |" not in prose(text) and words_in(prose(text)) == 8  # "# t A cell and a floor. ladder"


@pytest.fixture(scope="module")
def built(committed_texts) -> tuple[str, str]:
    return committed_texts  # markdown.build and details.build of committed_report


def test_the_report_opens_with_six_numbered_questions_and_a_table_per_device(built):
    text, _ = built
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads[:3] == ["## Questions, and their answers", "## On the CPU", "## On the GPU"]
    answers = text.split("## Questions, and their answers")[1].split("\n## ")[0]
    asked = re.findall(r"^\*\*(\d)\. [^*]+\?\*\*", answers, re.MULTILINE)
    assert asked == [str(i) for i in range(1, 7)]
    for device in ("CPU", "GPU"):
        section = text.split(f"## On the {device}")[1].split("\n## ")[0]
        assert "| level | lines of code, as first written | as first written |" in section


def test_the_first_screen_uses_no_word_of_the_projects_own(built):
    text, _ = built
    assert own_words(first_screen(text)) == []


def committed() -> tuple[str, str]:
    if not REPORT.is_file() or not DETAILS.is_file():
        pytest.skip("no committed report (make run-all writes it)")
    return REPORT.read_text(), DETAILS.read_text()


def test_the_committed_report_keeps_its_word_budget_and_prints_no_paragraph_of_details():
    report, more = committed()
    assert words_in(prose(report)) <= REPORT_PROSE_WORDS
    assert paragraphs(report) & paragraphs(more) == set()
    assert own_words(first_screen(report)) == []


def test_the_committed_details_keep_their_word_budget():
    _report, more = committed()
    assert words_in(more) <= DETAILS_WORDS


def test_a_ratio_whose_interval_holds_one_reads_no_measurable_difference():
    same = {"ratio": 1.02, "ci95_low": 0.99, "ci95_high": 1.05}
    assert quote.times(same) == "no measurable difference [0.990–1.05]"
    assert device_tables.times(same) == "no measurable difference"
    apart = {"ratio": 1.2, "ci95_low": 1.1, "ci95_high": 1.3}
    assert quote.times(apart) == "1.20x [1.10–1.30]" and device_tables.times(apart) == "1.20x"
    alone = {"ratio": 1.02, "ci95_low": float("nan"), "ci95_high": float("nan")}
    assert device_tables.times(alone) == "1.02x" and device_tables.times(None) == "–"


def test_a_number_on_the_first_screen_carries_its_marks_as_symbols_with_a_legend():
    cell = pd.Series({"median_ms": 0.0395, "ci_low_ms": 0.0355, "ci_high_ms": 0.0486, "noisy": True,
                      "stale": "lenet_x changed", "processes": 3})
    assert quote.plain(cell) == f"39.5 µs [35.5–48.6 µs]{quote.SYMBOLS['noisy']}{quote.SYMBOLS['stale']}"
    assert quote.short(cell) == f"39.5 µs{quote.SYMBOLS['noisy']}{quote.SYMBOLS['stale']}"
    said = markdown.legend(quote.plain(cell))
    assert said.startswith(f"{quote.SYMBOLS['noisy']} its 95% interval is wider than")
    assert "earlier version of this code" in said and own_words(said) == []
    assert markdown.legend("no marks here") == ""
