"""REPORT.md's first screen: the headline table and the findings follow the rows, the page stays
short with the answer first, and lines of code are recounted when the sources change."""

import json
import shutil

import pandas as pd
import pytest

from harness import DEFAULT_RESULTS, registry
from harness.errors import HarnessError
from harness.figures import style
from harness.report import details, markdown
from harness.report.claims import headline, loc, rundata
from harness.report.markup import quote
from harness.report.markup.tables import fmt_ratio, ms, sig3
from harness.report.sections import findings
from tests import rowfiles


@pytest.fixture
def results_copy(tmp_path):
    if not any(DEFAULT_RESULTS.glob("api_levels/*/results.jsonl*")):
        pytest.skip("no committed reference results (make run-all writes them)")
    dest = tmp_path / "results"
    shutil.copytree(DEFAULT_RESULTS, dest)
    return dest


def table_row(text, level):
    return next(line for line in text.splitlines() if line.startswith(f"| {level} |"))


def slow_down(results, runs, machine, label, factor):
    """Multiply every call time of one api_levels cell on one machine by factor, in its file under
    results (a copy of the results that `runs`, their newest runs, were read from)."""
    run = next(r for r in runs if r["study"] == "api_levels" and r["machine"] == machine)
    run_dir = results / "api_levels" / run["dir"].name
    rows = [json.loads(line) for line in rowfiles.text(run_dir).splitlines()]
    for row in rows:
        if row.get("kind") == "cell" and row["cell_id"] == f"{label}/cpu/b1/float32":
            row["rounds_ns"] = [[t * factor for t in r] for r in row["rounds_ns"]]
    rowfiles.rewrite(run_dir, "".join(json.dumps(r) + "\n" for r in rows))


def test_a_changed_row_changes_the_headline_table_and_the_finding(committed_report, committed_texts, results_copy,
                                                                  loc_rows):
    data = committed_report  # what the copy holds before its row changes
    machine = headline.machine_of(data.frame, rundata.answer_run(data.frame, "cpu"))
    report, before = committed_texts  # markdown.build(data), details.build(data): the full table, with intervals
    old = rundata.find(data.frame, "api_levels", "keras/predict", machine=machine)
    assert f"| {ms(old['median_ms'])} [" in table_row(before, "Keras on TensorFlow")
    assert f"`predict` {quote.short(old)} |" in table_row(report, "Keras on TensorFlow")

    slow_down(results_copy, data.runs, machine, "keras/predict", 3)
    data = rundata.load_report(results_copy, loc_rows)
    runs, frame = data.runs, data.frame
    after = details.build(data)
    new = rundata.find(frame, "api_levels", "keras/predict", machine=machine)
    compact = table_row(markdown.build(data), "Keras on TensorFlow")
    assert f"`predict` {quote.short(new)} |" in compact and ms(old["median_ms"]) not in compact
    raw = rundata.find(frame, "api_levels", "onednn/tuned", machine=machine)
    row = table_row(after, "Keras on TensorFlow")
    assert f"| {ms(new['median_ms'])} [" in row and ms(old["median_ms"]) not in row
    ratio = rundata.ratio_ci(new, raw)
    assert quote.times(ratio) in row  # recomputed within rounds, pooled over the runs both cells pool
    first = findings.keras_finding(frame, runs, *headline.levels(frame, loc_rows))
    assert first["cell"]["median_ms"] == new["median_ms"] and first["ratio"] == ratio  # the finding's claims
    assert f"takes {quote.quoted(new, headline=True)} per image" in after
    assert f"takes {ms(old['median_ms'])} [" not in after


def test_a_missing_cell_is_a_dash_with_its_reason(committed_report):
    frame = committed_report.frame
    text = "\n".join(headline.render(frame, committed_report.loc_rows)[0])
    skipped = frame[(frame["study"] == "api_levels") & (frame["implementation"] == "keras")
                    & (frame["device"] == "gpu") & (frame["status"] != "ok")
                    & (frame["machine"] == headline.machine_of(frame, rundata.answer_run(frame, "gpu")))]
    if skipped.empty:
        pytest.skip("Keras on TensorFlow was measured on the GPU")
    row = table_row(text, "Keras on TensorFlow")
    note = row.split("| – (")[1][0]  # the footnote letter of the GPU cell
    assert f"({note}) {headline.short_reason(skipped.iloc[0]['reason'], 'skipped')}." in text
    assert "| – (" in table_row(text, "raw library: oneDNN")  # no GPU column for a CPU-only level


def test_the_answer_comes_first_and_the_page_is_short(committed_texts):
    text, more = committed_texts  # markdown.build and details.build of committed_report
    assert len(text.splitlines()) <= 150
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads[0] == "## Questions, and their answers"  # tests/test_report_budget.py: all six, then the tables
    assert "fig01_cost_vs_code.png" in text and "[DETAILS.md](DETAILS.md)" in text
    assert "| level | code lines |" in more and "9.19.0" in more and "91900" not in more  # the full table, machines


def test_ratios_have_three_significant_figures_and_say_when_there_is_no_difference():
    assert [sig3(x) for x in (1878.53, 18.85, 0.49, 99.96)] == ["1880", "18.9", "0.490", "100"]
    assert fmt_ratio({"ratio": 1.04, "ci95_low": 0.97, "ci95_high": 1.12}).endswith("(no measurable difference)")
    assert "no measurable" not in fmt_ratio({"ratio": 1.2, "ci95_low": 1.05, "ci95_high": 1.3})
    same = {"ratio": 1.04, "ci95_low": 0.97, "ci95_high": 1.12}
    assert findings.comparison(same)["verdict"] == "same" and findings.comparison(None) is None
    assert findings.comparison({"ratio": 2.0, "ci95_low": 1.5, "ci95_high": 2.5})["verdict"] == "faster"
    slower = findings.comparison({"ratio": 0.5, "ci95_low": 0.4, "ci95_high": 0.8})
    assert slower["verdict"] == "slower"  # read the other way: 2x [1.25–2.5]
    assert (slower["ratio"]["ratio"], slower["ratio"]["ci95_low"], slower["ratio"]["ci95_high"]) == (2.0, 1.25, 2.5)


def test_loc_is_recounted_when_the_sources_change_and_refused_stale_without_pygount(tmp_path, monkeypatch):
    csv_path = tmp_path / "loc.csv"
    counted = loc.current_rows(csv_path)  # no file yet: counted, with the sources' fingerprint
    assert csv_path.is_file() and loc.fingerprint_path(csv_path).read_text().strip() == loc.fingerprint()
    monkeypatch.setattr(loc, "count", lambda root=None: pytest.fail("recounted current counts"))
    assert loc.current_rows(csv_path) == counted  # current: read, not recounted
    loc.fingerprint_path(csv_path).write_text("counted from other sources\n")

    def no_pygount(root=None):
        raise ImportError("No module named 'pygount'")

    monkeypatch.setattr(loc, "count", no_pygount)
    with pytest.raises(HarnessError, match="pygount"):
        loc.current_rows(csv_path)
    monkeypatch.setattr(loc, "count", lambda root=None: [dict(counted[0], code=counted[0]["code"] + 1)])
    assert loc.current_rows(csv_path)[0]["code"] == counted[0]["code"] + 1  # stale: recounted
    assert loc.read_csv(csv_path)[0]["code"] == counted[0]["code"] + 1


def test_the_loc_fingerprint_covers_every_counted_file_cuda_kernels_too():
    counted = {p for package in {s.package for s in registry.REGISTRY.values() if s.package}
               for p in loc.package_files(package)}
    kernels = {p for p in counted if p.suffix == ".cu"}
    assert kernels and counted <= set(loc.sources())  # an edited kernel makes loc.csv stale


def test_a_hand_written_cuda_rung_appears_below_cudnn_without_code_changes(committed_report, loc_rows):
    frame = committed_report.frame
    gpu = headline.machine_of(frame, rundata.answer_run(frame, "gpu"))
    graph = rundata.find(frame, "api_levels", "cudnn/graph", device="gpu", machine=gpu)
    if graph is None:
        pytest.skip("no committed cuDNN rows")
    fake = graph.copy()
    fake["implementation"], fake["label"], fake["cell_id"] = "cuda", "cuda/graph", "cuda/graph/gpu/b1/float32"
    fake["median_ms"], fake["ci_low_ms"], fake["ci_high_ms"] = (graph["median_ms"] / 2, graph["ci_low_ms"] / 2,
                                                                graph["ci_high_ms"] / 2)
    fake["rounds_ns"] = [[t / 2 for t in r] for r in graph["rounds_ns"]]
    frame = frame[frame["implementation"] != "cuda"]  # the committed hand-written rows: the fake alone stands in
    frame = pd.concat([frame, fake.to_frame().T], ignore_index=True)
    levels, _ = headline.levels(frame, loc_rows)
    assert [lv.implementation for lv in levels][:2] == ["cuda", "cudnn"]  # the ladder's bottom rung first
    cuda = levels[0]
    assert cuda.ratios["gpu"]["ratio"] == pytest.approx(0.5)  # within rounds, against cuDNN
    assert "runs on the GPU only" in cuda.missing["cpu"] or "not measured" in cuda.missing["cpu"]
    assert style.colour("cuda") not in {style.colour(i) for i in style.IMPL_ORDER if i != "cuda"}
    assert style.ladder_sorted(["cudnn/graph", "cuda/graph", "keras/predict"])[0] == "cuda/graph"
