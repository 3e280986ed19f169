"""Results nothing can corrupt (issue 71): a hostile archive, a killed run, a damaged row or a full disk
never becomes the answer, and nothing measured is lost. Archives and rows are made here, small."""

import errno
import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import time

import pytest

from harness import cli
from harness.campaign import archive, unpack
from harness.errors import HarnessError
from harness.machine import files
from harness.measure.store import results, rows, runfolder
from harness.report import markdown
from harness.report.claims import rundata
from tests import rowfiles
from tests.conftest import ROOT

NOW = time.time()
CELL_ID = "null/default/cpu/b1/float32"
SPEC = {"implementation": "null", "variant": "default", "device": "cpu", "batch_size": 1, "dtype": "float32"}


def row(kind, run_id="r1", at=NOW - 600, **fields):
    return {"schema": 1, "run_id": run_id, "time": at, "kind": kind, **fields}


def run_rows(run_id="r1", at=NOW - 600, finished=True):
    """A small run of the null level as the runner writes it: setup, two rounds, its final cell row."""
    found = [row("setup", run_id, at, cell_id=CELL_ID, pid=7, import_ns=1000, load_ns=2000, cold_start_ns=3000),
             row("round", run_id, at + 1, cell_id=CELL_ID, round=0, pid=7, times_ns=[300, 310, 320]),
             row("round", run_id, at + 2, cell_id=CELL_ID, round=1, pid=7, times_ns=[305, 315, 325])]
    if finished:
        found.append(row("cell", run_id, at + 3, cell_id=CELL_ID, study="api_levels", cell=SPEC, status="ok",
                         rounds_ns=[[300, 310, 320], [305, 315, 325]], round_process=[0, 0],
                         stats={"median_ns": 312.5, "ci95_low_ns": float("nan")}, setup=None))
    return found


def jsonl(found):
    return "".join(json.dumps(r) + "\n" for r in found)


def write_run(root, run_id, found, study="api_levels", order=None, env=None):
    run_dir = root / study / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "results.jsonl").write_text(jsonl(found))
    (run_dir / "env.json").write_text(json.dumps(env or {"hostname": "h", "cpu": "c", "cpus_usable": 2}))
    if order is not None:
        runfolder.mark_complete(run_dir, "a test's run", order=order)
    return run_dir


# --- the one reader of rows ----------------------------------------------------------------------

@pytest.mark.parametrize("bad, why", [
    (row("round", cell_id=CELL_ID, round=0, times_ns=[300, float("nan")]), "not a finite number"),
    (row("round", cell_id=CELL_ID, round=0, times_ns=[300, -1]), "expected 0 <= t"),
    (row("round", cell_id=CELL_ID, round=0, times_ns=[300, 1e300]), "expected 0 <= t"),
    (row("round", cell_id=CELL_ID, round=0, times_ns=[300, 0]), "more than 0 ns"),
    (row("round", cell_id=CELL_ID, round=0, times_ns=[300, float("inf")]), "not a finite number"),
    ({**row("round", cell_id=CELL_ID, round=0, times_ns=[300]), "schema": 2}, "schema 2 is not one"),
    ({k: v for k, v in row("load", round=0).items() if k != "schema"}, "schema None"),
    (row("cell", cell_id=CELL_ID, status="ok", rounds_ns=[[300]]), "no field 'cell'"),
    (row("cell", cell_id=CELL_ID, status="ok", cell={**SPEC, "batch_size": "1"}, rounds_ns=[[300]]),
     "field cell.'batch_size': expected int, found str"),
    (row("round", cell_id=CELL_ID, round="0", times_ns=[300]), "field 'round': expected int"),
    (row("cell", cell_id=CELL_ID, status="ok", cell=SPEC, rounds_ns=[[300]], device_stats="fast"),
     "field 'device_stats': expected dict or null, found str"),
    (row("setup", cell_id=CELL_ID, pid=[1]), "field 'pid': expected int or null, found list"),
    (row("cell", cell_id=CELL_ID, status="ok", cell=SPEC, rounds_ns="[[300]]"), "field 'rounds_ns': expected list"),
    (row("setup", cell_id=CELL_ID, cold_start_ns=float("nan")), "cold_start_ns is nan"),
    (row("setup", cell_id=CELL_ID, at=float("nan")), "time is nan"),
    ([1, 2], "expected a JSON object"),
])
def test_a_bad_row_is_named_with_why(bad, why):
    assert why in (rows.check(bad) or "")


def test_real_rows_pass_and_a_nan_interval_means_not_computed():
    """One round has no interval: the harness writes NaN there, and that row is usable."""
    assert all(rows.check(r) is None for r in run_rows())


def test_report_readers_skip_a_bad_row_with_one_warning_naming_file_and_line(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(jsonl(run_rows()[:2]) + "{not json\n" + jsonl([row("round", cell_id=CELL_ID, round=2,
                                                                       times_ns=[float("nan")])]) + '{"half')
    said = []
    found = rows.read(path, warn=said.append)
    assert len(found) == 2 and len(said) == 2
    assert said[0].startswith(f"WARNING: {path}:3: not a JSON row") and f"{path}:4: times_ns[0] is nan" in said[1]
    with pytest.raises(rows.BadRow, match=f"{path}:3: not a JSON row"):
        rows.read(path, strict=True)


def test_a_nan_row_never_reaches_the_report_and_a_bad_env_is_a_warning(tmp_path, capsys):
    run_dir = write_run(tmp_path, "r1", run_rows(), order=1.0)
    nan_cell = row("cell", cell_id="numpy/default/cpu/b1/float32", status="ok",
                   cell={**SPEC, "implementation": "numpy"}, rounds_ns=[[float("nan")]])
    rowfiles.rewrite(run_dir, jsonl([*run_rows(), nan_cell]))  # a NaN cell added to a committed run
    (run_dir / "env.json").write_text("{not json")
    runs, frame = rundata.load(tmp_path)
    assert list(frame["implementation"]) == ["null"] and frame["median_ms"].notna().all()
    assert runs[0]["machine"].startswith("?")
    err = capsys.readouterr().err
    assert f"{run_dir / 'results.jsonl.gz'}:5: rounds_ns[0][0] is nan" in err and "env.json: not a readable" in err


# --- a killed run, the newest run, one writer ----------------------------------------------------

def test_a_killed_run_never_answers_and_the_report_names_it_with_how_to_finish(tmp_path):
    write_run(tmp_path, "old", run_rows("old"), order=1.0)
    killed = write_run(tmp_path, "new", run_rows("new", at=NOW, finished=False))
    (killed / "study.toml").write_text("")
    runs = rundata.latest_runs(rundata.load_runs(tmp_path))
    assert [r["run_id"] for r in runs] == ["old"]
    (partial,) = rundata.partial_runs(tmp_path)
    (line,) = markdown.partial_lines([partial])
    assert "api_levels/new" in line and "python -m harness run api_levels --resume --run-id new" in line


def test_newest_is_this_checkouts_order_not_a_rows_time(tmp_path):
    """A run whose rows say 2096 but that completed here first is not the newest."""
    def numpy_rows(run_id, at):  # a level that computes: the null level never answers
        return [{**r, "cell": {**SPEC, "implementation": "numpy"}} if r["kind"] == "cell" else r
                for r in run_rows(run_id, at)]

    write_run(tmp_path, "future", numpy_rows("future", 4e9), order=100.0)
    write_run(tmp_path, "later", numpy_rows("later", NOW - 3600), order=200.0)
    every = rundata.load_runs(tmp_path)
    (run,) = rundata.latest_runs(every)
    assert run["run_id"] == "later"
    assert rundata.answer_run(rundata.cells_frame(every), "cpu") == "later"


def test_a_run_completed_here_is_after_every_run_marked_here_even_if_the_clock_lags(tmp_path):
    write_run(tmp_path, "marked-by-a-clock-ahead", run_rows("a"), order=NOW + 10**6)
    later = write_run(tmp_path, "later", run_rows("later"))
    runfolder.mark_complete(later, "finished")
    assert runfolder.order(later) > NOW + 10**6
    assert rundata.latest_runs(rundata.load_runs(tmp_path))[0]["run_id"] == "later"


def test_one_writer_per_run_the_second_is_refused_with_the_holder_named(tmp_path):
    first = runfolder.Writer(tmp_path)
    with pytest.raises(HarnessError, match=rf"another process is writing this run \(.* process {os.getpid()}"):
        runfolder.Writer(tmp_path)
    first.release()
    runfolder.Writer(tmp_path).release()  # a lock released (or its process killed) is free again


def test_a_second_resume_of_a_run_is_refused_while_the_first_holds_it(tmp_path):
    study = tmp_path / "t.toml"
    study.write_text('[study]\nname = "t"\nbaseline = "null"\n[measure]\ncalls = 8\nrounds = 2\nwarmup = 1\n'
                     '[[cells]]\nimplementation = "null"\ndevices = ["cpu"]\n')
    run_dir = tmp_path / "t" / "r"
    run_dir.mkdir(parents=True)
    (run_dir / "study.toml").write_text(study.read_text())
    (run_dir / "results.jsonl").write_text("")
    held = runfolder.Writer(run_dir)  # the first --resume, still running
    try:
        done = subprocess.run([sys.executable, "-m", "harness", "run", "t", "--out", str(tmp_path), "--resume",
                               "--run-id", "r"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    finally:
        held.release()
    assert done.returncode == 2 and "ERROR:" in done.stderr and "another process is writing" in done.stderr
    assert "Traceback" not in done.stderr and (run_dir / "results.jsonl").read_text() == ""
    assert runfolder.completion(run_dir) is None


def test_a_run_killed_outright_is_partial_until_resume_finishes_it(tmp_path):
    """SIGKILL leaves no chance to clean up: the run has rows and no marker, never answers, and the
    report names it; --resume (its lock went with the killed process) finishes it and marks it."""
    study = tmp_path / "t.toml"
    study.write_text('[study]\nname = "t"\nbaseline = "null"\n[measure]\ncalls = 40\nrounds = 4\nwarmup = 1\n'
                     '[[cells]]\nimplementation = "null"\ndevices = ["cpu"]\n'
                     '[[cells]]\nimplementation = "tests.fake_impls:GatedLeNet"\ndevices = ["cpu"]\n')
    env = {**os.environ, "LENET_TEST_GATE": str(tmp_path / "gate"), "LENET_TEST_GATE_AFTER": "15"}
    command = [sys.executable, "-m", "harness", "run", str(study), "--out", str(tmp_path), "--run-id", "k"]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows_path = tmp_path / "t" / "k" / "results.jsonl"
    deadline = time.monotonic() + 120  # a guard against a broken harness, not a timing check
    while time.monotonic() < deadline and not any(r["kind"] == "round" for r in rows.read(rows_path)):
        assert proc.poll() is None, "the run ended before it was killed"
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=60)
    (tmp_path / "gate").touch()  # its orphaned worker may finish its call and go
    assert runfolder.completion(rows_path.parent) is None and rundata.load_runs(tmp_path) == []
    assert [p["run_id"] for p in rundata.partial_runs(tmp_path)] == ["k"]
    done = subprocess.run([*command[:4], "t", "--out", str(tmp_path), "--resume", "--run-id", "k"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert runfolder.completion(rows_path.parent) and [r["run_id"] for r in rundata.load_runs(tmp_path)] == ["k"]


# --- import-results: checked whole, then all or nothing --------------------------------------------

def tar_bytes(top, entries):
    """entries: (name under top, bytes or None for a folder)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(f"{top}/{name}")
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def campaign(tmp_path, name="a", top="gpu-study-h-x", entries=None, manifest=None):
    entries = entries if entries is not None else [
        ("results/api_levels/r1/results.jsonl", jsonl(run_rows()).encode()),
        ("results/api_levels/r1/env.json", b'{"hostname": "h"}')]
    entries = [("manifest.json", json.dumps(manifest or {"campaign": top}).encode()), *entries]
    path = tmp_path / f"{name}.tar.gz"
    path.write_bytes(gzip.compress(tar_bytes(top, entries)))
    return path


def refused(path, into, match, limits=unpack.DEFAULT_LIMITS):
    with pytest.raises(HarnessError, match=match):
        archive.import_results(path, into, say=lambda line: None, limits=limits)
    left = [p.name for p in into.rglob("*")] if into.exists() else []
    assert left in ([], [runfolder.LOCK]), left  # nothing written (but the import's lock, an empty file)


def test_an_honest_archive_comes_in_with_a_marker_of_this_checkout(tmp_path):
    into = tmp_path / "results"
    before = time.time()
    archive.import_results(campaign(tmp_path), into, say=lambda line: None)
    marker = runfolder.completion(into / "api_levels" / "r1")
    assert marker and marker["order"] >= before and "imported from a.tar.gz" in marker["how"]
    assert not list(into.glob(".import-*"))


def test_a_gzip_bomb_stops_at_the_cap(tmp_path):
    path = campaign(tmp_path, entries=[("results/api_levels/r1/big.bin", bytes(3 << 20))])
    refused(path, tmp_path / "results", "unpacks to more than 1 MiB", unpack.Limits(total_bytes=1 << 20))


def test_too_many_entries_and_a_file_over_the_cap(tmp_path):
    many = campaign(tmp_path, entries=[(f"results/x/{i}", b"") for i in range(30)])
    refused(many, tmp_path / "results", "more than 20 entries", unpack.Limits(entries=20))
    big = campaign(tmp_path, "b", entries=[("results/x/big", bytes(2048))])
    refused(big, tmp_path / "results", "over the 0.0009765.* MiB cap on one file", unpack.Limits(file_bytes=1024))


def test_a_truncated_or_flipped_gzip_is_refused(tmp_path):
    whole = campaign(tmp_path).read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    refused(cut, tmp_path / "results", "damaged or cut off")
    flipped = bytearray(whole)
    flipped[len(whole) // 2] ^= 0xFF
    bad = tmp_path / "flipped.tar.gz"
    bad.write_bytes(bytes(flipped))
    refused(bad, tmp_path / "results", "damaged or cut off")


def test_the_same_path_twice_or_a_file_then_a_folder_is_refused(tmp_path):
    rows_path = "results/api_levels/r1/results.jsonl"
    twice = campaign(tmp_path, entries=[(rows_path, jsonl(run_rows()).encode()), (rows_path, b"")])
    refused(twice, tmp_path / "results", "in it twice")
    file_then_folder = campaign(tmp_path, "b", entries=[("results/api_levels", b"x"),
                                                        ("results/api_levels", None),
                                                        (rows_path, jsonl(run_rows()).encode())])
    refused(file_then_folder, tmp_path / "results", "twice|inside a path the archive has as a file")


@pytest.mark.parametrize("bad, match", [
    (row("round", cell_id=CELL_ID, round=0, times_ns=[float("nan")]), r"results.jsonl:4: times_ns\[0\] is nan"),
    (row("round", cell_id=CELL_ID, round=0, times_ns=[-5]), "results.jsonl:4: times_ns"),
    ({**row("load", round=0), "schema": 9}, "results.jsonl:4: schema 9"),
    (row("load", at=4e9, round=0), r"results.jsonl:5: dated 2096-.*ahead of this machine's clock"),
])
def test_a_bad_row_refuses_the_whole_archive_naming_it(tmp_path, bad, match):
    found = run_rows()[:3] + [bad] if bad["time"] < 4e9 else run_rows() + [bad]
    path = campaign(tmp_path, entries=[("results/api_levels/r1/results.jsonl", jsonl(found).encode())])
    refused(path, tmp_path / "results", f"a.tar.gz: gpu-study-h-x/results/api_levels/r1/{match}")


def test_a_bad_row_is_exit_2_with_one_error_line(tmp_path, capsys):
    found = run_rows()[:3] + [row("round", cell_id=CELL_ID, round=0, times_ns=[1e300])]
    path = campaign(tmp_path, entries=[("results/api_levels/r1/results.jsonl", jsonl(found).encode())])
    assert cli.main(["import-results", str(path), "--into", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and err.count("\n") == 1 and "results.jsonl:4" in err


def test_an_env_json_that_is_not_json_is_refused(tmp_path):
    path = campaign(tmp_path, entries=[("results/api_levels/r1/results.jsonl", jsonl(run_rows()).encode()),
                                       ("results/api_levels/r1/env.json", b"{oops")])
    refused(path, tmp_path / "results", "env.json: not a readable environment")


def test_a_known_campaigns_record_is_added_to_never_overwritten(tmp_path):
    into = tmp_path / "results"
    archive.import_results(campaign(tmp_path, manifest={"campaign": "c", "steps": ["first"]}), into,
                           say=lambda line: None)
    second = campaign(tmp_path, "b", manifest={"campaign": "c", "steps": ["second"]}, entries=[
        ("results/api_levels/r2/results.jsonl", jsonl(run_rows("r2")).encode())])
    archive.import_results(second, into, say=lambda line: None)
    record = json.loads((into / "campaigns" / "gpu-study-h-x.manifest.json").read_text())
    assert record["steps"] == ["first"] and record["later_imports"][0]["manifest"]["steps"] == ["second"]
    assert runfolder.completion(into / "api_levels" / "r2")


def test_a_killed_run_in_an_archive_comes_in_partial_and_said(tmp_path):
    into, said = tmp_path / "results", []
    path = campaign(tmp_path, entries=[("results/api_levels/r1/results.jsonl",
                                        jsonl(run_rows(finished=False)).encode())])
    archive.import_results(path, into, say=said.append)
    assert runfolder.completion(into / "api_levels" / "r1") is None
    assert any("partial run" in line for line in said) and rundata.load_runs(into) == []


def test_an_archive_with_markers_brings_an_unmarked_run_in_partial(tmp_path):
    """After markers, a run the archive does not mark complete was killed there, whatever its rows say."""
    into, said = tmp_path / "results", []
    path = campaign(tmp_path, entries=[
        ("results/api_levels/r1/results.jsonl", jsonl(run_rows("r1")).encode()),
        ("results/api_levels/r1/complete.json", json.dumps({"complete": True, "order": 9e99}).encode()),
        ("results/precision/r1/results.jsonl", jsonl(run_rows("r1")).encode())])
    archive.import_results(path, into, say=said.append)
    assert runfolder.order(into / "api_levels" / "r1") < time.time() + 1  # this checkout's order, not 9e99
    assert runfolder.completion(into / "precision" / "r1") is None
    assert any("precision/r1 is a partial run" in line for line in said)


def test_two_imports_at_once_the_second_is_refused_and_a_killed_ones_staging_goes(tmp_path):
    into = tmp_path / "results"
    (into / ".import-gpu-study-h-x-1").mkdir(parents=True)  # left by an import killed outright
    held = runfolder.hold_results(into)
    refused_now = pytest.raises(HarnessError, match="another process is writing an import into this results")
    with refused_now:
        archive.import_results(campaign(tmp_path), into, say=lambda line: None)
    held.release()
    archive.import_results(campaign(tmp_path), into, say=lambda line: None)
    assert runfolder.completion(into / "api_levels" / "r1") and not list(into.glob(".import-*"))


def test_an_import_that_fails_on_the_way_leaves_nothing(tmp_path, monkeypatch):
    """A full disk while staging: the staging folder is removed, nothing is in place."""
    into = tmp_path / "results"
    (into / "api_levels" / "r0").mkdir(parents=True)
    real = unpack.Staging.put
    calls = []

    def full_disk(self, rel, data):
        calls.append(rel)
        if len(calls) == 2:
            raise HarnessError(f"{files.disk_error(into / rel, OSError(errno.ENOSPC, 'full'))}; nothing imported")
        real(self, rel, data)

    monkeypatch.setattr(unpack.Staging, "put", full_disk)
    with pytest.raises(HarnessError, match="the disk is full"):
        archive.import_results(campaign(tmp_path), into, say=lambda line: None)
    assert sorted(p.name for p in into.rglob("*")) == [runfolder.LOCK, "api_levels", "r0"]


def test_a_rename_that_fails_moves_back_what_was_moved(tmp_path, monkeypatch):
    into = tmp_path / "results"
    (into / "api_levels").mkdir(parents=True)
    real, seen = os.rename, []

    def fails_second(src, dst):
        seen.append(dst)
        if len(seen) == 2:
            raise OSError(errno.EXDEV, "cross-device")
        real(src, dst)

    monkeypatch.setattr(unpack.os, "rename", fails_second)
    with pytest.raises(HarnessError, match="nothing imported"):
        archive.import_results(campaign(tmp_path), into, say=lambda line: None)
    assert sorted(p.name for p in into.rglob("*")) == [runfolder.LOCK, "api_levels"]


# --- a full disk ----------------------------------------------------------------------------------

def test_a_file_written_whole_keeps_its_last_version_on_a_full_disk(tmp_path, monkeypatch):
    report = tmp_path / "REPORT.md"
    files.write_atomic(report, "the last report\n")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(HarnessError, match=r"REPORT.md: cannot write it \(the disk is full\)"):
        files.write_atomic(report, "a new report that does not fit\n")
    assert report.read_text() == "the last report\n" and os.listdir(tmp_path) == ["REPORT.md"]


def test_a_run_on_a_full_disk_keeps_every_complete_row(tmp_path, monkeypatch):
    writer = results.RowWriter(tmp_path, "r")
    writer.write({"kind": "load", "round": 0})
    real = os.write

    def half(fd, data):
        real(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(results.os, "write", half)
    with pytest.raises(HarnessError, match=r"results.jsonl: cannot write it \(the disk is full\).*--resume"):
        writer.write({"kind": "load", "round": 1})
    writer.close()
    assert [r["round"] for r in rows.read(tmp_path / "results.jsonl", strict=True)] == [0]
    assert (tmp_path / "results.jsonl").read_bytes().endswith(b"\n")


def test_the_cli_turns_a_full_disk_into_one_error_line(monkeypatch, capsys):
    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device", "/x/loc.csv")

    monkeypatch.setattr(cli, "build_parser", lambda: _parser_for(full))
    assert cli.main(["loc"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR: /x/loc.csv: cannot write it (the disk is full)") and "Traceback" not in err


def _parser_for(func):
    import argparse

    parser = argparse.ArgumentParser()
    parser.set_defaults(func=func, data_dir=None, gpu=None)
    parser.add_argument("command")
    return parser


def test_report_out_a_folder_writes_both_documents_inside_it(tmp_path):
    """`report --out DIR`: REPORT.md and DETAILS.md inside the folder, not an error."""
    from harness.cli import main

    results, out = tmp_path / "results", tmp_path / "out"
    results.mkdir()
    out.mkdir()
    assert main(["report", "--results", str(results), "--out", str(out)]) == 0
    assert (out / "REPORT.md").is_file() and (out / "DETAILS.md").is_file()
