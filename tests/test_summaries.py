"""Each cell is summarised once: its summary is saved with its row beside the version of the code that
computed it (stats.SUMMARY_VERSION), read back while that version is current (checked against the row's
own times), computed again from the times when it is not; upgrade-results gives old rows theirs."""

import json
import shutil

import numpy as np
import pytest

from harness import DEFAULT_RESULTS
from harness.measure.plan import cells
from harness.measure.store import rowfile, rows, stats, upgrade
from tests import rowfiles
from tests.conftest import harness_in_process

PROCESSES = [0, 0, 0, 1, 1, 1]


def some_rounds() -> list[list[int]]:
    rng = np.random.default_rng(1)
    return [[int(t) for t in rng.integers(10_000, 12_000, 20)] for _ in PROCESSES]


def cell_line(rounds: list[list[int]], summary: dict | None, version: int | None = stats.SUMMARY_VERSION) -> str:
    row = {"schema": 1, "run_id": "r", "kind": "cell", "time": 1.7e9, "cell_id": "numpy/default/cpu/b1/float32",
           "status": "ok", "cell": {"implementation": "numpy", "variant": "default", "device": "cpu",
                                    "batch_size": 1, "dtype": "float32"},
           "rounds_ns": rounds, "round_process": PROCESSES, "stats": summary}
    if version is not None:
        row["stats_version"] = version
    return json.dumps(row) + "\n"


def same(a: dict, b: dict) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)  # NaN (no interval) equals NaN


def test_a_saved_summary_of_the_current_version_is_read_back_not_computed_again(monkeypatch):
    rounds = some_rounds()
    saved = stats.summarize(rounds, PROCESSES)
    [row] = rows.read_lines([cell_line(rounds, saved)], "f", strict=True)

    def no_bootstrap(*args, **kwargs):
        raise AssertionError("a saved summary of the current version was computed again")

    monkeypatch.setattr(stats, "summarize", no_bootstrap)
    got = cells.row_summary(row)
    assert got is not None and same(got, saved)
    got["ci95_low_ns"] = float("nan")  # the report blanks a thin cell's interval in its copy
    assert cells.row_summary(row)["ci95_low_ns"] == saved["ci95_low_ns"]


@pytest.mark.parametrize("version", [None, stats.SUMMARY_VERSION - 1, stats.SUMMARY_VERSION + 1])
def test_a_summary_of_another_version_or_none_is_computed_again_from_the_times(version):
    rounds = some_rounds()
    today = stats.summarize(rounds, PROCESSES)
    older = {**today, "median_ns": today["median_ns"] + 7, "drawn": not today["drawn"]}  # possible, not today's
    [row] = rows.read_lines([cell_line(rounds, older, version)], "f", strict=True)
    assert same(cells.row_summary(row), today)


def edited(field: str, value) -> dict:
    summary = stats.summarize(some_rounds(), PROCESSES)
    if value is None:
        del summary[field]
    else:
        summary[field] = value(summary) if callable(value) else value
    return summary


@pytest.mark.parametrize("summary, rounds, said", [
    (edited("median_ns", lambda s: s["max_ns"] + 1), None, "stats.median_ns"),
    (edited("min_ns", lambda s: s["min_ns"] - 1), None, "stats.min_ns, stats.max_ns are"),
    (edited("n", lambda s: s["n"] + 1), None, "stats.n, stats.rounds are 121, 6"),
    (edited("mean_ns", lambda s: s["mean_ns"] * 1.001), None, "stats.mean_ns"),
    (edited("ci95_high_ns", lambda s: s["max_ns"] * 2), None, "stats.ci95_low_ns, stats.ci95_high_ns are"),
    (edited("within_ci95_low_ns", lambda s: s["within_ci95_high_ns"] + 1), None, "stats.within_ci95_low_ns"),
    (edited("thin", True), None, "stats.thin is True"),
    (edited("process_medians_ns", [1.0]), None, "stats.process_medians_ns"),
    (edited("median_ns", "fast"), None, "field stats.median_ns: expected a number, found 'fast'"),
    (edited("drawn", None), None, "no field stats.drawn"),
    (edited("n", lambda s: s["n"]), [[3 * t for t in r] for r in some_rounds()], "stats.min_ns, stats.max_ns"),
])
def test_an_impossible_saved_summary_is_named_and_computed_again_or_refused_when_strict(summary, rounds, said):
    """A saved summary that cannot be its row's (damaged, edited by hand, its times changed) is named by
    file:line and field; the report's reader computes the summary again from the times (the measurement),
    a strict read (import-results) refuses the row."""
    rounds = rounds or some_rounds()
    line = cell_line(rounds, summary)
    warnings: list[str] = []
    [row] = rows.read_lines([line], "runs/r/results.jsonl", warn=warnings.append)
    assert len(warnings) == 1 and warnings[0].startswith("WARNING: runs/r/results.jsonl:1: ")
    assert said in warnings[0] and "computed again from its times" in warnings[0]
    assert same(cells.row_summary(row), stats.summarize(rounds, PROCESSES))
    with pytest.raises(rows.BadRow, match="runs/r/results.jsonl:1: .*" + said.split(" ")[0].replace(".", r"\.")):
        rows.read_lines([line], "runs/r/results.jsonl", strict=True)


@pytest.mark.parametrize("fields, said", [
    ({"kind": "round", "cell_id": "c", "round": 0, "times_ns": [1000, float("nan")]}, "times_ns[1] is nan"),
    ({"kind": "round", "cell_id": "c", "round": 0, "times_ns": [1000, 10**400]}, "times_ns[1] is an integer of 1329 bits"),
    ({"kind": "round", "cell_id": "c", "round": 0, "times_ns": [1000, -1]}, "times_ns[1] is -1 ns"),
    ({"kind": "setup", "cell_id": "c", "memory": {"model": {"peak": float("inf")}}}, "memory.model.peak is inf"),
    ({"kind": "setup", "cell_id": "c", "import_ns": -5}, "import_ns is -5 ns"),
    ({"kind": "setup", "cell_id": "c", "gpu": [{"busy_ns": [5, 2.5e13]}]}, "gpu[0].busy_ns[1] is 2.5e+13 ns"),
    ({"kind": "load", "round": 0, "spread": float("nan"), "busy": [1e400]}, "busy[0] is inf"),
])
def test_the_row_check_names_the_first_unusable_number_wherever_it_lies(fields, said):
    row = {"schema": 1, "run_id": "r", "time": 1.7e9, **fields}
    assert said in (rows.check(json.loads(json.dumps(row))) or "")


def test_a_row_read_twice_is_two_objects():
    line = '{"schema": 1, "run_id": "r", "kind": "round", "time": 1.7e9, "cell_id": "c", "round": 0, "times_ns": [5]}\n'
    first = rows.read_lines([line], "f", strict=True)
    first[0]["times_ns"].append(6)  # a reader changes its rows
    assert rows.read_lines([line], "f", strict=True) == [rows.parse(line)]


def smallest_run() -> "rowfile.Path":
    found = sorted(DEFAULT_RESULTS.glob(f"api_levels/*/{rowfile.PACKED}"), key=lambda p: p.stat().st_size)
    if not found:
        pytest.skip("no committed reference results (make run-all writes them)")
    return found[0].parent


def test_upgrade_gives_old_rows_todays_summary_and_changes_nothing_measured(tmp_path, capsys):
    run_dir = tmp_path / "api_levels" / smallest_run().name
    shutil.copytree(smallest_run(), run_dir)
    old = []
    for line in rowfiles.text(run_dir).splitlines(keepends=True):
        row = json.loads(line)
        if row["kind"] == "cell" and "stats_version" in row:  # as written before versions, its stats wrong
            del row["stats_version"]
            row["stats"] = {"median_ns": 1.0} if row["stats"] else None
            line = json.dumps(row, separators=(",", ":")) + "\n"
        old.append(line)
    rowfiles.rewrite(run_dir, "".join(old))
    measured = [json.loads(line) for line in old if rows.measured(json.loads(line))]
    assert measured

    done = harness_in_process(capsys, "upgrade-results", "--results", tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"1 of 1 complete runs upgraded, {len(measured)} cell rows" in done.stdout
    new = rowfiles.text(run_dir).splitlines(keepends=True)
    assert len(new) == len(old)
    for before, after in zip(old, new, strict=True):
        a, b = json.loads(before), json.loads(after)
        if not rows.measured(a):
            assert after == before  # byte for byte
            continue
        assert b["stats_version"] == stats.SUMMARY_VERSION
        assert same(b["stats"], stats.summarize(a["rounds_ns"], a.get("round_process")))
        assert same({k: v for k, v in a.items() if k not in upgrade.SAVED},
                    {k: v for k, v in b.items() if k not in upgrade.SAVED})
    assert len(rows.read_run(run_dir, strict=True)) == len(old)  # the marker records the new rows
    assert upgrade.upgrade_run(run_dir) == 0  # nothing left to upgrade: the files are left alone


def test_the_committed_rows_carry_todays_summaries():
    """Every measured committed cell row saves a summary of the current version (so the report reads it),
    and a sample of them is what today's code computes from their times: a change to stats.summarize
    without a bump of SUMMARY_VERSION (and upgrade-results) fails here."""
    found = [row for path in sorted(DEFAULT_RESULTS.rglob(rowfile.PACKED))
             for row in rows.read_run(path.parent, strict=True) if rows.measured(row)]
    if not found:
        pytest.skip("no committed reference results (make run-all writes them)")
    assert [row["cell_id"] for row in found if row.get("stats_version") != stats.SUMMARY_VERSION] == []
    several = [row for row in found if len(set(row.get("round_process") or [0])) > 1]
    thin = [row for row in found if row["stats"]["thin"]]
    for row in found[::50] + several[::25] + thin[:3]:
        assert same(row["stats"], stats.summarize(row["rounds_ns"], row.get("round_process"))), row["cell_id"]


def test_a_final_row_saves_its_summary_with_the_current_version_and_reads_it_back(monkeypatch):
    """What the runner writes (cells.final_row), through the row reader, is used as saved."""
    from harness.measure.plan.study import Cell

    rounds = some_rounds()
    state = cells.CellState(cell=Cell("numpy", "default", "cpu", 1, "float32", 20), chunks=[20] * 6,
                            rounds={i: (r, None) for i, r in enumerate(rounds)},
                            round_process={i: [p, 100 + p] for i, p in enumerate(PROCESSES)})
    row = cells.final_row(state, "api_levels", "ok", None)
    assert row["stats_version"] == stats.SUMMARY_VERSION
    assert same(row["stats"], stats.summarize(rounds, PROCESSES))
    line = json.dumps({"schema": 1, "run_id": "r", "time": 1.7e9, **row}, separators=(",", ":")) + "\n"
    [back] = rows.read_lines([line], "f", strict=True)
    monkeypatch.setattr(stats, "summarize", None)  # read back, never computed again
    assert same(cells.row_summary(back), row["stats"])
