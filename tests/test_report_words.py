"""The report's words (harness/report/templates, rendered by harness.report.markup.words): a template
names only claims it is given (StrictUndefined), a paragraph is one line, and a finding's record names
registered cells, a macro that exists, and computes its numbers from the cells."""

import jinja2
import pandas as pd
import pytest

from harness import registry
from harness.measure.store import stats
from harness.report.markup import words
from harness.report.sections import explain_section, gpu_section, machine_findings


def test_a_claim_the_template_needs_and_is_not_given_is_an_error_never_a_blank():
    with pytest.raises(jinja2.UndefinedError):
        words.say("gpu.md.j2", "raw_against", library="cuDNN")  # the other claims left out
    with pytest.raises(jinja2.UndefinedError):
        words.render("report.md.j2", headline=[])


def test_a_paragraph_is_its_lines_stripped_and_joined_by_one_space():
    assert words.paragraph("  a b\n\n   c\nd  \n") == "a b c d"
    said = words.say("machine_findings.md.j2", "eager_against_function", machine="m",
                     eager={"median_ms": 0.5}, function={"median_ms": 0.25}, eager_over_function=2.0)
    assert said == "TensorFlow ops: eager 500 µs against tf.function 250 µs per image (2.00x within rounds)."


def test_a_share_between_none_and_all_is_never_written_as_0_or_100_percent():
    assert words.percent(0.42) == "42%" and words.percent(0.42, 1) == "42.0%"
    assert words.percent(0.99989, 1) == "99.99%"  # predict's share above the floor: not all of it
    assert words.percent(0.0023) == "0.2%" and words.percent(0.996) == "99.6%"
    assert words.percent(1.0, 1) == "100.0%" and words.percent(0.0) == "0%"  # all and none as they are


@pytest.mark.parametrize("table", ["ladder", "floor"])
def test_the_gpu_words_name_registered_gpu_calls(table):
    for label in words.table_of(gpu_section.WORDS)[table]:
        level, variant = label.split("/")
        assert variant in registry.spec(level).variants_for("gpu"), label


@pytest.mark.parametrize("table", ["method", "short"])
def test_the_explain_words_name_registered_calls(table):
    for label in words.table_of(explain_section.WORDS)[table]:
        level, variant = label.split("/")
        assert variant in registry.spec(level).variants, label


def test_the_cpu_goals_name_registered_cpu_calls():
    goals = words.table_of("cpu")
    labels = [*goals["time_ms"], goals["compiled"]["call"], *goals["compiled"]["rivals"],
              goals["hand_written"]["call"], goals["hand_written"]["rival"]]
    for label in labels:
        level, variant = label.split("/")
        assert variant in registry.spec(level).variants_for("cpu"), label


def test_every_finding_record_names_registered_cells_and_a_macro_that_exists():
    module = words.environment().get_template(machine_findings.SENTENCES).module
    for record in words.table_of(machine_findings.RECORDS)["finding"]:
        assert hasattr(module, record["words"]), record["words"]
        for label in record["cells"].values():
            level, variant = label.split("/")
            assert variant in registry.spec(level).variants, label
        for a, b in record.get("ratios", []) + record.get("intervals", []):
            assert {a, b} <= set(record["cells"]), record
        assert record["group"] in ("keras", "raw library"), record  # where machine_findings says it


def cell(median_us: float, cold_ms: float = float("nan"), own: bool | None = True) -> pd.Series:
    rounds = [[int(median_us * 1000)] * 3] * 5
    return pd.Series({"run_id": "r", "study": "overhead", "rounds_ns": rounds, "round_process": [0] * 5,
                      "thin": False, "median_ms": median_us / 1000, "cold_start_ms": cold_ms,
                      "own_process": own})


def test_a_records_ratios_and_cold_start_are_computed_from_its_cells():
    record = {"ratios": [["eager", "function"]]}
    cells = {"eager": cell(400.0), "function": cell(100.0)}
    said = machine_findings.computed(record, cells, pd.DataFrame(), "m")
    assert said == {"eager_over_function": pytest.approx(4.0)}
    assert said["eager_over_function"] == stats.round_ratio(cells["eager"]["rounds_ns"],
                                                            cells["function"]["rounds_ns"])["ratio"]
    cold = {"cold_start": "cold"}
    assert machine_findings.computed(cold, {"cold": cell(100.0, cold_ms=5.0)}, pd.DataFrame(), "m") == {
        "cold_ms": 5.0, "cold_over_steady": pytest.approx(50.0)}
    # a first call after another cell's warm-up, or none timed: no cold start to say
    assert machine_findings.computed(cold, {"cold": cell(100.0, cold_ms=5.0, own=False)}, pd.DataFrame(), "m") is None
    assert machine_findings.computed(cold, {"cold": cell(100.0)}, pd.DataFrame(), "m") is None
    above = machine_findings.computed({"above_fastest": "p"}, {"p": cell(100.0)}, pd.DataFrame(), "m")
    assert above == {"fastest": None, "above_fastest": None}  # no fastest call known: nothing above it
