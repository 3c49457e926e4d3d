"""BFCL's accuracy figure: one horizontal bar per category run (grouped and coloured by BFCL section, 95%
Wilson intervals over its entries) and one per section (BFCL's own aggregation, which mixes means, so no
interval). Every bar says n, its entries, and a bar at 0 gets a marker on the axis: a quick run of two
entries per category is mostly zeros, which would otherwise draw nothing."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from smith.evals.common import wilson

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def _bars(ax: Axes, names: list[str], values: list[float | None], ns: list[int], colors: list[str],
          errors: list[tuple[float, float]] | None) -> None:
    """Horizontal bars top to bottom, n in each tick label, the value right of each bar (and of its error bar),
    a marker for a bar at 0 and "not scored" for None."""
    ys = list(range(len(names)))[::-1]
    vals = [100 * v if v is not None else 0.0 for v in values]
    xerr = None
    if errors:
        xerr = [[v - 100 * lo for v, (lo, _) in zip(vals, errors, strict=True)],
                [100 * hi - v for v, (_, hi) in zip(vals, errors, strict=True)]]
    ax.barh(ys, vals, color=colors, edgecolor="0.2", linewidth=0.6, xerr=xerr, capsize=2, height=0.7)
    for i, (y, v, raw, color) in enumerate(zip(ys, vals, values, colors, strict=True)):
        if raw is None:
            ax.annotate("not scored", (0, y), textcoords="offset points", xytext=(4, 0), va="center", fontsize=7)
            continue
        if v == 0:
            ax.plot([0], [y], marker="|", ms=12, mew=3, color=color, clip_on=False)
        right = max(v, 100 * errors[i][1]) if errors else v  # right of the error bar
        ax.annotate(f"{v:.0f}%", (right, y), textcoords="offset points", xytext=(4, 0), va="center",
                    fontsize=7)
    ax.set_yticks(ys, [f"{name}  n={n}" for name, n in zip(names, ns, strict=True)], fontsize=8)
    ax.set_xlim(-2, 118)  # room for the value right of a bar at 100
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel("accuracy (%)")
    ax.grid(axis="x", alpha=0.3)


def figure(categories: dict[str, dict[str, Any]], sections: dict[str, float], title: str) -> Figure:
    """Categories (left) and sections (right) of one BFCL run; `categories` as in summary.json."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from . import SECTIONS

    section_of = {c: s for s, cats in SECTIONS.items() for c in cats}
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color = {s: palette[i % len(palette)] for i, s in enumerate(SECTIONS)}
    order = [c for cats in SECTIONS.values() for c in cats if c in categories]
    order += [c for c in categories if c not in order]
    cat_n = [int(categories[c].get("total_count", 0)) for c in order]
    scored = [categories[c].get("accuracy") for c in order]
    errors = [wilson(int(categories[c].get("correct_count", 0)), n) if n and scored[i] is not None else (0.0, 0.0)
              for i, (c, n) in enumerate(zip(order, cat_n, strict=True))]
    secs = [s for s in SECTIONS if s in sections]
    sec_n = [sum(int(categories[c].get("total_count", 0)) for c in SECTIONS[s] if c in categories) for s in secs]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 1.2 + 0.32 * max(len(order), len(secs), 3)),
                                      layout="constrained", width_ratios=(3, 2))
    _bars(left, order, scored, cat_n, [color.get(section_of.get(c, ""), "0.5") for c in order],
          errors)
    left.set_title("per category (95% Wilson intervals)", fontsize=9)
    _bars(right, secs, [sections[s] for s in secs], sec_n, [color[s] for s in secs], None)
    right.set_title("per BFCL section (over the categories run)", fontsize=9)
    fig.suptitle(title, fontsize=10)
    return fig


def plot_accuracy(categories: dict[str, dict[str, Any]], sections: dict[str, float], title: str,
                  path: str | Path) -> Path:
    """figure written to `path`."""
    import matplotlib.pyplot as plt

    fig = figure(categories, sections, title)
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
