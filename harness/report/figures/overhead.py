"""Fig. 6, where a call's time goes (study `overhead`): each cell split against its machine's floor
(CPU) or the GPU's own busy time, the rest host overhead; overhead_split is the findings' too."""

from pathlib import Path

import numpy as np
import pandas as pd

from harness.report import gpu_section
from harness.report.figures import dotplot
from harness.report.rundata import ReportData
from harness.report.style import OKABE_ITO, finish, fmt_ms, ok_cells


def overhead_split(cells: pd.DataFrame, gpu_busy: dict[tuple[str, str], float] | None = None
                   ) -> list[tuple[pd.Series, float, str]]:
    """Per cell: (its row, its compute or device part in ms, how that part was found), each
    machine's CPU cells against that machine's own floor (its fastest measured implementation).
    gpu_busy: {(machine, label): ms} from `kernels` rows, the GPU's own busy time; CUDA events
    otherwise, which also span the host's enqueueing."""
    busy = gpu_busy or {}
    out = []
    for (_machine, device), part in sorted(cells.groupby(["machine", "device"]),
                                          key=lambda kv: (kv[0][1] != "cpu", kv[0][0])):
        real = part[part["implementation"] != "null"]
        if real.empty:
            continue
        floor = real["median_ms"].min()
        floor_label = real.loc[real["median_ms"].idxmin(), "label"]
        for _, r in real.sort_values("median_ms").iterrows():
            if device == "gpu" and (r["machine"], r["label"]) in busy:
                base, how = busy[(r["machine"], r["label"])], "GPU busy time (kernels trace)"
            elif device == "gpu" and not np.isnan(r["device_median_ms"]):
                base, how = r["device_median_ms"], "device time (CUDA events)"
            elif device == "gpu":
                base, how = np.nan, "no device timer"
            else:
                base, how = floor, f"fastest measured implementation on this CPU ({floor_label})"
            out.append((r, base, how))
    return out



def fig_overhead(data: ReportData, out: Path) -> Path | None:
    """Fig. 6: each call's share above its machine's floor (CPU) or outside the GPU's work."""
    cells = ok_cells(data.frame, "overhead")
    cells = cells[cells["batch_size"] == 1] if not cells.empty else cells
    if cells.empty:
        return None
    busy = {(r["machine"], f"{r['implementation']}/{r['variant']}"): r["gpu_busy_ns_per_call"] / 1e6
            for r in gpu_section.kernel_rows(data.runs)}
    split = overhead_split(cells, busy)
    groups = list(dict.fromkeys((r["device"], r["machine"]) for r, _, _ in split))
    sizes = [sum(1 for r, _, _ in split if (r["device"], r["machine"]) == g) for g in groups]
    fig, axes = dotplot.stacked(sizes, per_row=0.24)
    for ax, group in zip(axes, groups, strict=True):
        rows = [(r, base) for r, base, _ in split if (r["device"], r["machine"]) == group]
        for y, (r, base) in enumerate(rows):
            if np.isnan(base):
                ax.barh(y, 100, color="white", edgecolor="#555555", hatch="//")
            else:
                share = 100 * min(base / r["median_ms"], 1.0)
                ax.barh(y, share, color=OKABE_ITO[2])
                ax.barh(y, 100 - share, left=share, color=OKABE_ITO[3])
            ax.text(101, y, fmt_ms(r["median_ms"]), va="center", fontsize=7)
        dotplot.rows_axis(ax, [r["label"] for r, _ in rows], dotplot.panel_title(*group))
        ax.set_xlim(0, 100)
    axes[-1].set_xlabel("share of the median per-image time (%); the median is written at the right")
    from matplotlib.patches import Patch

    fig.legend(handles=[Patch(color=OKABE_ITO[2], label="CPU: the machine's fastest measured implementation; "
                              "GPU: busy time (kernels trace, else CUDA events)"),
                        Patch(color=OKABE_ITO[3], label="host overhead (the rest of the call)"),
                        Patch(facecolor="white", edgecolor="#555555", hatch="//",
                              label="GPU, no device timer")],
               frameon=False, fontsize=7, loc="upper center", ncol=2,
               bbox_to_anchor=(0.5, 1 - 0.4 / fig.get_figheight()))
    fig.suptitle("Fig. 6  Where a call's time goes: the floor or the GPU's work, and host overhead",
                 y=1 - 0.1 / fig.get_figheight(), va="top")
    return finish(fig, data.runs, "overhead", out, margins={**dotplot.STACKED, "right": 0.9, "top_in": 1.2})
