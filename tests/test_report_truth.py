"""Every claim the report generates follows from the rows, one test per claim: whose run answers,
"fastest", the floor, intervals only where the rounds support them, stale and contended marks."""

import json
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from harness import DEFAULT_RESULTS, registry
from harness.errors import HarnessError
from harness.machine import load, provenance
from harness.measure import fastest_call
from harness.measure.store import stats
from harness.report import details, markdown
from harness.report.claims import headline, rundata
from harness.report.markup import quote
from harness.report.sections import explain_section, machine_findings
from tests import rowfiles
from tests.conftest import ROOT
from tests.test_runner import final_rows, lab_cell, only_run, run_cli, write_study


@pytest.fixture
def results_copy(tmp_path):
    if not any(DEFAULT_RESULTS.glob("api_levels/*/results.jsonl*")):
        pytest.skip("no committed reference results (make run-all writes them)")
    dest = tmp_path / "results"
    shutil.copytree(DEFAULT_RESULTS, dest, ignore=shutil.ignore_patterns("workers.log"))
    return dest


def answer_dir(results, committed_report, device="cpu"):
    """The run folder in `results` (a copy of the committed results) that answers for the device."""
    frame = committed_report.frame  # its `answering` column: the machine that answers for each device
    return results / "api_levels" / rundata.answer_run(frame, device)


def rewrite(run_dir, change_row=lambda row: row, change_env=lambda env: env):
    rows = [change_row(json.loads(line)) for line in rowfiles.text(run_dir).splitlines()]
    rowfiles.rewrite(run_dir, "".join(json.dumps(r) + "\n" for r in rows))
    env = json.loads((run_dir / "env.json").read_text())
    (run_dir / "env.json").write_text(json.dumps(change_env(env)))


def test_the_headline_answers_for_the_newest_machine_with_every_cpu_study_not_the_biggest(results_copy, loc_rows,
                                                                                          committed_report):
    """A fresh machine (fewer cells than the committed ones) with a complete run of every CPU study
    becomes the answer; MACHINE= names another."""
    answering = committed_report  # results_copy as read before the fresh machine's runs are added
    later = time.time() + 10 * 365 * 86400

    def shift(row):
        return {**row, "time": row["time"] - 1.7e9 + later} if "time" in row else row

    def fresh(env):
        return {**env, "hostname": "fresh", "cpu": "Test CPU", "fingerprint": "f00d",
                "host": {**env.get("host", {}), "model_name": "Test CPU"}}

    for study in rundata.CPU_STUDIES:
        run = max((r for r in answering.runs if r["study"] == study and r["machine"] == answering.machines["cpu"]),
                  key=lambda r: r["order"])
        copied = results_copy / study / f"29990101-000000-new-user-{rundata.CPU_STUDIES.index(study)}"
        shutil.copytree(results_copy / study / run["dir"].name, copied)  # its copy, as read
        rewrite(copied, shift, fresh)
        marker = json.loads((copied / "complete.json").read_text())
        (copied / "complete.json").write_text(json.dumps({**marker, "run_id": copied.name, "order": later}))
    newest = "29990101-000000-new-user-0"
    data = rundata.load_report(results_copy, loc_rows)
    text = markdown.build(data)
    assert data.answer["cpu"] == newest and data.machines["cpu"].startswith("fresh: Test CPU")
    assert f"run `{newest}` on fresh: Test CPU, " in text
    older = rundata.load_report(results_copy, loc_rows, machine="vm: AMD EPYC, 2 cores, AVX-512, peak 130 G "
                                "MAC/s (not fingerprinted)")
    assert older.answer["cpu"] != newest  # MACHINE= names another machine's runs
    by_part = rundata.load_report(results_copy, loc_rows, machine="130 G")  # a part of one machine's name
    assert by_part.answer == older.answer
    with pytest.raises(HarnessError, match="names several machines"):
        rundata.load_report(results_copy, loc_rows, machine="AMD EPYC")


def test_fastest_is_the_minimum_over_the_answering_runs_batch1_cells(committed_report):
    data = committed_report
    levels, _ = headline.levels(data.frame, data.loc_rows, data.answer)
    frame = data.frame
    for level in levels:
        for device, cell in level.cells.items():
            mine = frame[(frame["run_id"] == data.answer[device]) & (frame["study"] == "api_levels")
                         & (frame["status"] == "ok")
                         & (frame["implementation"] == level.implementation) & (frame["device"] == device)
                         & (frame["batch_size"] == 1) & (frame["dtype"] == "float32")]
            if device in level.first:
                assert level.first[device]["variant"] in mine["variant"].tolist()
            else:  # its first-written call was not timed in the answering run (older code's study file)
                assert registry.first_written(level.implementation) not in set(mine["variant"]), level.name
            if cell["study"] == "api_levels":
                assert cell["median_ms"] == mine["median_ms"].min(), level.name
                continue
            # another study of the machine timed a faster call of a variant api_levels did not time
            assert cell["median_ms"] < mine["median_ms"].min() and cell["variant"] not in set(mine["variant"])
            r = level.ratios.get(device)  # of medians across runs, or within the rounds of the cell's own study
            assert r is None or r.get("across_runs") or r.get("study") == cell["study"]


def test_the_floor_sentence_names_measure_floors_answer(committed_report):
    data = committed_report
    floors_said = {claim["device"]: claim["label"] for claim in markdown.floors(data)}  # what the floor line says
    answered = {device: fastest_call.fastest_measured(device, DEFAULT_RESULTS, run_id=data.answer[device]).label
                for device in ("cpu", "gpu")}  # measure's floor of the answering machines' runs
    assert floors_said == answered
    machine = headline.machine_of(data.frame, data.answer["cpu"])
    said = details.build(data)  # DETAILS' machine findings name the same floor, never a typed one
    assert f"The fastest call measured on this CPU is {answered['cpu']}" in said
    assert machine_findings.machine_fastest(data.frame, machine)["label"] == data.floors["cpu"].label


def test_a_cell_with_too_few_rounds_has_no_interval():
    three = [[1000.0 + i + 7 * r for i in range(20)] for r in range(3)]
    assert not stats.interval_supported(three) and stats.summarize(three)["thin"]
    two_calls = [[1000.0, 1001.0]] * 6
    assert not stats.interval_supported(two_calls)
    assert stats.interval_supported([[1000.0, 1001.0, 1002.0]] * 5)
    run = {"study": "s", "run_id": "r", "machine": "m", "env": {}, "started": 0.0, "order": 0.0, "rows": [
        {"kind": "cell", "cell_id": "null/default/cpu/b1/float32", "status": "ok", "rounds_ns": three,
         "cell": {"implementation": "null", "variant": "default", "device": "cpu", "batch_size": 1,
                  "dtype": "float32"}}]}
    cell = rundata.cells_frame([run]).iloc[0]
    assert cell["thin"] and np.isnan(cell["ci_low_ms"]) and not cell["noisy"]
    assert quote.value(cell).endswith("[no interval]") and "*thin*" in quote.quoted(cell)
    ratio = rundata.ratio_ci(cell, cell)
    assert ratio["thin"] and np.isnan(ratio["ci95_low"]) and quote.times(ratio) == "1.00x"


def test_a_stale_cell_is_marked_where_it_is_quoted(results_copy, loc_rows, committed_report):
    run_dir = answer_dir(results_copy, committed_report)
    current = provenance.collect(["onednn", "keras"])
    rewrite(run_dir, change_env=lambda env: {**env, "provenance": current})
    text = markdown.build(rundata.load_report(results_copy, loc_rows))
    row = next(line for line in text.splitlines() if line.startswith("| raw library: oneDNN |"))
    assert quote.SYMBOLS["stale"] not in row  # recorded and unchanged: current

    old = {**current, "sources": {**current["sources"], "onednn": "0" * 64, "cuda": "0" * 64}}
    rewrite(run_dir, change_env=lambda env: {**env, "provenance": old})
    data = rundata.load_report(results_copy, loc_rows)
    text = markdown.build(data)
    row = next(line for line in text.splitlines() if line.startswith("| raw library: oneDNN |"))
    assert quote.SYMBOLS["stale"] in row and f"{quote.SYMBOLS['stale']} measured on an earlier version" in text
    text = details.build(data)  # the full table says it in words, and what changed
    row = next(line for line in text.splitlines() if line.startswith("| raw library: oneDNN |"))
    assert "*stale*" in row and "*stale*: measured on older code" in text
    assert "*stale* onednn: lenet_onednn changed since it was measured (sources 00000000 ->" in text
    # its cells on this CPU were skipped: no number to be stale (a committed GPU run measured on an
    # older lenet_cuda is, and says so with its own recorded sources)
    assert "*stale* cuda: lenet_cuda changed since it was measured (sources 00000000" not in text


def test_a_run_records_its_commit_and_sources_and_flags_a_contended_round(tmp_path):
    """A busy process beside a run: its rounds are flagged in `load` rows and on the cell."""
    study = write_study(tmp_path, calls=400, rounds=2, extra=lab_cell("SleepyLeNet"))
    # at a higher priority where allowed (root): on a machine loaded by others it is still among
    # the three busiest processes that the load row names
    hog = subprocess.Popen([sys.executable, "-c", "import os\ntry:\n    os.nice(-10)\nexcept OSError:\n"
                            "    pass\nwhile True: pass"])
    try:
        done = run_cli(study, "--out", tmp_path / "out")
    finally:
        hog.kill()
        hog.wait()
    assert done.returncode == 0, done.stderr
    run_dir = only_run(tmp_path / "out")
    assert "WARNING: the machine is busy" in done.stdout + done.stderr
    cell = final_rows(run_dir)["tests.fake_impls:SleepyLeNet/default/cpu/b1/float32"]
    assert cell["contended"] and any("other processes used" in r for r in cell["contended_reasons"])
    loads = [r for r in json.loads("[" + ",".join(rowfiles.text(run_dir).splitlines()) + "]")
             if r["kind"] == "load"]
    assert [r["round"] for r in loads] == [0, 1] and all(r["contended"] for r in loads)
    assert any(b["pid"] == hog.pid for r in loads for b in r["busy"])
    env = json.loads((run_dir / "env.json").read_text())
    assert env["provenance"]["commit"] == provenance.git(ROOT, "rev-parse", "HEAD")
    assert env["provenance"]["sources"] == {}  # null and a test class: no level package to hash


def test_the_load_of_a_window_leaves_the_runs_own_processes_out():
    own, other = 1000, 2000
    before = load.Sample(0.0, 0, 1000, {own: (1, "worker", 0), other: (1, "other", 0), 3: (2, "kworker", 0)})
    after = load.Sample(2.0, 0, 1400, {own: (1, "worker", 200), other: (1, "other", 100),
                                       own + 1: (own, "child", 150), 3: (2, "kworker", 150)})
    found = load.between(before, after, {own})
    assert found["others_cores"] == pytest.approx(100 / load.TICKS / 2)
    assert [b["name"] for b in found["busy"]] == ["other"]
    assert load.contended(found) is not None  # half a core: contended
    assert load.contended({**found, "others_cores": 0.1, "steal": 0.2}).startswith("the hypervisor stole")
    assert load.contended({**found, "others_cores": 0.1, "steal": 0.0}) is None


def test_an_old_explain_row_never_calls_its_floor_the_arithmetic():
    row = {"floor": "onednn/tuned", "stages": [{"name": "tf.data pipeline", "ns": 1e6, "share": 0.9},
                                               {"name": "the model's arithmetic: the raw library's tuned "
                                                        "primitives", "ns": 3e4, "share": 0.1}]}
    assert explain_section.stage_name(row, 0) == "tf.data pipeline"
    assert explain_section.stage_name(row, 1) == ("the floor (oneDNN tuned, the fastest measured "
                                                  "implementation then)")


def test_an_explain_row_calls_its_floor_what_the_run_chose_not_the_devices_fastest():
    # the GPU explain run timed cudnn/graph beside the call, while the report's fastest GPU call can
    # be another (a resident CUDA kernel, measured later)
    row = {"floor": "cudnn/graph", "stages": [
        {"name": "JAX's per-call dispatch", "ns": 1e6, "share": 0.9},
        {"name": "the fastest measured implementation on this device (cudnn/graph)", "ns": 6e4, "share": 0.1}]}
    name = explain_section.stage_name(row, 1)
    assert name.startswith("the floor this explain run chose (cudnn/graph;")
    assert "fastest measured implementation on this device" not in name
    assert "fastest measured implementation on this device" not in explain_section.stage_claims(row, 1)["name"]
