"""Fig. 6, where a call's time goes (study `overhead`): each CPU call against the CPU floor that
harness.measure.floor answers (the fastest measured implementation), each GPU call against the
GPU's busy time from the kernels trace (one measure: CUDA events also span the host's
enqueueing, so they are not drawn), the rest host overhead. A CPU machine where the floor was not
measured is not drawn (the caption names it).

    time_split(cells, floors, gpu_busy)   per cell: (row, its floor or busy part in ms, how found)
    fig_overhead(data, out)               the figure
"""

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from harness.figures import dotplot, pick
from harness.figures.style import (
    OKABE_ITO,
    caption,
    finish,
    fmt_ms,
    legend_below,
    ok_cells,
    short_machine,
)
from harness.measure.floor import Floor
from harness.report.claims.rundata import ReportData, study_rows
from harness.report.markup import quote
from harness.report.sections import gpu_section

BUSY = "GPU busy time (kernels trace)"
FLOOR_COLOUR, REST_COLOUR = OKABE_ITO[2], OKABE_ITO[3]


RESIDENT = "resident kernel: its busy time spans calls"


def time_split(cells: pd.DataFrame, floors: dict[str, float], gpu_busy: dict[tuple[str, str, int], float],
               floor_label: str = "the floor") -> list[tuple[pd.Series, float, str]]:
    """Per cell, CPU machines first, each panel's rows fastest first: (its row, the part of it
    that is the CPU floor (floors: {machine: ms}) or the GPU's busy time (gpu_busy: {(machine,
    label, batch): ms}, NaN for a resident kernel), how that part was found). A CPU machine without
    the floor is left out (nothing to split against); a GPU call without a trace, or with a resident
    kernel's, keeps NaN (drawn hatched). A part longer than its call is an error (a share over 100%
    is a bug in the rows or their reading, never clipped)."""
    out = []
    for (machine, device), part in sorted(cells.groupby(["machine", "device"]),
                                          key=lambda kv: (kv[0][1] != "cpu", kv[0][0])):
        if device == "cpu" and machine not in floors:
            continue
        for _, r in part[part["implementation"] != "null"].sort_values(["median_ms", "label"]).iterrows():
            key = (machine, r["label"], int(r["batch_size"]))
            if device == "cpu":
                base, how = floors[machine], floor_label
            elif key in gpu_busy:
                base = gpu_busy[key]
                how = BUSY if not np.isnan(base) else RESIDENT
            else:
                base, how = np.nan, "no kernel trace"
            if not np.isnan(base) and base > r["median_ms"]:
                raise ValueError(f"Fig. 6: {machine} {r['label']} batch {key[2]}: {how} {base:.6g} ms is "
                                 f"over the call's median {r['median_ms']:.6g} ms (a share over 100%)")
            out.append((r, base, how))
    return out


def gpu_busy_ms(runs: list[dict]) -> dict[tuple[str, str, int], float]:
    """{(machine, label, batch): GPU busy ms per call} from the newest `kernels` run of each machine;
    NaN for a resident kernel (gpu_section.resident: one kernel spans many calls and the idle waits,
    so it has no busy time of one call)."""
    return {(r["machine"], f"{r['implementation']}/{r['variant']}", int(r.get("batch", 1))):
            np.nan if gpu_section.resident(r) else r["gpu_busy_ns_per_call"] / 1e6
            for r in study_rows(runs, "kernels")}


def how_to_read(data: ReportData, cells: pd.DataFrame, found: Floor | None, drawn: set[str]) -> str:
    """The caption's first lines: which floor, which GPU measure, which runs, what was left out."""
    kernels = sorted({r["run_id"] for r in data.runs if r["study"] == "kernels"})
    left_out = sorted({m for m in cells[cells["device"] == "cpu"]["machine"]} - drawn)
    floor = (f"the floor, {found.label}: harness.measure.floor's fastest measured CPU implementation "
             f"(api_levels run {found.run_id}, batch 1, float32), its median on each machine drawn."
             if found is not None and found.median_ns is not None else "no measured floor.")
    return "\n".join(line for line in (
        f"Green, CPU: {floor}",
        "Green, GPU: the GPU's busy time per call from the kernels trace (the union of its kernels' and "
        "copies' intervals, CUPTI via torch.profiler"
        + (f", run kernels/{', '.join(kernels)}" if kernels else "") + "), the only GPU measure drawn: CUDA "
        "events around a call also span the host's enqueueing, keyed by level, variant and batch. Hatched: "
        "no kernel trace of that call; cross-hatched: a resident kernel, whose busy time spans many calls "
        "and the idle waits between them, so no share of one call. "
        "Vermillion: the rest of the call (Python, dispatch, data handling). The floor and the busy time "
        "come from other runs than the overhead cells: a share is a ratio of medians, not a within-round "
        "ratio.",
        f"Not drawn: CPU {', '.join(short_machine(m) for m in left_out)} (the floor was not measured there)."
        if left_out else "",
    ) if line)


def fig_overhead(data: ReportData, out: Path) -> Path | None:
    """Fig. 6: each call's share that is the CPU floor or the GPU's busy time, the rest overhead."""
    cells = ok_cells(data.frame, "overhead")
    cells = cells[cells["batch_size"] == 1] if not cells.empty else cells
    if cells.empty:
        return None
    found, floors = pick.cpu_floors(data)
    floor_label = found.label if found is not None else "the floor"
    split = time_split(cells, floors, gpu_busy_ms(data.runs), floor_label)
    if not split:
        return None
    groups = list(dict.fromkeys((r["device"], r["machine"]) for r, _, _ in split))
    sizes = [sum(1 for r, _, _ in split if (r["device"], r["machine"]) == g) for g in groups]
    fig, axes = dotplot.stacked(sizes, per_row=0.24)
    for ax, group in zip(axes, groups, strict=True):
        rows = [(r, base, how) for r, base, how in split if (r["device"], r["machine"]) == group]
        for y, (r, base, how) in enumerate(rows):
            if np.isnan(base):
                ax.barh(y, 100, color="white", edgecolor="#555555", hatch="xx" if how == RESIDENT else "//")
            else:
                share = 100 * base / r["median_ms"]  # time_split refused a share over 100%
                ax.barh(y, share, color=FLOOR_COLOUR)
                ax.barh(y, 100 - share, left=share, color=REST_COLOUR)
            ax.text(101, y, ", ".join([fmt_ms(r["median_ms"]), *quote.marks(r)]), va="center", fontsize=7)
        device, machine = group
        what = (f"floor {floor_label} {fmt_ms(floors[machine])}" if device == "cpu"
                else "green: GPU busy time (kernels trace)")
        dotplot.rows_axis(ax, [r["label"] for r, _, _ in rows], f"{dotplot.panel_title(*group)}  ({what})")
        ax.set_xlim(0, 100)
    axes[-1].set_xlabel("share of the median per-image time (%); the median is written at the right")
    legend_below(axes[-1], [Patch(color=FLOOR_COLOUR, label=f"CPU: the floor ({floor_label}, "
                              "harness.measure.floor); GPU: busy time (kernels trace)"),
                        Patch(color=REST_COLOUR, label="the rest of the call (host overhead)"),
                        Patch(facecolor="white", edgecolor="#555555", hatch="//",
                              label="GPU: no kernel trace"),
                        Patch(facecolor="white", edgecolor="#555555", hatch="xx",
                              label="GPU: a resident kernel (its busy time spans calls)")], ncol=2)
    fig.suptitle("Fig. 6  Where a call's time goes: the CPU floor or the GPU's busy time, and the rest")
    text = how_to_read(data, cells, found, {m for d, m in groups if d == "cpu"})
    shown = [r for r in data.runs if r["machine"] in {m for _, m in groups}]
    return finish(fig, shown, "overhead", out, f"{text}\n{caption(shown, 'overhead')}")
