"""Where a figure's words go: measured with the figure's own renderer (Agg: the same figure
always measures the same), so a label is placed only where it does not cover another label or a
marker, and stays inside its axes.

    boxes_overlap(a, b)                       whether two boxes (display units) overlap
    inside(ax, text)                          whether a text lies within its axes
    nearest(box, centres)                     the point nearest a label's box (its own, or it misleads)
    place_labels(ax, points, texts, sides)    each label beside its point, clear of the others (a
                                              crowded one farther off, with a leader line to it)
    sides_away(centres, defaults, band_px)    each label's side: away from its nearest level neighbour
    fit_label(ax, x0, x1, y, texts, **kw)     the first text that fits between x0 and x1, or none
"""

import math
from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.backend_bases import RendererBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox

from harness.draw.style import DPI

PAD_PX = 2.0  # the least room between two labels, or a label and a marker


def renderer(ax: Axes) -> RendererBase:
    """The figure's renderer at the dpi its PNG is saved at: hinted text is not as wide at 100 dpi
    as at 150 (8% narrower), so a label measured at another dpi may not fit in the PNG."""
    fig = ax.get_figure(root=True)
    assert isinstance(fig, Figure)
    if fig.dpi != DPI:
        fig.set_dpi(DPI)
    if not isinstance(fig.canvas, FigureCanvasAgg):  # a closed figure's canvas cannot measure
        FigureCanvasAgg(fig)
    return fig.canvas.get_renderer()  # type: ignore[attr-defined]  # Agg's canvas has it


def text_box(text: Text, r: RendererBase) -> Bbox:
    """The box of a label's words alone (an annotation's own box also holds its leader line)."""
    if isinstance(text, Annotation):
        text.update_positions(r)  # where its words go: an annotation places them when measured
    return Text.get_window_extent(text, r)


def boxes_overlap(a: Bbox, b: Bbox, pad: float = PAD_PX) -> bool:
    return a.x0 < b.x1 + pad and b.x0 < a.x1 + pad and a.y0 < b.y1 + pad and b.y0 < a.y1 + pad


def nearest(box: Bbox, centres: Sequence[tuple[float, float]]) -> int:
    """The point (display units) nearest the box: a label must sit nearest its own marker, or it
    reads as another's."""
    def gap(c: tuple[float, float]) -> float:
        dx, dy = max(box.x0 - c[0], 0.0, c[0] - box.x1), max(box.y0 - c[1], 0.0, c[1] - box.y1)
        return float(dx * dx + dy * dy)
    return min(range(len(centres)), key=lambda j: gap(centres[j]))


def inside(ax: Axes, text: Text) -> bool:
    """Whether the text's box lies within its axes' box."""
    box, frame = text_box(text, renderer(ax)), ax.get_window_extent(renderer(ax))
    return frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1


# Offsets (points) tried in turn, for a label meant to sit right (+1) or left (-1) of its point:
# beside it, then beside and a little above or below, then straight above or below, then further
# above or below (a crowded corner: three labels of one height).
def _offsets(side: int) -> list[tuple[float, float, str]]:
    ha, other = ("left", "right") if side > 0 else ("right", "left")
    return [(7 * side, 0, ha), (7 * side, 7, ha), (7 * side, -7, ha), (7 * side, 13, ha), (7 * side, -13, ha),
            (-7 * side, 0, other), (-7 * side, 7, other), (-7 * side, -7, other), (0, 11, "center"),
            (0, -11, "center"), (7 * side, 20, ha), (7 * side, -20, ha), (-7 * side, 13, other),
            (-7 * side, -13, other), (-7 * side, 20, other), (-7 * side, -20, other)]


def sides_away(centres: Sequence[tuple[float, float]], defaults: Sequence[int], band_px: float = 12.0,
               reach_px: float = 400.0) -> list[int]:
    """Each label's side (+1 right, -1 left), in display units: away from the nearest other point
    at about its height (within band_px up or down, reach_px across), so that a label never sits
    between two markers and reads as the other's; its default where no point is near or the
    nearest sits straight above or below it."""
    sides = []
    for k, (x, y) in enumerate(centres):
        near = [(abs(ox - x), ox - x) for j, (ox, oy) in enumerate(centres)
                if j != k and abs(oy - y) <= band_px and 0 < abs(ox - x) <= reach_px]
        sides.append(-1 if near and min(near)[1] > 0 else 1 if near else defaults[k])
    return sides


def place_labels(ax: Axes, points: Sequence[tuple[float, float]], texts: Sequence[str], sides: Sequence[int],
                 marker_pt: float = 8, fontsize: float = 7,
                 others: Sequence[tuple[float, float]] = ()) -> list[Annotation]:
    """One label per point (data coordinates), each at the first offset where it covers no label
    placed before it and no point's marker (the points' and the unlabelled `others'`), stays inside
    the axes and is nearest its own point of all of them (nearest); where none is clear, the first
    offset (so every point keeps its label). A label left with none clear is placed first in the next
    try (a long label in a crowded column needs the first pick), up to a try per label; the try that
    left the fewest unclear is kept. Call it after the axes' limits are final."""
    marker_px = marker_pt * DPI / 72
    centres = [(float(x), float(y)) for x, y in (ax.transData.transform(p) for p in [*points, *others])]
    markers = [Bbox.from_extents(x - marker_px / 2, y - marker_px / 2, x + marker_px / 2, y + marker_px / 2)
               for x, y in centres]
    order: list[int] = list(range(len(points)))
    best: tuple[list[Annotation], list[int]] | None = None
    for _ in range(len(points)):
        labels, stuck = _place(ax, points, texts, sides, order, centres, markers, fontsize)
        if best is None or len(stuck) < len(best[1]):  # the better try stays on the axes
            for old in best[0] if best is not None else []:
                old.remove()
            best = (labels, stuck)
        else:
            for label in labels:
                label.remove()
        if not stuck:
            break
        order = [stuck[0]] + [k for k in order if k != stuck[0]]
    assert best is not None
    return best[0]


def _place(ax: Axes, points: Sequence[tuple[float, float]], texts: Sequence[str], sides: Sequence[int],
           order: list[int], centres: list[tuple[float, float]], markers: list[Bbox],
           fontsize: float) -> tuple[list[Annotation], list[int]]:
    """The labels (in the points' order) placed in `order`, and the points whose label found no clear
    offset (in the order they were met); centres and markers: the points' and their markers' places
    in display units, the same in every try."""
    r = renderer(ax)
    placed: list[Bbox] = []
    out: dict[int, Annotation] = {}
    stuck = []
    for k in order:
        label = None
        for dx, dy, ha in _offsets(sides[k]):
            if label is not None:
                label.remove()
            label = ax.annotate(texts[k], points[k], xytext=(dx, dy), textcoords="offset points", ha=ha,
                                va="center", fontsize=fontsize)
            box = label.get_window_extent(r)
            others = placed + [m for j, m in enumerate(markers) if j != k]
            if (inside(ax, label) and not any(boxes_overlap(box, o) for o in others)
                    and nearest(box, centres) == k):
                break
        else:
            if label is not None:
                label.remove()
            label = _led(ax, points[k], texts[k], sides[k], placed, markers, fontsize)
            if label is None:
                stuck.append(k)
                dx, dy, ha = _offsets(sides[k])[0]
                label = ax.annotate(texts[k], points[k], xytext=(dx, dy), textcoords="offset points", ha=ha,
                                    va="center", fontsize=fontsize)
        assert label is not None
        placed.append(text_box(label, r))
        out[k] = label
    return [out[k] for k in range(len(points))], stuck


# Farther places for a label whose point is crowded (points): on a ring around the point, its own side
# first; such a label is joined to its point by a thin leader line, so it cannot read as another's.
LEADER_RINGS = (22, 32, 44, 58)
LEADER_ANGLES = (0, 30, -30, 60, -60, 90, -90, 120, -120, 150, -150, 180)
LEADER = {"arrowstyle": "-", "color": "#888888", "linewidth": 0.6, "shrinkA": 0, "shrinkB": 3}


def _led(ax: Axes, point: tuple[float, float], text: str, side: int, placed: list[Bbox],
         markers: list[Bbox], fontsize: float) -> Annotation | None:
    """The label at the first clear place on LEADER_RINGS (inside the axes, covering no label placed
    and no marker), with a leader line to its point; None where no place is clear."""
    r = renderer(ax)
    for radius in LEADER_RINGS:
        for angle in LEADER_ANGLES:
            dx = side * radius * math.cos(math.radians(angle))
            dy = radius * math.sin(math.radians(angle))
            ha = "left" if dx > 1 else "right" if dx < -1 else "center"
            label = ax.annotate(text, point, xytext=(dx, dy), textcoords="offset points", ha=ha,
                                va="center", fontsize=fontsize, arrowprops=LEADER)
            box = text_box(label, r)
            if inside(ax, label) and not any(boxes_overlap(box, o) for o in [*placed, *markers]):
                return label
            label.remove()
    return None


def fit_label(ax: Axes, x0: float, x1: float, y: float, texts: Sequence[str], **style: object) -> Text | None:
    """The first of `texts` (longest first) that fits, centred as drawn, between x0 and x1 (data) with a
    little room, drawn; None (nothing drawn) when none fits."""
    r = renderer(ax)
    left, right = ax.transData.transform((x0, y))[0], ax.transData.transform((x1, y))[0]
    # the middle as drawn (on a log axis not the mean of the ends)
    middle = ax.transData.inverted().transform(((left + right) / 2, ax.transData.transform((x0, y))[1]))[0]
    for text in texts:
        label = ax.text(middle, y, text, ha="center", va="center", **style)  # type: ignore[arg-type]
        if label.get_window_extent(r).width + 2 * PAD_PX <= right - left:
            return label
        label.remove()
    return None
