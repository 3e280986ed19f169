"""The table printed at the end of a run (the report has the full story)."""

from harness.measure import stats
from harness.measure.cells import CellState
from harness.measure.progress import fmt_ns
from harness.measure.study import Study


def baseline_rounds(states: list[CellState], study: Study) -> dict[tuple[str, int, str], list[list[int]]]:
    """Per-round times of the baseline cell matching each cell's device, batch and dtype."""
    if not study.baseline:
        return {}
    found: dict[tuple[str, int, str], list[list[int]]] = {}
    for s in states:
        c = s.cell
        if c.implementation == study.baseline and s.rounds:
            found.setdefault((c.device, c.batch_size, c.dtype), [s.rounds[r][0] for r in sorted(s.rounds)])
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
            r = stats.round_ratio([s.rounds[k][0] for k in sorted(s.rounds)], ref)
            ratio = f"{r['ratio']:.2f}x" if r else ""
            if r and r["ci95_low"] == r["ci95_low"]:  # not NaN: two rounds or more
                ratio += f" [{r['ci95_low']:.2f}-{r['ci95_high']:.2f}]"
        flag = "  NOISY" if st["noisy"] else ""
        out.append(f"{s.cell.id:<40} {'ok':<8} {fmt_ns(st['median_ns']):>9} {ci:>21} "
                   f"{fmt_ns(st['p90_ns']):>9}  {ratio:>24}{flag}")
    return out
