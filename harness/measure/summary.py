"""The table printed at the end of a run (the report has the full story)."""

from harness.measure.plan.cells import CellState
from harness.measure.plan.study import Study
from harness.measure.progress import fmt_ns
from harness.measure.store import stats

Rounds = tuple[list[list[int]], list[int]]  # per-round times, and the process of each round


def rounds_of(state: CellState) -> Rounds:
    """A cell's per-round times and which process each round came from, as its final row has them."""
    final = state.final or {}
    times = [state.rounds[r][0] for r in sorted(state.rounds)]
    processes = final.get("round_process") or [0] * len(times)
    return times, processes if len(processes) == len(times) else [0] * len(times)


def baseline_rounds(states: list[CellState], study: Study) -> dict[tuple[str, int, str], Rounds]:
    """Per-round times (and processes) of the baseline cell matching each cell's device, batch
    and dtype."""
    if not study.baseline:
        return {}
    found: dict[tuple[str, int, str], Rounds] = {}
    for s in states:
        c = s.cell
        if c.implementation == study.baseline and s.rounds:
            found.setdefault((c.device, c.batch_size, c.dtype), rounds_of(s))
    return found


def lines(states: list[CellState], study: Study) -> list[str]:
    base = baseline_rounds(states, study)
    out = [f"{'cell':<40} {'status':<8} {'median':>9} {'95% CI of median':>21} {'p90':>9}  "
           f"{'vs ' + (study.baseline or '-') + ' [95% CI]':>24}"]
    for s in states:
        final = s.final or {}
        st = final.get("stats")
        if not st:
            out.append(f"{s.cell.id:<40} {final.get('status', '?'):<8} {final.get('reason') or ''}")
            continue
        ci = f"{fmt_ns(st['ci95_low_ns'])} - {fmt_ns(st['ci95_high_ns'])}"
        ratio = ""
        ref = base.get((s.cell.device, s.cell.batch_size, s.cell.dtype))
        if ref and s.cell.implementation != study.baseline:
            times, processes = rounds_of(s)
            r = stats.round_ratio(times, ref[0], processes_a=processes, processes_b=ref[1])
            ratio = f"{r['ratio']:.2f}x" if r else ""
            if r and r["ci95_low"] == r["ci95_low"]:  # not NaN: two rounds or more
                ratio += f" [{r['ci95_low']:.2f}-{r['ci95_high']:.2f}]"
        flag = ("  NOISY" if st["noisy"] else "") + ("  PROCESS-DEPENDENT" if st.get("drawn") else "")
        out.append(f"{s.cell.id:<40} {'ok':<8} {fmt_ns(st['median_ns']):>9} {ci:>21} "
                   f"{fmt_ns(st['p90_ns']):>9}  {ratio:>24}{flag}")
    return out
