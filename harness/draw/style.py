"""What every figure shares, the report's and a lab's: matplotlib off-screen, the palette, the caption
naming each machine, the layout and the PNG written whole, axis decoration, and times as words.

    caption(runs, study)             one line per machine: hardware, threads, versions, run ids
    layout(fig)                      the constrained layout, laid out now
    settle(fig, caption_text)        the caption under the figure, the constrained layout above it
    finish(fig, runs, study, path)   settle, then the PNG (save)
    legend_below(ax, handles)        a legend under the axes, inside the layout
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
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.transforms import offset_copy  # noqa: E402

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


def put_caption(fig: Figure, caption_text: str) -> float:
    """The caption under the figure, 6-pt text wrapped to its width: the inches it takes."""
    width_chars = int(fig.get_figwidth() * 21)  # 6-pt text: about 21 characters per inch
    text = "\n".join(textwrap.fill(line, width_chars, subsequent_indent="    ")
                     for line in caption_text.splitlines())
    fig.text(0.01, 0.005, text, fontsize=6, color="#444444", va="bottom", ha="left")
    return 0.11 * (text.count("\n") + 1) + 0.05


def layout(fig: Figure, below_in: float = 0.0) -> None:
    """matplotlib's constrained layout, laid out now, below_in inches kept free under it: words
    placed afterwards (measured with the figure's renderer) stay where they were measured."""
    below = below_in / fig.get_figheight()
    fig.set_layout_engine("constrained", rect=(0, below, 1, 1 - below))
    engine = fig.get_layout_engine()
    assert engine is not None
    engine.execute(fig)


def settle(fig: Figure, caption_text: str) -> None:
    """The caption under the figure, and the constrained layout above it (layout)."""
    layout(fig, put_caption(fig, caption_text) + 0.05)


def save(fig: Figure, path: Path) -> Path:
    """The PNG, whole or not at all (a full disk keeps the last one); the figure closed."""
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=DPI)
    plt.close(fig)
    return write_atomic(path, png.getvalue())


def finish(fig: Figure, runs: Sequence[dict], study: str | None, path: Path, caption_text: str | None = None,
           margins: dict[str, float] | None = None) -> Path:
    """The caption under the figure, the layout (settle), the PNG. margins (inches, or fractions of
    the width for left/right): a fixed layout instead, a fraction of the constrained layout's time,
    for figures drawn by the hundred (a lab's per-student plots); keys left, right, top_in,
    bottom_in (above the caption)."""
    text = caption_text or caption(runs, study)
    if margins is None:
        settle(fig, text)
    else:
        height = fig.get_figheight()
        fig.subplots_adjust(left=margins.get("left", 0.1), right=margins.get("right", 0.97),
                            top=1 - margins.get("top_in", 0.5) / height,
                            bottom=(put_caption(fig, text) + margins.get("bottom_in", 0.5)) / height)
    return save(fig, path)


def legend_below(ax: Axes, handles: Sequence[Artist], ncol: int = 1, gap_pt: float = 34) -> None:
    """A legend centred under the axes, below its x label (gap_pt: from the axes' bottom edge), so
    that the constrained layout makes room for it there (a figure's own legend it would place over
    the caption)."""
    fig = ax.get_figure(root=True)
    assert isinstance(fig, Figure)
    below = offset_copy(ax.transAxes, fig=fig, y=-gap_pt, units="points")
    ax.legend(handles=handles, frameon=False, fontsize=7, loc="upper center", ncol=ncol, handletextpad=0.3,
              bbox_to_anchor=(0.5, 0), bbox_transform=below)


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
