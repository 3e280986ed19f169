"""What every figure shares, the report's and a lab's: matplotlib off-screen, the palette, the caption
naming each machine, the layout and the PNG written whole, axis decoration, and times as words.

    caption(runs, study)             one line per machine: hardware, threads, versions, run ids
    finish(fig, runs, study, path)   the caption under the figure, the layout, the PNG
    decorate(ax, title, x, y)        title, axis labels with units, a legend
    fmt_ms(ms)                       '12.3 µs', '4.56 ms', '1.2 s'
"""

import io
import textwrap
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from harness.machine.files import write_atomic  # noqa: E402
from harness.machine.versions import cuda_runtime, cudnn_version  # noqa: E402

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
# A 9-inch figure (most of them) is 990 px wide: about the width a Markdown page shows (GitHub's
# column is ~980 px), so it is drawn at the size it is read, and no larger.
DPI = 110


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


def fmt_ms(ms: float) -> str:
    if ms >= 1000:
        return f"{ms / 1000:.2g} s"
    if ms >= 1:
        return f"{ms:.3g} ms"
    return f"{ms * 1000:.3g} µs"
