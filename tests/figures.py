"""Legibility checks on matplotlib figures, shared by the suites' plot tests: text that leaves the canvas,
lines that join points, and series that would draw on top of each other."""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.transforms import Bbox


def texts_outside(fig: Figure) -> list[str]:
    """Every visible, non-empty text artist (titles, labels, ticks, annotations, legends) whose drawn extent
    leaves the figure, and every annotation that leaves its axes; the figure is drawn first so layout
    engines have placed everything."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    undrawn = set()  # tick labels of ticks beyond the view limits exist but are never drawn
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                if not lo - 1e-9 * abs(hi - lo) <= tick.get_loc() <= hi + 1e-9 * abs(hi - lo):
                    undrawn |= {id(tick.label1), id(tick.label2)}
    out = []
    for text in fig.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "get_window_extent")):
        if not text.get_visible() or not text.get_text().strip() or id(text) in undrawn:
            continue
        if not _inside(text.get_window_extent(renderer), box):
            out.append(text.get_text())
    for ax in fig.axes:  # a value label crossing its panel's frame is cut by, or runs into, the next panel
        out += [t.get_text() for t in ax.texts if t.get_text().strip() and t.get_visible()
                and not _inside(t.get_window_extent(renderer), ax.bbox)]
    return out


def _inside(ext: Bbox, box: Bbox) -> bool:
    return ext.x0 >= box.x0 - 1 and ext.y0 >= box.y0 - 1 and ext.x1 <= box.x1 + 1 and ext.y1 <= box.y1 + 1


def joining_lines(ax: Axes) -> list[Line2D]:
    """Lines drawn through two or more data points (not markers alone, not error-bar caps, not grid lines)."""
    return [ln for ln in ax.get_lines() if ln.get_linestyle() not in ("None", "", " ") and len(ln.get_xdata()) > 1
            and ln.get_visible()]


def texts(ax: Axes) -> list[str]:
    """Every text of one axes: annotations, tick labels, title, axis labels."""
    return [t.get_text() for t in (*ax.texts, *ax.get_xticklabels(), *ax.get_yticklabels(), ax.title,
                                   ax.xaxis.label, ax.yaxis.label)]
