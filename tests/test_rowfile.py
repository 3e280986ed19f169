"""A complete run's rows stored compressed (issue 78): written whole by the command that marks the run
complete, read whole or not at all, and imported from an archive under the same caps and checks as
plain rows. Rows and archives are made here, small."""

import errno
import gzip
import hashlib
import json
import subprocess
import sys

import pytest

from harness.campaign import archive, unpack
from harness.errors import HarnessError
from harness.machine import files
from harness.measure.store import results, rowfile, rows, runfolder
from harness.report.claims import rundata
from tests.conftest import ROOT
from tests.test_results_integrity import CELL_ID, campaign, jsonl, refused, row, run_rows, write_run


def packed_run(tmp_path, run_id="r1", found=None):
    return write_run(tmp_path, run_id, found or run_rows(run_id), order=1.0)


# --- written on completion -----------------------------------------------------------------------

def test_completing_a_run_compresses_its_rows_and_records_them_in_the_marker(tmp_path):
    run_dir = packed_run(tmp_path)
    data = jsonl(run_rows()).encode()
    assert not (run_dir / rowfile.PLAIN).exists()
    packed = (run_dir / rowfile.PACKED).read_bytes()
    assert gzip.decompress(packed) == data and packed[4:8] == b"\0\0\0\0"  # gzip's mtime field: 0
    marker = runfolder.completion(run_dir)
    assert marker["rows"] == 4 and marker["rows_sha256"] == hashlib.sha256(data).hexdigest()
    assert jsonl(results.read_rows(run_dir)) == jsonl(run_rows())
    again = packed_run(tmp_path / "again")  # the same rows, the same bytes
    assert (again / rowfile.PACKED).read_bytes() == packed


def test_a_partial_run_stays_plain_and_its_cut_last_line_is_skipped(tmp_path):
    run_dir = write_run(tmp_path, "k", run_rows("k", finished=False))
    with open(run_dir / rowfile.PLAIN, "a") as f:
        f.write('{"schema": 1, "kind": "round", "cu')  # killed mid-write
    assert not (run_dir / rowfile.PACKED).exists()
    assert jsonl(results.read_rows(run_dir, strict=True)) == jsonl(run_rows("k", finished=False))
    assert [p["run_id"] for p in rundata.partial_runs(tmp_path)] == ["k"]


def test_pack_complete_converts_a_run_completed_before_compression_keeping_its_marker(tmp_path):
    run_dir = tmp_path / "api_levels" / "old"
    run_dir.mkdir(parents=True)
    (run_dir / rowfile.PLAIN).write_text(jsonl(run_rows("old")))
    (run_dir / runfolder.MARKER).write_text(json.dumps({"run_id": "old", "complete": True, "how": "finished",
                                                        "order": 1234.5}))
    assert jsonl(results.read_rows(run_dir)) == jsonl(run_rows("old"))  # read as it is, plain
    assert runfolder.pack_complete(run_dir) and not runfolder.pack_complete(run_dir)
    marker = runfolder.completion(run_dir)
    assert marker["order"] == 1234.5 and marker["how"] == "finished" and marker["rows"] == 4
    assert jsonl(results.read_rows(run_dir)) == jsonl(run_rows("old")) and not (run_dir / rowfile.PLAIN).exists()


def test_a_runs_rows_in_either_form_have_one_reader(tmp_path):
    """results.read_rows, which the report, the floor, reproduce and the runner call, is the one reader
    (rows.read_run): a partial run's plain rows and a complete run's compressed rows both read there."""
    assert results.read_rows is rows.read_run
    partial = write_run(tmp_path / "partial", "k", run_rows("k", finished=False))
    assert (partial / rowfile.PLAIN).is_file() and rows.read_run(partial) == run_rows("k", finished=False)
    complete = packed_run(tmp_path / "complete")
    assert (complete / rowfile.PACKED).is_file() and jsonl(rows.read_run(complete)) == jsonl(run_rows())


# --- read whole or not at all --------------------------------------------------------------------

def damage(run_dir, change):
    path = run_dir / rowfile.PACKED
    path.write_bytes(change(path.read_bytes()))
    return path


@pytest.mark.parametrize("change, why", [
    (lambda data: data[: len(data) // 2], "cut off"),
    (lambda data: data[:-3], "cut off"),  # the trailer's length field cut short
    (lambda data: data[:20] + bytes([data[20] ^ 0xFF]) + data[21:], "damaged"),
    (lambda data: data[:-8] + bytes([data[-8] ^ 0x01]) + data[-7:], "damaged"),  # its CRC
    (lambda data: data + gzip.compress(b"{}\n", mtime=0), "after the end of the compressed rows"),
    (lambda data: b"not gzip at all", "damaged"),
])
def test_cut_or_damaged_compressed_rows_are_an_error_naming_the_file_even_for_the_report(tmp_path, change, why):
    path = damage(packed_run(tmp_path), change)
    for strict in (True, False):
        with pytest.raises(rows.BadRow, match=f"{path}: .*{why}"):
            results.read_rows(path.parent, strict=strict)
    with pytest.raises(HarnessError, match=f"{path}: "):
        rundata.load_runs(tmp_path)


def test_compressed_rows_that_disagree_with_the_marker_are_an_error(tmp_path):
    run_dir = packed_run(tmp_path)
    fewer = jsonl(run_rows()[:3]).encode()
    damage(run_dir, lambda data: rowfile.compress(fewer))  # whole lines, a valid stream: one row short
    with pytest.raises(rows.BadRow, match=r"not the ones the completion marker records \(rows: the marker says 4, "
                                          r"the file holds 3\)"):
        results.read_rows(run_dir)
    changed = jsonl(run_rows()).replace('"pid": 7', '"pid": 8').encode()  # as many rows, other bytes
    damage(run_dir, lambda data: rowfile.compress(changed))
    with pytest.raises(rows.BadRow, match="rows_sha256: the marker says"):
        results.read_rows(run_dir)


def test_compressed_rows_ending_inside_a_row_are_refused_even_if_the_marker_agrees(tmp_path):
    run_dir = packed_run(tmp_path)
    cut = jsonl(run_rows()).encode()[:-10]
    damage(run_dir, lambda data: rowfile.compress(cut))
    marker = runfolder.completion(run_dir)
    (run_dir / runfolder.MARKER).write_text(json.dumps({**marker, **rowfile.record(cut)}))
    with pytest.raises(rows.BadRow, match="end inside a row"):
        results.read_rows(run_dir)


def test_compressed_rows_without_their_marker_or_a_marker_without_its_rows(tmp_path):
    run_dir = packed_run(tmp_path)
    marker = (run_dir / runfolder.MARKER).read_text()
    (run_dir / runfolder.MARKER).unlink()
    with pytest.raises(rows.BadRow, match="compressed rows without a completion marker that records them"):
        results.read_rows(run_dir)
    (run_dir / runfolder.MARKER).write_text(marker)
    (run_dir / rowfile.PACKED).rename(run_dir / "elsewhere.gz")
    with pytest.raises(rows.BadRow, match=r"results.jsonl.gz: missing; the run's completion marker records"):
        results.read_rows(run_dir)


def test_a_gzip_bomb_in_the_results_stops_at_the_cap(tmp_path, monkeypatch):
    run_dir = packed_run(tmp_path)
    monkeypatch.setattr(rowfile, "CAP_BYTES", 100)
    with pytest.raises(rows.BadRow, match=r"unpack to more than .*\(a gzip bomb\?\)"):
        results.read_rows(run_dir)


def test_a_damaged_run_makes_the_report_exit_2_with_one_error_line(tmp_path):
    path = damage(packed_run(tmp_path), lambda data: data[:-20])
    done = subprocess.run([sys.executable, "-m", "harness", "report", "--results", str(tmp_path), "--out",
                           str(tmp_path / "R.md")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"ERROR: {path}: the compressed rows are cut off" in done.stderr


# --- killed or out of disk while completing -------------------------------------------------------

def test_a_kill_between_compressing_and_the_marker_leaves_a_partial_plain_run(tmp_path, monkeypatch):
    run_dir = write_run(tmp_path, "k", run_rows("k"))

    def killed(path, data):
        if path.name == runfolder.MARKER:
            raise KeyboardInterrupt  # the process dies here
        return files.write_atomic(path, data)

    monkeypatch.setattr(runfolder, "write_atomic", killed)
    with pytest.raises(KeyboardInterrupt):
        runfolder.mark_complete(run_dir, "finished")
    monkeypatch.undo()
    assert (run_dir / rowfile.PLAIN).is_file() and (run_dir / rowfile.PACKED).is_file()
    assert runfolder.completion(run_dir) is None and jsonl(results.read_rows(run_dir)) == jsonl(run_rows("k"))
    runfolder.mark_complete(run_dir, "finished (resumed)")  # --resume finishes it
    assert jsonl(results.read_rows(run_dir)) == jsonl(run_rows("k")) and not (run_dir / rowfile.PLAIN).exists()


def test_a_kill_after_the_marker_reads_the_compressed_rows(tmp_path, monkeypatch):
    run_dir = write_run(tmp_path, "k", run_rows("k"))
    monkeypatch.setattr(rowfile, "drop_plain", lambda run_dir: None)  # killed before the plain file goes
    runfolder.mark_complete(run_dir, "finished")
    (run_dir / rowfile.PLAIN).write_text("")  # whatever is left there is not read
    assert jsonl(results.read_rows(run_dir)) == jsonl(run_rows("k"))


def test_a_full_disk_while_compressing_keeps_the_run_partial_with_its_plain_rows(tmp_path, monkeypatch):
    run_dir = write_run(tmp_path, "k", run_rows("k"))

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(HarnessError, match=r"results.jsonl.gz: cannot write it \(the disk is full\)"):
        runfolder.mark_complete(run_dir, "finished")
    monkeypatch.undo()
    assert runfolder.completion(run_dir) is None and not (run_dir / rowfile.PACKED).exists()
    assert (run_dir / rowfile.PLAIN).read_text() == jsonl(run_rows("k"))
    assert sorted(p.name for p in run_dir.iterdir()) == ["env.json", rowfile.PLAIN]  # no temporary file left


# --- an archive holding compressed rows ------------------------------------------------------------

def marker_bytes(data, **more):
    return json.dumps({"run_id": "r1", "complete": True, "how": "finished", "order": 5.0,
                       **rowfile.record(data), **more}).encode()


def packed_campaign(tmp_path, data=None, marker=None, name="a", extra=()):
    data = jsonl(run_rows()).encode() if data is None else data
    return campaign(tmp_path, name, entries=[
        ("results/api_levels/r1/results.jsonl.gz", rowfile.compress(data)),
        ("results/api_levels/r1/complete.json", marker_bytes(data) if marker is None else marker),
        ("results/api_levels/r1/env.json", b'{"hostname": "h"}'), *extra])


def test_an_archive_of_compressed_rows_comes_in_compressed_with_this_checkouts_marker(tmp_path):
    into = tmp_path / "results"
    archive.import_results(packed_campaign(tmp_path), into, say=lambda line: None)
    run_dir = into / "api_levels" / "r1"
    marker = runfolder.completion(run_dir)
    assert marker["order"] != 5.0 and "imported from a.tar.gz" in marker["how"] and marker["rows"] == 4
    assert jsonl(results.read_rows(run_dir, strict=True)) == jsonl(run_rows())
    assert not (run_dir / rowfile.PLAIN).exists()


def test_an_archive_of_plain_rows_of_a_complete_run_comes_in_compressed(tmp_path):
    into = tmp_path / "results"
    archive.import_results(campaign(tmp_path), into, say=lambda line: None)
    run_dir = into / "api_levels" / "r1"
    assert sorted(p.name for p in run_dir.iterdir()) == ["complete.json", "env.json", rowfile.PACKED]
    assert jsonl(results.read_rows(run_dir, strict=True)) == jsonl(run_rows())


def test_a_compressed_partial_run_in_an_archive_comes_in_plain_and_said(tmp_path):
    into, said = tmp_path / "results", []
    data = jsonl(run_rows(finished=False)).encode()
    archive.import_results(packed_campaign(tmp_path, data), into, say=said.append)
    run_dir = into / "api_levels" / "r1"
    assert runfolder.completion(run_dir) is None and (run_dir / rowfile.PLAIN).read_bytes() == data
    assert not (run_dir / rowfile.PACKED).exists() and any("partial run" in line for line in said)


@pytest.mark.parametrize("change, match", [
    (lambda data: data[: len(data) // 2], "results.jsonl.gz: the compressed rows are cut off"),
    (lambda data: data[:20] + bytes([data[20] ^ 0xFF]) + data[21:], "results.jsonl.gz: the compressed rows are damaged"),
    (lambda data: data + b"\0" * 8, "results.jsonl.gz: 8 bytes after the end"),
])
def test_cut_or_damaged_compressed_rows_refuse_the_archive(tmp_path, change, match):
    data = jsonl(run_rows()).encode()
    path = campaign(tmp_path, entries=[("results/api_levels/r1/results.jsonl.gz", change(rowfile.compress(data))),
                                       ("results/api_levels/r1/complete.json", marker_bytes(data))])
    refused(path, tmp_path / "results", f"a.tar.gz: gpu-study-h-x/results/api_levels/r1/{match}")


@pytest.mark.parametrize("marker, match", [
    (b"", "without a completion marker that records them"),  # none in the archive
    (b"{not json", "without a completion marker that records them"),
    (json.dumps({"complete": True, "order": 1.0}).encode(), "without a completion marker that records them"),
    (json.dumps({"complete": False, "rows": 4}).encode(), "without a completion marker that records them"),
    (marker_bytes(b"{}\n{}\n"), r"not the ones the completion marker records \(rows: the marker says 2"),
])
def test_compressed_rows_that_their_archives_marker_does_not_record_refuse_it(tmp_path, marker, match):
    data = jsonl(run_rows()).encode()
    entries = [("results/api_levels/r1/results.jsonl.gz", rowfile.compress(data))]
    entries += [("results/api_levels/r1/complete.json", marker)] if marker else []
    refused(campaign(tmp_path, entries=entries), tmp_path / "results", match)


def test_a_bad_row_inside_compressed_rows_refuses_the_archive_naming_file_and_line(tmp_path):
    found = run_rows()[:3] + [row("round", cell_id=CELL_ID, round=0, times_ns=[float("nan")])]
    data = jsonl(found).encode()
    path = packed_campaign(tmp_path, data)
    refused(path, tmp_path / "results", r"api_levels/r1/results.jsonl.gz:4: times_ns\[0\] is nan")
    ahead = jsonl(run_rows() + [row("load", at=4e9, round=0)]).encode()
    refused(packed_campaign(tmp_path, ahead, name="b"), tmp_path / "results",
            r"results.jsonl.gz:5: dated 2096-.*ahead of this machine's clock")


def test_compressed_rows_count_against_the_caps_by_their_uncompressed_size(tmp_path):
    """A gzip bomb inside the archive: a few KiB that unpack to 64 MiB stop at the cap, never whole."""
    bomb = gzip.compress(b"\n" * (64 << 20), mtime=0)
    path = campaign(tmp_path, entries=[("results/api_levels/r1/results.jsonl.gz", bomb),
                                       ("results/api_levels/r1/complete.json", marker_bytes(b"\n"))])
    assert path.stat().st_size < 1 << 20
    refused(path, tmp_path / "results", r"unpack to more than 1 MiB \(the caps: 1 MiB a file",
            unpack.Limits(file_bytes=1 << 20))
    data = jsonl(run_rows() * 200).encode()  # 400 KiB of rows in a 20 KiB tar: over what it may unpack to
    small = packed_campaign(tmp_path, data, name="b")
    refused(small, tmp_path / "results", r"b.tar.gz: .*results.jsonl.gz: the compressed rows unpack to more than",
            unpack.Limits(total_bytes=100 << 10))


def test_a_run_with_both_forms_in_an_archive_is_refused(tmp_path):
    data = jsonl(run_rows()).encode()
    path = packed_campaign(tmp_path, extra=[("results/api_levels/r1/results.jsonl", data)])
    refused(path, tmp_path / "results", r"api_levels/r1 holds its rows twice")


def test_an_archive_never_overwrites_a_run_here_in_either_form(tmp_path):
    into = tmp_path / "results"
    archive.import_results(packed_campaign(tmp_path), into, say=lambda line: None)
    before = (into / "api_levels" / "r1" / rowfile.PACKED).read_bytes()
    plain = campaign(tmp_path, "b", entries=[("results/api_levels/r1/results.jsonl", jsonl(run_rows()).encode())])
    with pytest.raises(HarnessError, match=r"would overwrite 1 file\(s\).*api_levels/r1/results.jsonl.gz"):
        archive.import_results(plain, into, say=lambda line: None)
    assert (into / "api_levels" / "r1" / rowfile.PACKED).read_bytes() == before


def test_a_full_disk_while_importing_compressed_rows_leaves_nothing(tmp_path, monkeypatch):
    into = tmp_path / "results"
    real = unpack.Staging.put

    def full_disk(self, rel, data):
        if rel.name == rowfile.PACKED:
            raise HarnessError(f"{files.disk_error(into / rel, OSError(errno.ENOSPC, 'full'))}; nothing imported")
        real(self, rel, data)

    monkeypatch.setattr(unpack.Staging, "put", full_disk)
    with pytest.raises(HarnessError, match="the disk is full"):
        archive.import_results(packed_campaign(tmp_path), into, say=lambda line: None)
    assert sorted(p.name for p in into.rglob("*")) == [runfolder.LOCK]
