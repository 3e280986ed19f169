"""Fig. 6, where a call's time goes (study `overhead`), in absolute times on a log axis, a panel per
answering machine: on the CPU each call against the CPU floor that harness.measure.fastest_call answers
(the fastest measured implementation: what is above it is everything that call does beyond the
fastest CPU call, its own library's work included, not host overhead); on the GPU each call against
the GPU's busy time from the kernels trace (one measure: CUDA events also span the host's enqueueing,
so they are not drawn), the rest of it the host's time while the GPU is idle. A CPU machine where
the floor was not measured is not drawn.

    time_split(cells, floors, gpu_busy)   per cell: (row, its floor or busy part in ms, how found)
    gpu_busy_ms(runs)                     the GPU's busy time per call from the kernels trace
    fig_overhead(data, out)               the figure
"""

from pathlib import Path

import matplotlib.lines
import matplotlib.transforms
import numpy as np
import pandas as pd

from harness.figures import dotplot, pick
from harness.figures.style import OKABE_ITO, colour, finish, fmt_ms, legend_below, ok_cells
from harness.report.claims.rundata import ReportData, study_rows
from harness.report.markup import quote
from harness.report.markup.tables import sig3
from harness.report.sections import gpu_section

BUSY = "GPU busy time (kernels trace)"
RESIDENT = "resident kernel: its busy time spans calls"
FLOOR_COLOUR, REST_COLOUR = OKABE_ITO[2], "#BBBBBB"  # the floor or busy time; the span above it


def time_split(cells: pd.DataFrame, floors: dict[str, float], gpu_busy: dict[tuple[str, str, int], float],
               floor_label: str = "the floor") -> list[tuple[pd.Series, float, str]]:
    """Per cell, CPU machines first, each panel's rows fastest first: (its row, the part of it
    that is the CPU floor (floors: {machine: ms}) or the GPU's busy time (gpu_busy: {(machine,
    label, batch): ms}, NaN for a resident kernel), how that part was found). A CPU machine without
    the floor is left out (nothing to split against); a GPU call without a trace, or with a resident
    kernel's, keeps NaN. A part longer than its call is an error (a share over 100% is a bug in the
    rows or their reading, never clipped)."""
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


def words(r: pd.Series, base: float, how: str, device: str) -> str:
    """The right-hand column: the call's median, its part named for what it is, its marks."""
    if device == "cpu":
        part = f"{sig3(r['median_ms'] / base)}x the floor"
    elif how == BUSY:
        part = f"GPU busy {fmt_ms(base)}, {100 * base / r['median_ms']:.0f}%"
    elif how == RESIDENT:
        part = "resident kernel: no busy time of one call"
    else:
        part = "no kernel trace"
    return ", ".join([fmt_ms(r["median_ms"]), part, *quote.caveats(r)])


def fig_overhead(data: ReportData, out: Path) -> Path | None:
    """Fig. 6: each call's median beside the CPU floor or its GPU busy time, on a log axis, a panel
    per answering machine."""
    cells = ok_cells(data.frame, "overhead")
    cells = pick.answering(cells[cells["batch_size"] == 1], data) if not cells.empty else cells
    if cells.empty:
        return None
    found, floors = pick.cpu_floors(data)
    floor_label = found.label if found is not None else "the floor"
    split = time_split(cells, floors, gpu_busy_ms(data.runs), floor_label)
    if not split:
        return None
    groups = list(dict.fromkeys((r["device"], r["machine"]) for r, _, _ in split))
    sizes = [sum(1 for r, _, _ in split if (r["device"], r["machine"]) == g) for g in groups]
    fig, axes = dotplot.stacked(sizes, per_row=0.26)
    for ax, (device, machine) in zip(axes, groups, strict=True):
        rows = [(r, base, how) for r, base, how in split if (r["device"], r["machine"]) == (device, machine)]
        right = matplotlib.transforms.blended_transform_factory(ax.transAxes, ax.transData)
        for y, (r, base, how) in enumerate(rows):
            if not np.isnan(base):
                ax.plot([base, r["median_ms"]], [y, y], color=REST_COLOUR, linewidth=3, solid_capstyle="butt",
                        zorder=1)
                if device == "gpu":
                    ax.plot(base, y, marker="D", markersize=5, color=FLOOR_COLOUR, markeredgecolor="black",
                            markeredgewidth=0.5, linestyle="none", zorder=3)
            dotplot.dot(ax, y, r, colour(r["implementation"]))
            ax.text(1.01, y, words(r, base, how, device), transform=right, va="center", fontsize=7)
        what = (f"the floor: {floor_label}, {fmt_ms(floors[machine])}" if device == "cpu"
                else "diamond: the GPU's busy time per call (kernels trace)")
        if device == "cpu":
            ax.axvline(floors[machine], color=FLOOR_COLOUR, linewidth=1.5, linestyle="--", zorder=1)
        dotplot.rows_axis(ax, [r["label"] for r, _, _ in rows],
                          f"{dotplot.panel_title(device, machine)}  ({what})")
    every = [v for r, base, _ in split for v in (base, *dotplot.ends(r)) if v == v]
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlim(min(every) / 1.5, max(every) * 1.5)
        dotplot.time_axis(ax, "per-image time, median (log scale)")
    legend_below(axes[-1], [
        matplotlib.lines.Line2D([], [], marker="o", color="#555555", linestyle="none",
                                label="the call's median"),
        matplotlib.lines.Line2D([], [], color=FLOOR_COLOUR, linestyle="--",
                                label=f"CPU: the floor ({floor_label}, the fastest CPU call measured)"),
        matplotlib.lines.Line2D([], [], marker="D", color=FLOOR_COLOUR, markeredgecolor="black",
                                linestyle="none", label="GPU: its busy time per call (kernels trace)"),
        matplotlib.lines.Line2D([], [], color=REST_COLOUR, linewidth=3,
                                label="CPU: what the call does beyond the floor; GPU: host time, GPU idle")],
                 ncol=2)
    fig.suptitle("Fig. 6  Where a call's time goes: each call against the CPU floor or the GPU's busy time")
    return finish(fig, out)
