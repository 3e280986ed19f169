"""What every figure shares: matplotlib off-screen, one fixed colour per implementation, the
ladder's order, the caption naming each machine, axis decoration, and number formats."""

import io
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.typing import LineStyleType  # noqa: E402

from harness import DEFAULT_FIGURES, registry  # noqa: E402
from harness.machine.files import write_atomic  # noqa: E402
from harness.report.markup.versions import cuda_runtime, cudnn_version  # noqa: E402

FIGURES_DIR = DEFAULT_FIGURES
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
# One colour per implementation in every figure, its spec's `colour` (registry.py: Okabe-Ito, then
# Paul Tol's muted colours for the Keras backends and the hand-written rung): a series keeps its
# colour when another is missing.
IMPL_COLOURS = {name: spec.colour for name, spec in registry.REGISTRY.items() if spec.colour}
OTHER_COLOUR = "#777777"  # a lab's module:Class, or a level that names no colour
# The ladder's implementations, bottom rung first, and the NumPy reference beside it (last): each
# spec's `order`.
IMPL_ORDER = registry.levels()
# the high-level API's levels -> their backend, from the row name ("Keras on JAX" -> "JAX")
BACKEND_OF = {name: registry.display(name).split(" on ")[-1] for name in registry.on_rung("high-level API")}
DEVICE_MARKER = {"cpu": "o", "gpu": "s"}
DEVICE_LINES: tuple[tuple[str, LineStyleType], ...] = (("cpu", "-"), ("gpu", "--"))  # Fig. 1's ladders
# A 9-inch figure (most of them) is 990 px wide: about the width a Markdown page shows (GitHub's
# column is ~980 px), so it is drawn at the size it is read, and no larger.
DPI = 110


def colour(implementation: str) -> str:
    return IMPL_COLOURS.get(implementation, OTHER_COLOUR)


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


def caption(runs: Sequence[dict], study: str | None = None) -> str:
    """One line per machine: its hardware, threads, key library versions, run ids."""
    lines = []
    for run in runs:
        if study and run["study"] != study:
            continue
        env = run["env"]
        pk = env.get("packages", {})
        tf = pk.get("tensorflow") or pk.get("tensorflow-cpu") or "-"
        threads = (env.get("threads") or {}).get("OPENBLAS_NUM_THREADS") or "?"
        gpu = ", ".join(g["name"] for g in env.get("gpus") or []) or "no GPU"
        cuda = f", CUDA {cuda_runtime(env)}, cuDNN {cudnn_version(env)}" if env.get("gpus") else ""
        lines.append(f"{run['machine']} | {gpu} | threads={threads} | TF {tf}, Keras "
                     f"{pk.get('keras', '-')}, JAX {pk.get('jax', '-')}, PyTorch {pk.get('torch', '-')}, "
                     f"NumPy {pk.get('numpy', '-')}{cuda} | {run_names(run)}")
    return "\n".join(lines) or "no runs"


def run_names(run: dict) -> str:
    """'run study/id', or 'runs study/a + study/b' for a run merged from several (rundata's
    latest_runs merges a profile study's runs per target: each one the rows came from is named)."""
    ids = run.get("run_ids") or [run["run_id"]]
    return ("run " if len(ids) == 1 else "runs ") + " + ".join(f"{run['study']}/{i}" for i in ids)


def finish(fig: Figure, runs: Sequence[dict], study: str | None, path: Path, caption_text: str | None = None,
           top: float = 1.0, margins: dict[str, float] | None = None) -> Path:
    """The caption under the figure, the layout, the PNG. margins (inches, or fractions of the
    width for left/right): a fixed layout, which costs a fraction of tight_layout's time; keys
    left, right, top_in, bottom_in (above the caption), gap_in (between stacked panels), wspace."""
    width_chars = int(fig.get_figwidth() * 21)  # 6-pt text: about 21 characters per inch
    text = "\n".join(textwrap.fill(line, width_chars, subsequent_indent="    ")
                     for line in (caption_text or caption(runs, study)).splitlines())
    fig.text(0.01, 0.005, text, fontsize=6, color="#444444", va="bottom", ha="left")
    caption_in = 0.11 * (text.count("\n") + 1) + 0.05
    height = fig.get_figheight()
    if margins is None:
        fig.tight_layout(rect=(0, caption_in / height, 1, top))
    else:
        bottom = (caption_in + margins.get("bottom_in", 0.5)) / height
        top_frac = 1 - margins.get("top_in", 0.5) / height
        rows = len({spec.rowspan.start for ax in fig.axes if (spec := ax.get_subplotspec()) is not None})
        gap = margins.get("gap_in", 0.4)
        mean_axes = max((height * (top_frac - bottom) - (rows - 1) * gap) / max(rows, 1), 0.1)
        fig.subplots_adjust(left=margins.get("left", 0.1), right=margins.get("right", 0.97), top=top_frac,
                            bottom=bottom, hspace=gap / mean_axes, wspace=margins.get("wspace", 0.2))
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=DPI)
    plt.close(fig)
    return write_atomic(path, png.getvalue())  # whole or not at all (a full disk keeps the last one)


def decorate(ax: Axes, title: str, xlabel: str, ylabel: str, legend_size: float = 8) -> None:
    """Every figure's axes are labelled with units, titled, and given a legend."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(frameon=False, fontsize=legend_size)


def ok_cells(frame: pd.DataFrame, study: str) -> pd.DataFrame:
    if frame.empty:
        return frame
    return frame[(frame["study"] == study) & (frame["status"] == "ok")]


def fmt_ms(ms: float) -> str:
    if ms >= 1000:
        return f"{ms / 1000:.2g} s"
    if ms >= 1:
        return f"{ms:.3g} ms"
    return f"{ms * 1000:.3g} µs"


MARKERS = "osD^vP*Xh<>"


def short_machine(machine: str) -> str:
    """'vm: AMD EPYC, 2 cores, AVX-512, peak 130 G MAC/s (not fingerprinted)' -> the name without
    its host or its parenthesis: still one name per machine (harness.report.claims.hosts)."""
    return machine.split(": ", 1)[-1].split(" (")[0]


LINESTYLES = ["-", "--", ":", "-."]


def lines_against_batch(ax: Axes, cells: pd.DataFrame, column: str) -> None:
    """One line per label of `column` against batch size (log-log), for the cells of one panel
    (one machine and device: the caller splits them). The colour is the implementation's; a
    second or third variant of one implementation is dashed or dotted, with its own marker."""
    labels = ladder_sorted(cells["label"])
    seen: dict[str, int] = {}
    for label in labels:
        impl = label.split("/")[0]
        k = seen[impl] = seen.get(impl, -1) + 1
        part = cells[cells["label"] == label].sort_values("batch_size")
        ax.plot(part["batch_size"], part[column], marker=MARKERS[k % len(MARKERS)],
                color=colour(impl), linestyle=LINESTYLES[k % len(LINESTYLES)], label=label)
    ax.set_xscale("log", base=2)
    sizes = sorted(cells["batch_size"].unique())
    ax.set_xticks(sizes, [str(b) for b in sizes])
    ax.set_yscale("log")


def panels(cells: pd.DataFrame) -> list[tuple[str, str]]:
    """(device, machine) pairs in reading order: the CPU machines, then the GPU machines."""
    return sorted({(d, m) for d, m in zip(cells["device"], cells["machine"], strict=True)},
                  key=lambda p: (p[0] != "cpu", p[1]))
