"""`python -m harness explain IMPL[/VARIANT]`: where the time of one call goes, stage by stage.

The method, in layers (REPORT.md states it too):
(a) an ablation ladder of public calls, timed like any cell and interleaved in rounds; each
    step down removes one stage, and the difference of neighbouring medians is its cost; the
    last step is the floor (the fastest measured implementation on the device, asked of
    harness.measure.fastest_call, in the same process; its step's text names it);
(b) for Keras' `predict` on TensorFlow, Keras' own internal steps timed in order, accepted
    only when their sum is within 10% of a real `predict` timed in the same loop, the rest
    shown as 'other';
(c) cProfile for counts only (function calls, iterators and datasets created per call).
The result is a row in <out>/explain/<run-id>/results.jsonl(.gz), which the report reads.
"""

from pathlib import Path
from typing import Any

from harness import DEFAULT_WEIGHTS
from harness.explain import plumbing
from harness.measure.store import stats

TOLERANCE = 0.10  # (b) is accepted when its sum is this close to a real predict
Row = dict[str, Any]  # one explain row, as results.jsonl holds it


def ladder_stages(ladder: list[dict[str, Any]],
                  rounds_ns: dict[str, list[list[int]]]) -> list[dict[str, Any]]:
    """Stage costs from the ladder: step i's median minus step i+1's; the last step whole."""
    medians = [stats.pooled_median(rounds_ns[s["step"]]) for s in ladder]
    stages = []
    for i, step in enumerate(ladder):
        below = medians[i + 1] if i + 1 < len(medians) else 0.0
        stages.append({"name": step["removes"], "short": step.get("short", step["removes"]),
                       "from": step["step"],
                       "to": ladder[i + 1]["step"] if i + 1 < len(ladder) else None,
                       "ns": medians[i] - below})
    total = medians[0]
    for stage in stages:
        stage["share"] = stage["ns"] / total if total else float("nan")
    return stages


def internal_stages(internal: dict[str, Any]) -> dict[str, Any]:
    """Keras' internal stages (medians) plus 'other' = real predict - their sum."""
    if "refused" in internal:
        return internal
    predict = stats.pooled_median(internal["predict_rounds_ns"])
    stages = [{"name": s["name"], "ns": stats.pooled_median(s["rounds_ns"])} for s in internal["stages"]]
    measured = sum(s["ns"] for s in stages)
    stages.append({"name": "other", "ns": predict - measured})
    for s in stages:
        s["share"] = s["ns"] / predict
    return {"stages": stages, "predict_ns": predict, "sum_ns": measured,
            "accepted": abs(measured - predict) <= TOLERANCE * predict}


def run_child(name: str, variant: str, device: str, calls: int, rounds: int, weights: str | Path,
              timeout: float = 600) -> dict[str, Any]:
    return plumbing.run_child("harness.explain.child", (name, variant, device, calls, rounds, weights),
                              name, variant, device, "explain", timeout)


def explain(target: str, device: str = "cpu", calls: int = 200, rounds: int = 10,
            weights: str | Path = DEFAULT_WEIGHTS) -> Row:
    name, variant = plumbing.target_of(target, device, "explain")
    raw = run_child(name, variant, device, calls, rounds, weights)
    row = {"kind": "explain", "implementation": name, "variant": variant, "device": device,
           "floor": raw.get("floor"),  # which implementation the last step ran ("onednn/tuned")
           "ladder": raw["ladder"], "rounds_ns": raw["rounds_ns"], "counts": raw["counts"],
           "frameworks": raw["frameworks"],
           "steps": [{"step": s["step"], **summary(raw["rounds_ns"][s["step"]])} for s in raw["ladder"]],
           "stages": ladder_stages(raw["ladder"], raw["rounds_ns"])}
    if "internal" in raw:
        row["internal"] = {**raw["internal"], **internal_stages(raw["internal"])}
    return row


def summary(rounds_ns: list[list[int]]) -> dict[str, Any]:
    st = stats.summarize(rounds_ns)
    return {k: st[k] for k in ("median_ns", "ci95_low_ns", "ci95_high_ns", "noisy")}


def table(row: Row) -> list[str]:
    """The stages as printed on the terminal."""
    out = [f"{row['implementation']}/{row['variant']} on {row['device']}: one call, "
           f"median {row['steps'][0]['median_ns'] / 1e3:.1f} us",
           "(a) ablation ladder: each step's cost = its median minus the next step's", "",
           f"  {'step':<18} {'median':>10}   stage it removes (cost, share of the call)"]
    for step, stage in zip(row["steps"], row["stages"], strict=True):
        out.append(f"  {step['step']:<18} {step['median_ns'] / 1e3:>8.1f}us   {stage['name']}: "
                   f"{stage['ns'] / 1e3:.1f} us ({100 * stage['share']:.1f}%)")
    out.append(f"  {'other':<18} {'':>10}   0 by construction: the ladder telescopes to the top step")
    internal = row.get("internal")
    if internal and "refused" in internal:
        out += ["", f"(b) Keras internals: not measured: {internal['refused']}"]
    elif internal:
        verdict = "accepted" if internal["accepted"] else f"REJECTED (off by more than {TOLERANCE:.0%})"
        out += ["", f"(b) Keras predict's own steps, with a real predict in the same loop "
                    f"({internal['predict_ns'] / 1e3:.1f} us); sum of steps "
                    f"{internal['sum_ns'] / 1e3:.1f} us: {verdict}"]
        for s in internal["stages"]:
            out.append(f"  {s['name']:<70} {s['ns'] / 1e3:>9.1f} us {100 * s['share']:>6.1f}%")
        out.append(f"  {'total':<70} {internal['predict_ns'] / 1e3:>9.1f} us {100.0:>6.1f}%")
    counts = row["counts"]
    out += ["", f"(c) cProfile of one {row['steps'][0]['step']} call (counts only): "
                f"{counts['function_calls']} Python function calls, {counts['iterators_created']} "
                f"tf.data iterators and {counts['datasets_created']} datasets created, "
                f"{counts['tf_function_traces']} tf.function traces"]
    return out


def write(rows: list[Row], out: Path, run_id: str | None = None) -> Path:
    return plumbing.write(rows, out, "explain", "cpu", run_id)
