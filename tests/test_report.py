"""LOC, figures and REPORT.md: pure functions of the result files (no framework imported)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import DEFAULT_RESULTS, registry
from harness.report import details, markdown
from harness.report.claims import loc, rundata
from tests import rowfiles
from tests.conftest import ROOT


def test_loc_equals_pygount_run_by_hand(loc_rows):
    """The counts equal pygount's own command line, run as a person runs it: once over every
    level's package (one process: each start costs 1.5 s here), its per-file JSON summed per package.
    A level's code is its package's top folder (provenance.package_files): its sub-folders (lenet_c/explain/,
    the C level's instrumentation; lenet_onnx/doctor/, doctor's probe of the engines) are skipped, as the
    count skips them."""
    packages = sorted({spec.package for spec in registry.REGISTRY.values() if spec.package})
    below = sorted({p.name for package in packages for p in (ROOT / package).iterdir()
                    if p.is_dir() and p.name != "__pycache__"})
    pygount_cli = Path(sys.executable).parent / "pygount"
    done = subprocess.run([str(pygount_cli), "--format=json", f"--folders-to-skip=...,{','.join(below)}",
                           *packages],
                          cwd=ROOT, capture_output=True,
                          text=True, check=True)
    code = dict.fromkeys(packages, 0)
    for entry in json.loads(done.stdout)["files"]:
        code[Path(entry["path"]).parts[0]] += entry["codeCount"]
    totals = loc.totals(loc_rows)
    for package in packages:
        assert totals[package] == code[package] > 0, package


def test_loc_counts_the_keras_package_once_for_three_backends(loc_rows):
    keras_files = [r["file"] for r in loc.files(loc_rows) if r["package"] == "lenet_keras"]
    assert sorted(keras_files) == sorted(set(keras_files)) and "model.py" in keras_files  # once each
    keras_parts = {r["part"] for r in loc_rows if r["package"] == "lenet_keras"}
    assert "forward" in keras_parts and loc.FIRST in keras_parts  # each backend's first-written count too
    assert ("lenet_torch", "weight layout") in {(r["package"], r["part"]) for r in loc_rows}
    # training code is counted apart, so the inference comparison stays fair
    assert ("lenet_numpy", "training step") in {(r["package"], r["part"]) for r in loc_rows}


def test_loc_splits_cudnn_layout_and_binding_and_counts_shared_apart(loc_rows):
    parts = {(r["package"], r["part"]) for r in loc_rows}
    assert {("lenet_cudnn", "forward"), ("lenet_cudnn", "weight layout"),
            ("lenet_cudnn", "ffi binding"), ("shared loaders", "shared")} <= parts


@pytest.fixture
def results_copy(tmp_path):
    if not any(DEFAULT_RESULTS.glob("*/*/results.jsonl*")):
        pytest.skip("no committed reference results (make run-all writes them)")
    dest = tmp_path / "results"
    shutil.copytree(DEFAULT_RESULTS, dest)
    return dest


@pytest.fixture(scope="module")
def committed_details(committed_texts) -> str:
    """DETAILS.md of the committed results, built once a session (conftest.committed_texts)."""
    return committed_texts[1]


def column_of(text: str, row: str, header: str) -> list[int]:
    """The `header` column of each table row of text that starts with `row`, read by its table's header."""
    found, headers = [], []
    for line in text.splitlines():
        if line.startswith("|") and not headers:
            headers = [h.strip() for h in line.split("|")]
        elif not line.startswith("|"):
            headers = []
        elif line.startswith(row):
            found.append(int(line.split("|")[headers.index(header)]))
    return found


def test_details_change_when_a_results_row_is_deleted(committed_report, committed_details, results_copy, loc_rows):
    data, before = committed_report, committed_details  # what the copy held before the row went
    run = next(r for r in data.runs if r["study"] == "api_levels" and r["run_id"] == data.answer["cpu"])  # in use
    run_dir = results_copy / run["dir"].relative_to(DEFAULT_RESULTS)
    lines = rowfiles.text(run_dir).splitlines(keepends=True)
    victim = next(i for i, line in enumerate(lines)
                  if '"kind":"cell"' in line and '"status":"ok"' in line and "numpy/default" in line)
    removed = json.loads(lines[victim])
    del lines[victim]
    rowfiles.rewrite(run_dir, "".join(lines))
    after = details.build(rundata.load_report(results_copy, loc_rows))
    assert before != after
    # the answering run's cells are the rows shown (each pooling every run of its code on the machine):
    # a cell the answering run lost is not shown, though an earlier run of the same code timed it
    section = lambda text: text.split("## Per-image latency")[1].split("## Cold start")[0]  # noqa: E731
    calls = lambda text: column_of(section(text), "| numpy/default |", "calls")  # noqa: E731
    assert len(calls(before)) == 1 and calls(after) == [], (calls(before), calls(after))
    assert calls(before)[0] > sum(len(r) for r in removed["rounds_ns"])  # it pooled the rerun's calls too


def test_details_numbers_come_from_rows(committed_report, committed_details):
    text, frame = committed_details, details.answering(committed_report).frame  # the answering machines'
    ok = frame[(frame["study"] == "api_levels") & (frame["status"] == "ok")]
    for _, r in ok.iterrows():
        assert details.ms(r["median_ms"]) in text
    skipped = frame[frame["status"] == "skipped"]
    for _, r in skipped.iterrows():
        assert r["reason"] in text


def test_empty_results_give_a_report_that_says_so(tmp_path, loc_rows):
    data = rundata.load_report(tmp_path, loc_rows)
    assert "No results yet" in markdown.build(data) and "_No runs yet._" in details.build(data)


@pytest.mark.slow
def test_committed_figures_and_report_are_reproduced_byte_for_byte_without_tensorflow(tmp_path):
    """make figures report, run on the committed results in a fresh interpreter, rebuilds the
    committed files exactly (nothing in them was typed or edited by hand, and they are in step with
    the code) and never imports TensorFlow, Keras or CuPy. (Two tests merged: each rebuilt every
    figure, a minute apiece on this machine; the assertions of both are here.) The cells' statistics
    are the ones their rows saved (stats.SUMMARY_VERSION), read back, not summarized again."""
    committed_figures = ROOT / "reports" / "figures"
    if not (ROOT / "reports" / "REPORT.md").is_file():
        pytest.skip("no committed report (make run-all writes it)")
    code = (
        "import sys\n"
        "from harness.cli import main\n"
        f"assert main(['figures', '--out', r'{tmp_path / 'figures'}']) == 0\n"
        f"assert main(['report', '--out', r'{tmp_path / 'REPORT.md'}']) == 0\n"
        "bad = [m for m in ('tensorflow', 'keras', 'cupy') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "REPORT.md").read_text().startswith("# lenet-levels")
    assert (tmp_path / "DETAILS.md").read_text().startswith("# lenet-levels: the details")
    for name in ("REPORT.md", "DETAILS.md"):
        assert (tmp_path / name).read_text() == (ROOT / "reports" / name).read_text(), name
    pages = sorted(p.name for p in (tmp_path / "machines").glob("*.md"))  # every other machine's page
    assert pages == sorted(p.name for p in (ROOT / "reports" / "machines").glob("*.md"))
    for name in pages:
        assert (tmp_path / "machines" / name).read_text() == (ROOT / "reports" / "machines" / name).read_text(), name
    rebuilt = sorted(p.name for p in (tmp_path / "figures").glob("*.png"))
    assert "fig01_cost_vs_code.png" in rebuilt and "fig02_loc.png" in rebuilt and "fig03_latency.png" in rebuilt
    assert rebuilt == sorted(p.name for p in committed_figures.glob("*.png"))
    for name in rebuilt:
        assert (tmp_path / "figures" / name).read_bytes() == (committed_figures / name).read_bytes(), name
