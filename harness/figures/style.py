"""What the report's figures share beyond the basics every figure has (harness.draw.style: matplotlib
off-screen, the palette, axis decoration, the PNG, number formats) and what they share with the
report (harness.report.markup.style): one fixed colour and marker per implementation, the ladder's
order, the cells a figure draws, machine names in panel titles. A figure carries no caption of its
own: REPORT.md's caption says how to read it (templates/figures.toml) and DETAILS.md names the runs."""

from collections.abc import Iterable
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from harness import DEFAULT_FIGURES, registry
from harness.draw import style
from harness.draw.style import (  # noqa: F401  (the figures take the basics from here)
    DPI,
    OKABE_ITO,
    decorate,
    fmt_ms,
    layout,
    legend_below,
    plt,
)
from harness.report.markup.style import BACKEND_OF, IMPL_ORDER, ok_cells  # noqa: F401

FIGURES_DIR = DEFAULT_FIGURES


def save(fig: Figure, path: Path) -> Path:
    """The PNG (harness.draw.style.save), its constrained layout laid out once more at the PNG's dpi
    and then fixed: what savefig does itself, but only after drawing the whole figure once, unseen,
    to lay it out (a third of the figure's time). The same PNG, byte for byte."""
    engine = fig.get_layout_engine()
    if engine is not None:
        fig.set_dpi(DPI)
        engine.execute(fig)
        fig.set_layout_engine(None)  # savefig draws once, where it is
    return style.save(fig, path)


def finish(fig: Figure, path: Path) -> Path:
    """The PNG (save), in matplotlib's constrained layout, laid out once, at the PNG's dpi."""
    fig.set_layout_engine("constrained")
    return save(fig, path)


# One colour per implementation in every figure, its spec's `colour` (registry.py: Okabe-Ito, then
# Paul Tol's muted colours for the Keras backends and the hand-written rung): a series keeps its
# colour when another is missing.
IMPL_COLOURS = {name: spec.shown.colour for name, spec in registry.REGISTRY.items() if spec.shown.colour}
OTHER_COLOUR = "#777777"  # a lab's module:Class, or a level that names no colour
DEVICE_MARKER = {"cpu": "o", "gpu": "s"}
# One marker per implementation, in the ladder's order, wherever a figure draws several levels in
# one panel (lines against batch size, the Keras backends): the palette's sand, orange and olive, or
# its pink and wine, are near in hue for some readers, so two series never share colour and marker.
MARKERS = "DP*vXhpd>os^<"  # the Keras backends (drawn together in Figs. 8 to 10) the plainest three
IMPL_MARKERS = {name: MARKERS[k % len(MARKERS)] for k, name in enumerate(IMPL_ORDER)}


def colour(implementation: str) -> str:
    return IMPL_COLOURS.get(implementation, OTHER_COLOUR)


def marker(implementation: str) -> str:
    """The implementation's marker (IMPL_MARKERS); a lab's module:Class an X."""
    return IMPL_MARKERS.get(implementation, "x")


LIGHTEST = 0.6  # the last of several variants of one level: its colour mixed 60% toward white


def shade(implementation: str, k: int, n: int) -> str:
    """The k-th of n variants of one level drawn in one panel: the level's colour for the first
    (and for a lone variant), then lighter shades of it, evenly, up to LIGHTEST toward white, so
    ten CUDA lines are told apart by colour as well as by marker."""
    if not 0 <= k < n:
        raise ValueError(f"variant {k} of {n}: expected 0 <= k < n")
    base = colour(implementation)
    mix = LIGHTEST * k / (n - 1) if n > 1 else 0.0
    rgb = [int(base[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * mix):02X}" for c in rgb)


def impl_rank(implementation: str) -> int:
    """Ladder position (bottom first); anything unknown after the known ones."""
    return IMPL_ORDER.index(implementation) if implementation in IMPL_ORDER else len(IMPL_ORDER)


def ladder_sorted(labels: Iterable[str]) -> list[str]:
    """'impl/variant' labels in ladder order, variants in the order given."""
    labels = list(dict.fromkeys(labels))
    return sorted(labels, key=lambda lb: (impl_rank(lb.split("/")[0]), lb.split("/")[0],
                                          labels.index(lb)))


def short_machine(machine: str) -> str:
    """'vm: Intel Xeon Processor, AVX-512, AMX, 2 cores, family 6 model 167 ..., kernel 6.18 (not
    fingerprinted)' -> 'Intel Xeon Processor, AVX-512, AMX, 2 cores': the name without its host, its
    parenthesis or what harness.report.claims.hosts adds after the cores to tell two of one model
    apart (a figure draws one machine per device; DETAILS.md names it in full)."""
    parts = machine.split(": ", 1)[-1].split(" (")[0].split(", ")
    cores = next((k for k, part in enumerate(parts) if part.endswith(" cores")), len(parts) - 1)
    return ", ".join(parts[:cores + 1])


def panels(cells: pd.DataFrame) -> list[tuple[str, str]]:
    """(device, machine) pairs in reading order: the CPU machines, then the GPU machines."""
    return sorted({(d, m) for d, m in zip(cells["device"], cells["machine"], strict=True)},
                  key=lambda p: (p[0] != "cpu", p[1]))
