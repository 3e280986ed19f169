"""What a process keeps between reads of the results (rows.CHECKED, cells.SUMMARIES) changes the
time of a read, never its answer: a row checked once is not checked again but is a new object each
read, a bad row is refused every time, and a cell's statistics are stats.summarize's for exactly its
times, a copy each time."""

import numpy as np

from harness.measure.plan import cells
from harness.measure.store import rows, stats


def row_line(times_ns: list[int]) -> str:
    return ('{"schema": 1, "run_id": "r", "kind": "round", "time": 1.7e9, "cell_id": "c", "round": 0, '
            f'"times_ns": {times_ns}}}\n')


def test_a_checked_row_is_read_again_as_a_new_object_and_a_bad_row_is_refused_every_time():
    good, bad = row_line([1000, 1100]), row_line([1000, 0])  # a call of 0 ns is refused
    warnings: list[str] = []
    first = rows.read_lines([good, bad], "f", warn=warnings.append)
    assert rows.line_digest(good) in rows.CHECKED and rows.line_digest(bad) not in rows.CHECKED
    first[0]["times_ns"].append(5)  # a reader changes its rows
    second = rows.read_lines([good, bad], "f", warn=warnings.append)
    assert second == [rows.parse(good)] and second[0] is not first[0]
    assert len(warnings) == 2 and all("times_ns holds 0 ns" in w for w in warnings)


def test_a_cells_statistics_are_summarizes_for_its_exact_times_and_a_copy_each_time():
    rng = np.random.default_rng(1)
    rounds = [[int(t) for t in rng.integers(10_000, 12_000, 20)] for _ in range(6)]
    processes = [0, 0, 0, 1, 1, 1]
    got = cells.summary(rounds, processes)
    assert got == stats.summarize(rounds, processes) == cells.summary(rounds, processes)
    got["process_medians_ns"].clear()  # cell_statistics changes its copy (a thin cell's interval)
    assert cells.summary(rounds, processes)["process_medians_ns"]
    slower = [[t + 1 for t in r] for r in rounds[:1]] + rounds[1:]  # one call of one round differs
    assert cells.summary(slower, processes) == stats.summarize(slower, processes) != got
    assert cells.summary(rounds, None) == stats.summarize(rounds)  # the processes are in the key
