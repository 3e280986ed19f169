"""Statistics of raw per-call times (ns), computed from the raw times, which are always kept.

Robust by default (median, percentiles, IQR), as in torch.utils.benchmark and pyperf.

Intervals come from the rounds, not from single calls. Calls within a round are correlated:
the machine's speed shifts in phases lasting seconds, so a whole round can run 1.7x slower
than the next. A bootstrap over calls treats 1000 calls as 1000 independent draws and gives
an interval far too narrow (on the reference VM, runs of one cell minutes apart gave disjoint
intervals 15 times in 17). So the 95% interval of a median is a cluster bootstrap: resample
the rounds with replacement, pool their calls, take the median; the same for a within-round
ratio (resample the rounds' ratios). Seeded, so the same rows always give the same report.

A cell is flagged `noisy` when its estimate is unstable across rounds: the interval is wider
than NOISY_CI_OVER_MEDIAN of the median. The per-call spread (IQR / median) is reported apart:
a wide distribution measured in stable rounds is not noise in the estimate.

An interval needs rounds to resample: with fewer than MIN_ROUNDS rounds, or a round of fewer than
MIN_CALLS_PER_ROUND calls, the bootstrap's "95%" is the spread of a handful of numbers (from three
rounds, their min and max), not an interval. Such a cell is `thin` (`interval_supported` is False):
the report shows its median without an interval and marks it, and a ratio with fewer than
MIN_ROUNDS rounds likewise.

Processes are a level of their own (Kalibera and Jones 2013; pyperf's worker processes): a fresh
process draws its own address layout, stack, core and library code path, and a cell can differ
between processes by more than its rounds differ within one. A cell measured in several processes
(`processes`: which process each round came from) gets a hierarchical bootstrap: resample the
processes with replacement, then the rounds within each picked process, pool, take the median (the
same for a within-round ratio: the rounds' ratios, grouped by the pair of processes that made
them). With few processes the bootstrap's percentiles cannot reach the outer ones (three processes
give ten distinct resamples), so the interval is widened to include every process's own median:
the least a 95% interval from three processes can be. One process: the cluster bootstrap above,
unchanged.

Runs are the level above processes. A machine drifts between runs (a second run minutes later can be
a few percent faster nearly everywhere), which no run's own interval covers. So a number is every
complete, uncontended run of the same code on the same machine, pooled (pooled_summary,
pooled_round_ratio): its median pools every call of every run; its interval resamples the runs with
replacement, then the processes within each picked run, then the rounds within each picked process.
With 2 to MAX_RUNS_WIDENED runs the bootstrap cannot reach the outer runs either, so the interval is
widened to include every run's own median (of a ratio: every run's own median ratio). One run: the
interval above, unchanged.

A cell is `drawn` (its speed depends on the process) when its process medians differ by more than
its within-process interval (the rounds resampled inside each process, the processes kept), by
more than DRAW_MIN_SHARE of the median, and by more than a shuffle of the rounds among the
processes gives in DRAW_ALPHA of PERMUTATIONS shuffles (so a draw is not the rounds' own noise;
with fewer than about four rounds in each process no shuffle test can reach it).
Processes run one after another, so a change of the machine's speed between them counts as a
draw too; within-round ratios cancel it. `noisy` reads the within-process interval, the rounds'
own instability.
"""

from collections.abc import Hashable, Sequence, Sized
from typing import Any

import numpy as np

Rounds = Sequence[Sequence[float] | np.ndarray]  # per-call times (or values), one list per round

# The version of summarize's code that a final cell row saves beside its summary (`stats_version` beside
# `stats`, harness.measure.plan.cells.final_row): a row of this version is read with its saved summary,
# checked against its own times (impossible); any other row is summarized again from its times
# (cells.row_summary). Bump it with any change here that can change what summarize returns for the same
# times (a constant, a seed, a method, a field added, renamed or redefined), then give the committed rows
# the new summaries: `python -m harness upgrade-results` (tests/test_summaries.py compares the saved
# summaries of the committed rows with today's: a change without a bump fails there).
SUMMARY_VERSION = 1

NOISY_CI_OVER_MEDIAN = 0.20  # the median known to better than about +-10%
MIN_ROUNDS = 5  # below this, resampling rounds cannot give a 95% interval
MIN_CALLS_PER_ROUND = 3  # a round of one or two calls has no median of its own
BOOTSTRAP_RESAMPLES = 1000
CONFIDENCE = 0.95
MAX_RUNS_WIDENED = 4  # up to this many runs, a pooled interval holds every run's own median
MIN_PROCESSES = 3  # fewer: an interval that has not seen a new process's draw (the headline marks it)
DRAW_ALPHA = 0.05  # a draw must beat this share of the shuffles of rounds among processes ...
DRAW_MIN_SHARE = 0.05  # ... and differ by more than this share of the median
PERMUTATIONS = 1000


def _percentile_interval(estimates: Any) -> tuple[float, float]:
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(estimates, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap_rounds_median_ci(rounds: Rounds, resamples: int = BOOTSTRAP_RESAMPLES,
                               seed: int = 0) -> tuple[float, float]:
    """95% interval of the median of all calls, resampling whole rounds (clusters).

    Fewer than two rounds carry no information on the spread between rounds: (nan, nan)."""
    arrays = [np.asarray(r, dtype=np.float64) for r in rounds if len(r)]
    if len(arrays) < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(arrays), size=(resamples, len(arrays)))  # (B, R) round indices
    return _percentile_interval(_pooled_medians_by_counts(arrays, _row_counts(picks, len(arrays))))


def _row_counts(picks: np.ndarray, k: int) -> np.ndarray:
    """(B, k): how often each row of picks (B, n: indices below k) took each index."""
    offsets = np.arange(len(picks))[:, None] * k  # one bincount over all rows, each in its own k bins
    return np.bincount((picks + offsets).ravel(), minlength=len(picks) * k).reshape(len(picks), k)


def _pooled_medians_by_counts(rounds: list[np.ndarray], counts: np.ndarray) -> np.ndarray:
    """For each row of counts (B, R: how often a resample took each round), the median of the
    taken rounds' calls pooled: exactly what np.median(np.concatenate(...)) gives, without building
    each pool. Every call is sorted once; a resample repeats round i's calls counts[b, i] times, so
    the pooled calls at or below sorted position p number counts[b] @ below[p], which grows with p:
    each middle position is found by a binary search over p, all resamples at once."""
    values = np.concatenate(rounds)
    labels = np.concatenate([np.full(len(r), i) for i, r in enumerate(rounds)])
    order = np.argsort(values, kind="stable")
    values, labels = values[order], labels[order]
    below = np.cumsum(labels[:, None] == np.arange(len(rounds)), axis=0, dtype=np.int32)  # (N, R): calls <= p
    total = counts @ below[-1]  # (B,): the calls each resample pools

    def first_above(target: np.ndarray) -> np.ndarray:  # (B,) the first p whose pooled count > target
        low, high = np.zeros(len(counts), dtype=np.int64), np.full(len(counts), len(values) - 1)
        while (low < high).any():
            mid = (low + high) // 2
            above = np.einsum("br,br->b", counts, below[mid]) > target
            low, high = np.where(above, low, mid + 1), np.where(above, mid, high)
        return low

    upper, lower = first_above(total // 2), first_above((total - 1) // 2)
    return np.where(total % 2 == 1, values[upper], (values[lower] + values[upper]) / 2)


def interval_supported(rounds: Rounds) -> bool:
    """Whether the rounds can carry a 95% interval: at least MIN_ROUNDS non-empty rounds, each of
    at least MIN_CALLS_PER_ROUND calls (a round's calls for a median, a ratio's rounds)."""
    sizes = [len(r) for r in rounds if len(r)]
    return len(sizes) >= MIN_ROUNDS and min(sizes) >= MIN_CALLS_PER_ROUND


def thin_reason(rounds: Rounds) -> str:
    """'3 rounds of 15 calls' (what a thin cell had), for the mark that replaces its interval."""
    sizes = [len(r) for r in rounds if len(r)]
    calls = f"{min(sizes)}" if len(set(sizes)) == 1 else f"{min(sizes)}–{max(sizes)}"
    return (f"{len(sizes)} rounds of {calls} calls (an interval needs >= {MIN_ROUNDS} rounds of "
            f">= {MIN_CALLS_PER_ROUND})")


def summarize(rounds_ns: Rounds, processes: Sequence[Hashable] | None = None,
              interval: tuple[float, float] | None = None) -> dict[str, Any]:
    """Summary of per-call wall times in ns, given as rounds (a list of lists of calls); processes:
    which worker process each round came from (None: all from one); interval: the median's 95%
    interval where the caller has computed it (pooled_summary's), else hierarchical_median_ci's."""
    rounds, labels = _nonempty(rounds_ns, processes)
    t = np.asarray([x for r in rounds for x in r], dtype=np.float64)
    if t.size == 0:
        raise ValueError("no times to summarize")
    q25, median, q75, p90, p99 = np.percentile(t, [25, 50, 75, 90, 99])
    low, high = interval if interval is not None else hierarchical_median_ci(rounds, labels)
    # one process: both intervals are the same seeded bootstrap over rounds, computed once
    one = interval is None and len(set(labels)) < 2
    within_low, within_high = (low, high) if one else within_median_ci(rounds, labels)
    round_medians = [float(np.median(r)) for r in rounds]
    iqr = q75 - q25
    ci_width = (high - low) / median if median > 0 and not np.isnan(low) else float("nan")
    within_width = ((within_high - within_low) / median if median > 0 and not np.isnan(within_low)
                    else float("nan"))
    draw = process_draw(rounds, labels, (within_low, within_high))
    return {
        "n": int(t.size),
        "rounds": len(rounds),
        "median_ns": float(median),
        "mean_ns": float(t.mean()),
        "min_ns": float(t.min()),
        "max_ns": float(t.max()),
        "p90_ns": float(p90),
        "p99_ns": float(p99),
        "iqr_ns": float(iqr),
        "spread": float(iqr / median) if median > 0 else float("nan"),  # per-call IQR / median
        "round_medians_ns": round_medians,
        "ci95_low_ns": low,
        "ci95_high_ns": high,
        "ci_over_median": ci_width,
        "ci_method": ("hierarchical bootstrap over processes, then rounds" if len(set(labels)) > 1
                      else "cluster bootstrap over rounds"),
        "noisy": bool(within_width > NOISY_CI_OVER_MEDIAN),  # NaN (one round) compares False
        "thin": not interval_supported(rounds),
        "processes": len(set(labels)),
        "process_medians_ns": draw["medians"],
        "within_ci95_low_ns": within_low,
        "within_ci95_high_ns": within_high,
        "drawn": draw["drawn"],
        "draw_p": draw["p"],
    }


# --- processes: the level above rounds -------------------------------------------------------

def labels_of(rounds: Sized, processes: Sequence[Hashable] | None) -> list[int]:
    """Each round's process as 0, 1, ... in order of first appearance (None: all process 0)."""
    if processes is None:
        return [0] * len(rounds)
    if len(processes) != len(rounds):
        raise ValueError(f"{len(processes)} process labels for {len(rounds)} rounds")
    first: dict[Hashable, int] = {}
    return [first.setdefault(p, len(first)) for p in processes]


def _members(labels: Sequence[int]) -> list[np.ndarray]:
    """The units' indices of each process, in label order."""
    array = np.asarray(labels)
    return [np.flatnonzero(array == q) for q in sorted(set(labels))]


def _hierarchical_counts(labels: Sequence[int], resamples: int, rng: np.random.Generator,
                         within_only: bool = False) -> np.ndarray:
    """(B, U): how often each resample takes each unit (a round, or one round's ratio). The
    processes are resampled with replacement (within_only: each kept once), then, for each time a
    process was taken, as many of its units as it has, with replacement."""
    members = _members(labels)
    k = len(members)
    if within_only:
        taken = np.ones((resamples, k), dtype=np.int64)
    else:
        picks = rng.integers(0, k, size=(resamples, k))
        taken = _row_counts(picks, k)  # (B, k)
    counts = np.zeros((resamples, len(labels)), dtype=np.int64)
    for q, idx in enumerate(members):
        counts[:, idx] = rng.multinomial(taken[:, q] * len(idx), np.full(len(idx), 1 / len(idx)))
    return counts


def _pooled(units: list[np.ndarray], labels: Sequence[int]) -> list[float]:
    """Each process's median, its units' values pooled."""
    return [float(np.median(np.concatenate([units[i] for i in idx]))) for idx in _members(labels)]


def _nonempty(rounds: Rounds, processes: Sequence[Hashable] | None) -> tuple[list[np.ndarray], list[int]]:
    """The rounds that have calls, as arrays, and the process (labels_of) of each."""
    labels = labels_of(rounds, processes)
    kept = [(np.asarray(r, dtype=np.float64), p) for r, p in zip(rounds, labels, strict=True) if len(r)]
    return [a for a, _ in kept], [p for _, p in kept]


def _widened_interval(units: list[np.ndarray], labels: Sequence[int], resamples: int,
                      seed: int) -> tuple[float, float, list[float]]:
    """(low, high, each process's median): the hierarchical bootstrap's 95% interval of the pooled
    median of units (rounds, or rounds' ratios) in two or more processes, widened to every
    process's own median (the module's docstring)."""
    counts = _hierarchical_counts(labels, resamples, np.random.default_rng(seed))
    low, high = _percentile_interval(_pooled_medians_by_counts(units, counts))
    medians = _pooled(units, labels)
    return min(low, *medians), max(high, *medians), medians


def hierarchical_median_ci(rounds: Rounds, processes: Sequence[Hashable] | None = None,
                           resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """95% interval of the median of all calls: processes resampled, then rounds within them, the
    interval widened to every process's own median (the module's docstring). One process: the
    cluster bootstrap over rounds (bootstrap_rounds_median_ci)."""
    arrays, labels = _nonempty(rounds, processes)
    if len(set(labels)) < 2:
        return bootstrap_rounds_median_ci(arrays, resamples, seed)
    low, high, _ = _widened_interval(arrays, labels, resamples, seed)
    return low, high


def within_median_ci(rounds: Rounds, processes: Sequence[Hashable] | None = None,
                     resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """95% interval of the median from the rounds alone: each process kept once, its rounds
    resampled (the interval a single process's rounds can give; the draw is outside it)."""
    arrays, labels = _nonempty(rounds, processes)
    if len(set(labels)) < 2:
        return bootstrap_rounds_median_ci(arrays, resamples, seed)
    counts = _hierarchical_counts(labels, resamples, np.random.default_rng(seed), within_only=True)
    return _percentile_interval(_pooled_medians_by_counts(arrays, counts))


def shuffle_p(round_values: Sequence[float], labels: Sequence[int], permutations: int = PERMUTATIONS,
              seed: int = 0) -> float:
    """How often a shuffle of the rounds among the processes (each keeping its number of rounds)
    spreads the processes' means of round values at least as far apart as they are: the share of
    PERMUTATIONS seeded shuffles, counting the observed order once."""
    values = np.asarray(round_values, dtype=np.float64)
    groups = np.asarray(labels)
    names = sorted(set(labels))

    def spread(assigned: np.ndarray) -> np.ndarray:  # (S, U) labels -> (S,) range of process means
        means = np.stack([(values * (assigned == q)).sum(axis=1) / (assigned == q).sum(axis=1)
                          for q in names], axis=1)
        return means.max(axis=1) - means.min(axis=1)

    rng = np.random.default_rng(seed)
    shuffled = rng.permuted(np.tile(groups, (permutations, 1)), axis=1)  # row by row: rng.permutation's draws
    observed = spread(groups[None, :])[0]
    return float((1 + np.sum(spread(shuffled) >= observed - 1e-12 * abs(observed))) / (1 + permutations))


def process_draw(rounds: Rounds, processes: Sequence[Hashable] | None,
                 within: tuple[float, float] | None = None) -> dict[str, Any]:
    """{medians: each process's median (calls pooled), p: shuffle_p of the round medians, drawn}:
    drawn where the process medians differ by more than the within-process interval, than
    DRAW_MIN_SHARE of the median, and than DRAW_ALPHA of the shuffles (the module's docstring)."""
    arrays, labels = _nonempty(rounds, processes)
    if len(set(labels)) < 2:
        return {"medians": [float(np.median(np.concatenate(arrays)))] if arrays else [], "p": None,
                "drawn": False}
    medians = _pooled(arrays, labels)
    low, high = within if within is not None else within_median_ci(arrays, labels)
    median = float(np.median(np.concatenate(arrays)))
    apart = max(medians) - min(medians)
    p = shuffle_p([float(np.median(a)) for a in arrays], labels)
    drawn = bool(apart > high - low and apart > DRAW_MIN_SHARE * median and p <= DRAW_ALPHA)
    return {"medians": medians, "p": p, "drawn": drawn}


def pooled_median(rounds: Rounds) -> float:
    """The median of every call of every round."""
    return float(np.median([t for r in rounds for t in r]))


def median_interval(values: Sequence[float] | np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES,
                    seed: int = 0) -> tuple[float, float]:
    """95% interval of the median of independent values (one per round), by a seeded
    bootstrap; (nan, nan) for fewer than two values."""
    array = np.asarray(values, dtype=np.float64)
    if array.size < 2:
        return float("nan"), float("nan")
    picks = np.random.default_rng(seed).integers(0, array.size, size=(resamples, array.size))
    return _percentile_interval(np.median(array[picks], axis=1))


def _round_ratios(rounds_a: Rounds, rounds_b: Rounds, processes_a: Sequence[Hashable] | None,
                  processes_b: Sequence[Hashable] | None) -> tuple[np.ndarray, list[int]]:
    """Each shared round's median(a) / median(b), and the pair of processes (labels_of) that made it."""
    labels_a, labels_b = labels_of(rounds_a, processes_a), labels_of(rounds_b, processes_b)
    triples = [(float(np.median(a)) / float(np.median(b)), (pa, pb))
               for a, b, pa, pb in zip(rounds_a, rounds_b, labels_a, labels_b, strict=False)
               if len(a) and len(b)]
    return np.array([r for r, _ in triples]), labels_of(triples, [pair for _, pair in triples])


def round_ratio(rounds_a: Rounds, rounds_b: Rounds, resamples: int = BOOTSTRAP_RESAMPLES,
                seed: int = 0, processes_a: Sequence[Hashable] | None = None,
                processes_b: Sequence[Hashable] | None = None) -> dict[str, Any] | None:
    """Median over rounds of median(a in round r) / median(b in round r), with a 95% interval
    from resampling the rounds' ratios; with processes (which process each round of a and of b
    came from), the rounds' ratios are grouped by the pair of processes that made them and
    resampled hierarchically, the interval widened to each pair's own median ratio.

    Both cells were measured in the same rounds (A B A B ...), so a drift in machine speed
    hits both alike and cancels in each round's ratio.
    """
    ratios, pairs = _round_ratios(rounds_a, rounds_b, processes_a, processes_b)
    if not ratios.size:
        return None
    if len(set(pairs)) < 2:
        low, high = median_interval(ratios, resamples, seed)
        per_process = [float(np.median(ratios))]
    else:
        low, high, per_process = _widened_interval([ratios[i:i + 1] for i in range(ratios.size)], pairs,
                                                   resamples, seed)
    return {"ratio": float(np.median(ratios)), "min": float(np.min(ratios)),
            "max": float(np.max(ratios)), "rounds": int(ratios.size),
            "ci95_low": low, "ci95_high": high, "thin": int(ratios.size) < MIN_ROUNDS,
            "processes": len(set(pairs)), "process_ratios": per_process}


# --- runs: the level above processes ---------------------------------------------------------

Run = tuple[Rounds, Sequence[Hashable] | None]  # one run's rounds of a cell, and which process made each


def _nested_counts(runs: Sequence[int], processes: Sequence[int], resamples: int,
                   rng: np.random.Generator) -> np.ndarray:
    """(B, U): how often each resample takes each unit (a round, or one round's ratio), given each
    unit's run and its process within the run (labels_of's): the runs resampled with replacement,
    then, for each time a run was taken, as many of its processes as it has, with replacement, then
    for each time a process was taken, as many of its units as it has, with replacement."""
    members = _members(runs)
    taken = _row_counts(rng.integers(0, len(members), size=(resamples, len(members))), len(members))
    counts = np.zeros((resamples, len(runs)), dtype=np.int64)
    process = np.asarray(processes)
    for r, in_run in enumerate(members):
        groups = [in_run[process[in_run] == q] for q in sorted(set(process[in_run]))]
        picked = rng.multinomial(taken[:, r] * len(groups), np.full(len(groups), 1 / len(groups)))  # (B, P)
        for q, idx in enumerate(groups):
            counts[:, idx] = rng.multinomial(picked[:, q] * len(idx), np.full(len(idx), 1 / len(idx)))
    return counts


def _widened_to_runs(low: float, high: float, run_medians: Sequence[float]) -> tuple[float, float]:
    """[low, high] holding every run's own median, where there are at most MAX_RUNS_WIDENED runs."""
    if len(run_medians) > MAX_RUNS_WIDENED:
        return low, high
    return min(low, *run_medians), max(high, *run_medians)


def pooled_median_ci(runs: Sequence[Run], resamples: int = BOOTSTRAP_RESAMPLES,
                     seed: int = 0) -> tuple[float, float]:
    """95% interval of the median of every call of every run: runs resampled, then processes, then
    rounds (the module's docstring), widened to every run's median for 2 to MAX_RUNS_WIDENED runs.
    One run: hierarchical_median_ci, unchanged."""
    kept = [_nonempty(rounds, processes) for rounds, processes in runs]
    kept = [(arrays, labels) for arrays, labels in kept if arrays]
    if len(kept) < 2:
        return hierarchical_median_ci(*kept[0]) if kept else (float("nan"), float("nan"))
    units = [a for arrays, _ in kept for a in arrays]
    run_of = [i for i, (arrays, _) in enumerate(kept) for _ in arrays]
    counts = _nested_counts(run_of, [p for _, labels in kept for p in labels], resamples,
                            np.random.default_rng(seed))
    low, high = _percentile_interval(_pooled_medians_by_counts(units, counts))
    return _widened_to_runs(low, high, [float(np.median(np.concatenate(arrays))) for arrays, _ in kept])


def pooled_summary(runs: Sequence[Run]) -> dict[str, Any]:
    """summarize() of every run's rounds pooled (each run's processes its own), with the interval of
    pooled_median_ci and `runs`, how many runs it pools, and each run's own median (`run_medians_ns`)."""
    kept = [(rounds, processes) for rounds, processes in runs if any(len(r) for r in rounds)]
    if not kept:
        raise ValueError("no times to summarize")
    rounds = [r for run_rounds, _ in kept for r in run_rounds]
    labels = [(i, p) for i, (run_rounds, processes) in enumerate(kept)
              for p in labels_of(run_rounds, processes)]
    found = summarize(rounds, labels, pooled_median_ci(kept) if len(kept) > 1 else None)
    found["runs"] = len(kept)
    found["run_medians_ns"] = [pooled_median([r for r in run_rounds if len(r)]) for run_rounds, _ in kept]
    if len(kept) > 1:
        found["ci_method"] = "hierarchical bootstrap over runs, then processes, then rounds"
    return found


def pooled_round_ratio(runs: Sequence[tuple[Run, Run]], resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = 0) -> dict[str, Any] | None:
    """round_ratio over several runs, each (a's run, b's run) of the same run: the rounds' ratios of
    every run pooled, their median the ratio, the interval resampling runs, then pairs of processes,
    then rounds, widened to each run's median ratio for 2 to MAX_RUNS_WIDENED runs. One run:
    round_ratio, unchanged. `runs`: how many runs gave a ratio."""
    per_run = [_round_ratios(a[0], b[0], a[1], b[1]) for a, b in runs]
    kept = [(i, (ratios, pairs)) for i, (ratios, pairs) in enumerate(per_run) if ratios.size]
    if len(kept) < 2:
        if not kept:
            return None
        (a, b) = runs[kept[0][0]]
        found = round_ratio(a[0], b[0], resamples, seed, processes_a=a[1], processes_b=b[1])
        return None if found is None else {**found, "runs": 1}
    ratios = np.concatenate([r for _, (r, _) in kept])
    run_of = [j for j, (_, (r, _)) in enumerate(kept) for _ in range(r.size)]
    pairs = [p for _, (_, labels) in kept for p in labels]
    counts = _nested_counts(run_of, pairs, resamples, np.random.default_rng(seed))
    low, high = _percentile_interval(_pooled_medians_by_counts([ratios[i:i + 1] for i in range(ratios.size)],
                                                               counts))
    run_ratios = [float(np.median(r)) for _, (r, _) in kept]
    low, high = _widened_to_runs(low, high, run_ratios)
    return {"ratio": float(np.median(ratios)), "min": float(np.min(ratios)), "max": float(np.max(ratios)),
            "rounds": int(ratios.size), "ci95_low": low, "ci95_high": high,
            "thin": int(ratios.size) < MIN_ROUNDS, "processes": len(set(zip(run_of, pairs, strict=True))),
            "run_ratios": run_ratios, "runs": len(kept)}


# --- a saved summary, read back ----------------------------------------------------------------

SUMMARY_NUMBERS = ("median_ns", "mean_ns", "min_ns", "max_ns", "p90_ns", "p99_ns", "iqr_ns", "spread",
                   "ci95_low_ns", "ci95_high_ns", "ci_over_median", "within_ci95_low_ns",
                   "within_ci95_high_ns")
SUMMARY_TYPES: dict[str, type | tuple[type, ...]] = {
    "n": int, "rounds": int, "processes": int, **{key: (int, float) for key in SUMMARY_NUMBERS},
    "round_medians_ns": list, "process_medians_ns": list, "ci_method": str, "noisy": bool, "thin": bool,
    "drawn": bool, "draw_p": (int, float, type(None))}


def impossible(summary: dict[str, Any], rounds_ns: Rounds) -> str | None:
    """Why a saved summary (summarize's fields) cannot be summarize's of these rounds, or None. Checked,
    not recomputed (the bootstraps are what saving it spares): its fields and their types; its counts
    (calls, rounds, thin); the calls' least and greatest time and their mean (from their exact sum); its
    percentiles in order and every interval and per-round or per-process median inside the calls'
    range. Numbers are finite where they must be: the row reader (harness.measure.store.rows) has
    checked that."""
    for key, expected in SUMMARY_TYPES.items():
        if key not in summary:
            return f"no field stats.{key} (a summary of version {SUMMARY_VERSION} has it)"
        value = summary[key]
        if isinstance(value, bool) is not (expected is bool) or not isinstance(value, expected):
            return f"field stats.{key}: expected {getattr(expected, '__name__', 'a number')}, found {value!r}"
    calls = [r for r in rounds_ns if len(r)]
    n = sum(len(r) for r in calls)
    if (summary["n"], summary["rounds"]) != (n, len(calls)):
        return (f"stats.n, stats.rounds are {summary['n']}, {summary['rounds']}; its times hold {n} calls "
                f"in {len(calls)} rounds")
    if not calls:
        return "stats: a summary of no calls"
    least, most = min(min(r) for r in calls), max(max(r) for r in calls)
    if (summary["min_ns"], summary["max_ns"]) != (least, most):
        return (f"stats.min_ns, stats.max_ns are {summary['min_ns']:g}, {summary['max_ns']:g}; its times "
                f"run from {least:g} to {most:g} ns")
    total = sum(sum(r) for r in calls)
    if not abs(summary["mean_ns"] * n - total) <= 1e-9 * abs(total):  # float rounding of a sum: ~1e-16
        return f"stats.mean_ns is {summary['mean_ns']:g}; its times' mean is {total / n:g} ns"
    chain = ("min_ns", "median_ns", "p90_ns", "p99_ns", "max_ns")
    for low_key, high_key in zip(chain, chain[1:], strict=False):
        if not summary[low_key] <= summary[high_key]:
            return f"stats.{low_key} ({summary[low_key]:g}) is above stats.{high_key} ({summary[high_key]:g})"
    for key in ("iqr_ns", "spread", "ci_over_median"):
        if summary[key] < 0:  # NaN (not computed) compares False
            return f"stats.{key} is {summary[key]:g} (expected 0 or more)"
    for low_key, high_key in (("ci95_low_ns", "ci95_high_ns"), ("within_ci95_low_ns", "within_ci95_high_ns")):
        low, high = summary[low_key], summary[high_key]
        if np.isnan(low) and np.isnan(high) and len(calls) < 2:
            continue  # one round: no interval
        if not least <= low <= high <= most:
            return (f"stats.{low_key}, stats.{high_key} are {low:g}, {high:g} (expected an interval "
                    f"inside its times, {least:g} to {most:g} ns)")
    for key, count in (("round_medians_ns", len(calls)), ("process_medians_ns", summary["processes"])):
        values = summary[key]
        if len(values) != count or not all(type(v) in (int, float) and least <= v <= most for v in values):
            return f"stats.{key}: expected {count} medians inside its times, {least:g} to {most:g} ns"
    if not 1 <= summary["processes"] <= len(calls):
        return f"stats.processes is {summary['processes']} (expected 1 to its {len(calls)} rounds)"
    if summary["thin"] is interval_supported(calls):
        return f"stats.thin is {summary['thin']}; its {thin_reason(calls)}"
    return None
