"""REPORT.md's six answers (harness.report.sections.questions), each claim computed from the rows and
held against them: the committed runs' answers, and what an answer says where its study is missing.
Lines of code count one working implementation (loc.first_written), and the bill reads every process
that set a call up (bill.process_bills)."""

import math

import pandas as pd
import pytest

from harness import registry
from harness.report.claims import bill, headline, loc
from harness.report.claims.rundata import find, ratio_ci
from harness.report.sections import findings, questions


@pytest.fixture(scope="module")
def levels(committed_report):
    data = committed_report
    found, machines = headline.levels(data.frame, data.loc_rows, data.answer)
    return data, found, machines


def test_question_1_quotes_each_devices_raw_library_framework_ops_and_keras_as_first_written(levels):
    data, found, machines = levels
    claims = questions.cost(found, machines, data.runs)
    by = {lv.implementation: lv for lv in found}
    cpu = next(d for d in claims["devices"] if d["device"] == "cpu")
    assert [r["name"] for r in cpu["rows"]] == [registry.short(n) for n in ("onednn", "tf", "keras")]
    for row, name in zip(cpu["rows"], ("onednn", "tf", "keras"), strict=True):
        assert row["cell"]["label"] == f"{name}/{registry.first_written(name)}"
        assert row["loc"] == loc.first_written(data.loc_rows, name)
        if name != "onednn":
            assert row["ratio"] == by[name].first_ratios["cpu"]
    assert claims["fewer"] == pytest.approx(cpu["rows"][0]["loc"] / cpu["rows"][-1]["loc"])


def test_question_2_says_what_predict_builds_and_what_to_call_instead_within_rounds(levels):
    data, found, machines = levels
    claims = questions.keras(data.frame, data.runs, found, machines)
    predict = find(data.frame, "overhead", headline.HIGH_LEVEL, machine=machines["cpu"])
    if predict is None:
        assert claims["instead"] == [] and claims["overhead_command"] == "python -m harness run overhead"
        return
    assert [i["variant"] for i in claims["instead"]] == list(registry.KERAS_CALLS[1:])
    for i in claims["instead"]:
        assert i["compared"] == findings.comparison(ratio_ci(predict, i["cell"]))
        assert i["compared"]["verdict"] == "faster"  # predict's pipeline is the slow part
    said = questions.answers(data)[1]
    assert said.startswith("**2. Why is Keras slow") and "`predict_on_batch(x)`" in said


def test_question_4_says_no_gpu_trained_and_names_the_command(levels):
    data, _found, machines = levels
    claims = questions.training(data.frame, machines)
    gpu = data.frame[(data.frame["study"] == "training") & (data.frame["device"] == "gpu")
                     & (data.frame["status"] == "ok") & (data.frame["machine"] == machines["gpu"])]
    assert claims["gpu_measured"] == (not gpu.empty)
    if gpu.empty:
        said = questions.answers(data)[3]
        assert "no GPU has run the training study yet" in said
        assert "`python -m harness run training --devices gpu`" in said


def test_question_5_spans_float64s_ratios_within_rounds(levels):
    data, _found, machines = levels
    claims = questions.knobs(data.frame, machines)
    found = claims["precision"]
    if found is None:
        return
    assert found["low"]["ratio"]["ratio"] <= found["high"]["ratio"]["ratio"]
    double = find(data.frame, "precision", found["high"]["label"], dtype="float64", machine=machines["cpu"])
    single = find(data.frame, "precision", found["high"]["label"], machine=machines["cpu"])
    assert found["high"]["ratio"] == ratio_ci(double, single)


def test_question_6_ranks_the_first_written_calls_tails(levels):
    _data, found, _machines = levels
    for d in questions.spread(found)["devices"]:
        assert d["wide"]["p99_ms"] / d["wide"]["median_ms"] >= d["narrow"]["p99_ms"] / d["narrow"]["median_ms"]


def test_every_answer_points_to_where_it_is_shown(levels):
    data, _found, _machines = levels
    for said in questions.answers(data):
        assert "](figures/" in said or "](#on-the-" in said or "`python -m harness" in said or "`make" in said


def test_an_answer_whose_study_is_missing_names_the_command_that_measures_it():
    empty = pd.DataFrame()
    claims = questions.knobs(empty, {"cpu": None, "gpu": None})
    assert claims["precision"] is None and claims["batch"] is None and claims["threads"] is None
    assert claims["commands"]["precision"] == "python -m harness run precision"
    assert questions.training(empty, {"cpu": None, "gpu": None})["gpu_command"] == \
        "python -m harness run training --devices gpu"
    assert questions.figure("explain")["file"].startswith("fig") and questions.figure("no such figure") is None
    assert questions.under("cpu", "keras") == "tf" and questions.under("gpu", "keras_jax") == "jax"


def test_a_piece_of_a_python_file_counts_its_code_not_its_docstring_or_comments(tmp_path):
    path = tmp_path / "model.py"
    path.write_text('"""module doc"""\n\n\ndef f(x):\n    """doc\n    more"""\n    # why\n    y = x + 1  # note\n'
                    '    return (y,\n            y)\n\n\nclass A:\n    def g(self):\n        return 1\n\n'
                    '    def h(self):\n        return 2\n')
    assert loc.piece_count(path, "f") == (4, 3)  # def, y = ..., the return's two lines; doc (2) and # why
    assert loc.piece_count(path, "A.h") == (2, 0) and loc.piece_count(path, "A")[0] == 5
    with pytest.raises(Exception, match="no such definition"):
        loc.piece_count(path, "A.missing")


def test_the_headline_counts_one_working_implementation(loc_rows):
    for name in registry.levels():
        named = loc.first_written_code(name)
        whole = sum(r["code"] for r in loc.files(loc_rows) if r["package"] == registry.spec(name).package
                    and r["part"] not in loc.APART)
        count = loc.first_written(loc_rows, name)
        assert count is not None and count <= whole, name
        if named:
            row = next(r for r in loc_rows if r["part"] == loc.FIRST and r["file"] == f"{name}/{registry.first_written(name)}")
            assert row["code"] == count
        else:
            assert count == whole
    # the first-written rows are not files: the packages' totals count each file once
    assert sum(loc.totals(loc_rows).values()) == sum(r["code"] for r in loc.files(loc_rows))
    keras = loc.first_written(loc_rows, "keras")
    assert keras < sum(r["code"] for r in loc.files(loc_rows) if r["package"] == "lenet_keras" and r["part"] == "forward")


def setup(cell, pid, memory, import_ns=1_000_000_000, load_ns=100_000_000, cold_ns=10_000_000):
    return {"kind": "setup", "cell_id": cell, "pid": pid, "import_ns": import_ns, "load_ns": load_ns,
            "cold_start_ns": cold_ns, "memory": memory}


def test_the_bill_belongs_to_the_call_that_reached_it_with_its_spread_over_processes():
    mb = bill.MB
    first = {"baseline": 100 * mb, "import": 150 * mb, "model": 160 * mb, "first_calls_peak": 170 * mb}
    later = {"baseline": 300 * mb, "import": 300 * mb, "model": 310 * mb, "first_calls_peak": 320 * mb}
    a1, b1 = setup("a", 1, first), setup("b", 1, later, import_ns=0, load_ns=50_000_000)
    b2 = setup("b", 2, {**first, "first_calls_peak": 180 * mb}, import_ns=2_000_000_000)
    per = bill.process_bills([(b1, a1), (b2, b2)])
    assert [p["own"] for p in per] == [False, True]
    # shared with a: the framework's import (a's, 1 s, 150 MiB) plus what b added from its own set-up
    assert per[0]["peak_mb"] == pytest.approx(150 + 20) and per[0]["startup_s"] == pytest.approx(1.06)
    assert per[1]["peak_mb"] == pytest.approx(180) and per[1]["startup_s"] == pytest.approx(2.11)
    assert bill.spread([p["peak_mb"] for p in per]) == (pytest.approx(175), (pytest.approx(170), pytest.approx(180)))
    cell = pd.Series({"implementation": "b", "device": "cpu", "label": "b/x", "memory": later, "setups": [(b1, a1), (b2, b2)],
                      "installed": None, "load_s": 0.05, "cold_start_ms": 10.0, "fresh_compile_cache": False})
    found = bill.bill_of(cell)
    assert found.processes == 2 and found.own_processes == 1 and found.calls_peak_mb == pytest.approx(175)
    assert bill.startup_text(found) == "1.6 s [1.1–2.1 s, 2 processes]"
    assert bill.peak_text(found) == "175 MiB [170–180 MiB, 2 processes]"
    assert math.isnan(found.model_mb) and bill.mib(found.model_mb, "+") == "–"
