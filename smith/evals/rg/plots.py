"""Accuracy per group, seen vs unseen, for one or more rg summaries (one bar per run and split)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .metrics import PAPER_GROUPS, SPLITS


def plot_groups(summaries: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """Grouped bars: x = the paper's groups, one bar per (run, split), 95% bootstrap intervals as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    bars = [(label, split) for label, s in summaries.items() for split in SPLITS if s.get("groups", {}).get(split)]
    x = np.arange(len(PAPER_GROUPS))
    width = 0.8 / max(len(bars), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(PAPER_GROUPS) + 0.4 * len(bars)), 3.8))
    for i, (label, split) in enumerate(bars):
        cells = summaries[label]["groups"][split]
        values, lo, hi = [], [], []
        for key, _ in PAPER_GROUPS:
            c = cells.get(key)
            v = 100 * c["value"] if c else np.nan
            values.append(v)
            lo.append(v - 100 * c["lo"] if c and c["lo"] == c["lo"] else 0.0)
            hi.append(100 * c["hi"] - v if c and c["hi"] == c["hi"] else 0.0)
        ax.bar(x - 0.4 + (i + 0.5) * width, values, width, yerr=[lo, hi], capsize=2,
               label=f"{label}: {split}", hatch="" if split == "seen" else "//", alpha=0.9)
    ax.set_xticks(x, [label for _, label in PAPER_GROUPS])
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Reasoning-gym accuracy per group")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
