"""Accuracy per group, seen vs unseen, for one or more rg summaries (one bar per run and split)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .metrics import PAPER_GROUPS, SPLITS

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def questions(summary: Mapping[str, Any], split: str, group: str) -> int:
    """Questions behind one bar: the per-category counts of that group and split (a bar of 3 questions and
    one of 300 look alike otherwise)."""
    return sum(int(c.get("n", 0)) for c in summary.get("categories", {}).values()
               if c.get("group") == group and c.get("split") == split)


def groups_figure(summaries: Mapping[str, Mapping[str, Any]]) -> Figure:
    """Grouped bars: x = the paper's groups, one bar per (run, split), 95% bootstrap intervals as error bars,
    n above every bar and a marker on the axis for a bar at 0 (a zero-height bar draws nothing)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    bars = [(label, split) for label, s in summaries.items() for split in SPLITS if s.get("groups", {}).get(split)]
    x = np.arange(len(PAPER_GROUPS))
    width = 0.8 / max(len(bars), 1)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(PAPER_GROUPS) + 0.4 * len(bars)), 3.8),
                           layout="constrained")
    for i, (label, split) in enumerate(bars):
        cells, color = summaries[label]["groups"][split], colors[i % len(colors)]
        pos = x - 0.4 + (i + 0.5) * width
        values, lo, hi = [], [], []
        for key, _ in PAPER_GROUPS:
            c = cells.get(key)
            v = 100 * c["value"] if c else np.nan
            values.append(v)
            lo.append(v - 100 * c["lo"] if c and c["lo"] == c["lo"] else 0.0)
            hi.append(100 * c["hi"] - v if c and c["hi"] == c["hi"] else 0.0)
        ax.bar(pos, values, width, yerr=[lo, hi], capsize=2, color=color, edgecolor="0.2", linewidth=0.6,
               label=f"{label}: {split}", hatch="" if split == "seen" else "//", alpha=0.9)
        zero = [p for p, v in zip(pos, values, strict=True) if v == 0]
        if zero:  # an empty unclipped line still claims layout space at the figure's origin
            ax.plot(zero, [0] * len(zero), ls="none", marker="_", ms=max(6.0, 60 * width), mew=3, color=color,
                    clip_on=False)
        for p, (key, _), v, h in zip(pos, PAPER_GROUPS, values, hi, strict=True):
            top = 0.0 if v != v else v + h
            ax.annotate(f"n={questions(summaries[label], split, key)}", (p, top), textcoords="offset points",
                        xytext=(0, 2), ha="center", va="bottom", fontsize=6.5, rotation=90 if len(bars) > 3 else 0)
    ax.set_xticks(x, [label for _, label in PAPER_GROUPS])
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(-2, 115)  # room for a zero marker below and n above a bar at 100
    ax.set_yticks(range(0, 101, 20))
    ax.set_title("Reasoning-gym accuracy per group (n = questions per bar)")
    fig.legend(fontsize=7, loc="outside right upper")
    return fig


def plot_groups(summaries: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """groups_figure written to `path`."""
    import matplotlib.pyplot as plt

    fig = groups_figure(summaries)
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
