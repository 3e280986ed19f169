"""What every figure shares: matplotlib off-screen, the Okabe-Ito colours, the ladder's order,
the caption naming each machine, axis decoration, and number formats."""

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

from harness import DEFAULT_FIGURES  # noqa: E402

FIGURES_DIR = DEFAULT_FIGURES
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
# The ladder, bottom to top (and the reference beside it): API levels, then implementations.
LEVEL_ORDER = ["numpy", "cudnn", "onednn", "tensorflow-ops", "jax-ops", "torch-ops", "keras"]
IMPL_ORDER = ["numpy", "cudnn", "onednn", "tf", "jax", "torch", "keras", "keras_jax", "keras_torch"]
BACKEND_OF = {"keras": "TensorFlow", "keras_jax": "JAX", "keras_torch": "PyTorch"}
DPI = 200


def caption(runs, study=None) -> str:
    """One line per machine: its hardware, threads, key library versions, run ids."""
    lines = []
    for run in runs:
        if study and run["study"] != study:
            continue
        env = run["env"]
        pk = env.get("packages", {})
        tf = pk.get("tensorflow") or pk.get("tensorflow-cpu") or "-"
        threads = (env.get("threads") or {}).get("OPENBLAS_NUM_THREADS") or "?"
        gpu = ", ".join(f"{g['name']} (driver {g['driver']})" for g in env.get("gpus") or []) or "no GPU"
        cudnn = (env.get("cudnn") or {}).get("version", "-")
        lines.append(f"{run['machine']} | {gpu} | threads={threads} | TF {tf}, Keras "
                     f"{pk.get('keras', '-')}, JAX {pk.get('jax', '-')}, PyTorch {pk.get('torch', '-')}, "
                     f"NumPy {pk.get('numpy', '-')}, cuDNN {cudnn} | "
                     f"run {run['study']}/{run['run_id']}")
    return "\n".join(lines) or "no runs"


def finish(fig, runs, study, path: Path, caption_text=None) -> Path:
    width_chars = int(fig.get_figwidth() * 21)  # 6-pt text: about 21 characters per inch
    text = "\n".join(textwrap.fill(line, width_chars, subsequent_indent="    ")
                     for line in (caption_text or caption(runs, study)).splitlines())
    fig.text(0.01, 0.005, text, fontsize=6, color="#444444", va="bottom", ha="left")
    fig.tight_layout(rect=(0, 0.03 + 0.018 * text.count("\n"), 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def decorate(ax, title, xlabel, ylabel, legend_size=8):
    """Every figure's axes are labelled with units, titled, and given a legend."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(frameon=False, fontsize=legend_size)


def ok_cells(frame, study):
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
    """'vm: Intel(R) Xeon(R) Processor (2 cores)' -> 'Intel(R) Xeon(R) Processor': the model."""
    return machine.split(": ", 1)[-1].split(" (")[0]


def lines_against_batch(ax, cells, column: str):
    """One line per label x device x machine of `column` against batch size (log-log), the
    machine named where there are several. Past the eight colours a line is dashed and keeps
    its own marker, so no two lines look alike. The legend goes beside the axes."""
    several = cells["machine"].nunique() > 1
    for i, ((label, device, machine), part) in enumerate(cells.groupby(["label", "device", "machine"])):
        part = part.sort_values("batch_size")
        where = f"{device.upper()}, {short_machine(machine)}" if several else device.upper()
        ax.plot(part["batch_size"], part[column], marker=MARKERS[i % len(MARKERS)],
                color=OKABE_ITO[i % len(OKABE_ITO)], linestyle="-" if i < len(OKABE_ITO) else "--",
                label=f"{label} ({where})")
    ax.set_xscale("log", base=2)
    sizes = sorted(cells["batch_size"].unique())
    ax.set_xticks(sizes, [str(b) for b in sizes])
    ax.set_yscale("log")
