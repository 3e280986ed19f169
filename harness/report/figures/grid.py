"""Side-by-side panels, one per machine and device, on one y scale (Figs. 8 and 9)."""

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from harness.report.markup.style import plt


def panel_grid(n: int, width_each: float = 4.3, height: float = 4.2) -> tuple[Figure, list[Axes]]:
    fig, axes = plt.subplots(1, n, figsize=(width_each * n, height), squeeze=False)
    return fig, list(axes[0])


def same_y_scale(axes: list[Axes]) -> None:
    """Every panel on the y range that holds all of them (panels compare by eye)."""
    low = min(ax.get_ylim()[0] for ax in axes)
    high = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:
        ax.set_ylim(low, high)
