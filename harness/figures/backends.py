"""Fig. 8: one Keras model on three backends, called four ways (study `backends`), a panel per
answering machine; each backend keeps its colour and marker whichever backends a panel has."""

import textwrap
from pathlib import Path

import matplotlib.ticker
import pandas as pd

from harness import registry
from harness.figures import dotplot, pick
from harness.figures.grid import panel_grid, same_y_scale
from harness.figures.style import BACKEND_OF, colour, finish, fmt_ms, legend_below, marker, ok_cells, panels
from harness.report.claims.rundata import ReportData

REFERENCE = registry.on_rung("reference")[0]  # the NumPy reference: the dotted line in every panel


def backend_rows(cells: pd.DataFrame, device: str, machine: str) -> dict[str, dict[str, pd.Series]]:
    """Per backend: {stage: row} with the compiled path as one stage (its variant named)."""
    stages = {**{call: call for call in registry.KERAS_CALLS},
              **{registry.compiled_call(i): "compiled" for i in BACKEND_OF}}
    found: dict[str, dict[str, pd.Series]] = {}
    for _, r in cells[(cells["device"] == device) & (cells["machine"] == machine)].iterrows():
        if r["implementation"] in BACKEND_OF and r["variant"] in stages:
            found.setdefault(r["implementation"], {})[stages[r["variant"]]] = r
    return found


def backend_label(implementation: str) -> str:
    """The legend's name of a Keras backend: 'Keras on JAX', not 'JAX' (JAX's own ops are
    another level, in other figures)."""
    return f"Keras on {BACKEND_OF[implementation]}"


def first_stage(found: dict[str, pd.Series], stages: list[str]) -> str:
    return next(s for s in stages if s in found)


def fig_backends(data: ReportData, out: Path) -> Path | None:
    """Fig. 8: one Keras model on three backends, a panel per answering machine; each backend keeps
    its colour and marker in every panel, whichever backends a panel has."""
    cells = ok_cells(data.frame, "backends")
    cells = pick.answering(cells[cells["batch_size"] == 1], data) if not cells.empty \
        else cells
    if cells.empty:
        return None
    groups = panels(cells)
    stages = ["predict", "predict_on_batch", "call", "compiled"]
    fig, axes = panel_grid(len(groups), height_each=4.2)
    for ax, (device, machine) in zip(axes, groups, strict=True):
        by_backend = backend_rows(cells, device, machine)
        for impl in BACKEND_OF:  # fixed order and fixed offsets: a missing backend leaves a gap
            offset = (list(BACKEND_OF).index(impl) - 1) * 0.2
            for x, stage in enumerate(stages):
                r = by_backend.get(impl, {}).get(stage)
                if r is None:
                    continue
                y, (low, high) = r["median_ms"], dotplot.ends(r)
                ax.errorbar(x + offset, y, yerr=[[y - low], [high - y]],
                            marker=marker(impl), markersize=7, color=colour(impl), markeredgecolor="black",
                            markeredgewidth=0.5, capsize=2, linestyle="none",
                            label=backend_label(impl) if stage == first_stage(by_backend[impl], stages)
                            else None)
        floor = cells[(cells["device"] == device) & (cells["machine"] == machine)
                      & (cells["implementation"] == REFERENCE)]
        if not floor.empty:
            ax.axhline(floor["median_ms"].iloc[0], color="#555555", linestyle=":", linewidth=1,
                       label=f"NumPy reference ({fmt_ms(floor['median_ms'].iloc[0])})")
        ax.set_xticks(range(len(stages)), ["predict", "predict_on\n_batch", "model(x)", "compiled\nmodel(x)"],
                      fontsize=8)
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: fmt_ms(v)))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.grid(True, axis="y", color="#EEEEEE")
        # a title a third of the figure wide: wrapped, so that it never runs into its neighbour's
        ax.set_title(textwrap.fill(dotplot.panel_title(device, machine), 36), fontsize=9, loc="left")
        missing = [backend_label(i) for i in BACKEND_OF if i not in by_backend]
        if missing:
            ax.text(0.02, 0.02, f"not measured: {', '.join(missing)}", transform=ax.transAxes, fontsize=7,
                    color="#555555")
        legend_below(ax, ax.get_legend_handles_labels()[0], ncol=2, gap_pt=30)  # under it: no dot hidden
    for ax in axes[::3]:  # the first panel of each row (grid.COLUMNS a row)
        ax.set_ylabel("per-image time, median (log scale)")
    same_y_scale(axes)
    fig.suptitle("Fig. 8  One Keras model, three backends, called four ways (dot: median; whisker: 95% CI)")
    return finish(fig, out)
