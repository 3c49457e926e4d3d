"""The paper's Lomekwi figures from a summary: the C/R/E decomposition (Figure 2) and success and build
rate against model size (Figure 1). Models are grouped into families and ordered by size within a
family; Claude sizes are unpublished, so Haiku < Sonnet < Opus is an ordinal rank (section 4.2)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

_CLAUDE = {"haiku": 1, "sonnet": 2, "opus": 3}
_QWEN = re.compile(r"qwen[-_]?(\d+(?:[.-]\d+)?)[-_]?(\d+(?:\.\d+)?)b", re.IGNORECASE)


def classify(model: str) -> tuple[str, float, str]:
    """model name -> (family, size key, short label); unknown models form their own family."""
    low = model.lower()
    for name, rank in _CLAUDE.items():
        if name in low:
            return ("Claude", float(rank), name.capitalize())
    if m := _QWEN.search(model):
        return (f"Qwen{m.group(1).replace('-', '.')}", float(m.group(2)), f"{m.group(2)}B")
    return (model.split(":")[0] if model.startswith("scripted:") else model, 0.0, model.split(":")[-1])


def families(models: dict[str, dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    """family -> [(model, label)] ordered by size within the family."""
    out: dict[str, list[tuple[float, str, str]]] = {}
    for model in models:
        fam, size, label = classify(model)
        out.setdefault(fam, []).append((size, label, model))
    return {f: [(m, lab) for _, lab, m in sorted(v)] for f, v in sorted(out.items())}


def _panel(ax, fam_members: list[tuple[str, str]], models: dict[str, dict[str, Any]], metric: str,  # noqa: ANN001
           color: str) -> None:
    xs, ys, lo, hi = [], [], [], []
    for rank, (model, label) in enumerate(fam_members, start=1):
        v = models[model][metric]
        ci = models[model][f"{metric}_ci"]
        xs.append(rank)
        ys.append(v)
        lo.append(v - ci[0] if not math.isnan(v) else 0)
        hi.append(ci[1] - v if not math.isnan(v) else 0)
        if not math.isnan(v):
            ax.annotate(label, (rank, v), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=8,
                        color=color)
    ax.errorbar(xs, ys, yerr=[lo, hi], capsize=3, color=color, marker="o", lw=2)
    ax.set_xlim(0.5, len(fam_members) + 0.5)
    ax.set_ylim(0, 1.15)  # room for the label of a point at 1
    ax.set_xticks(range(1, len(fam_members) + 1))
    ax.set_xticklabels([lab for _, lab in fam_members], fontsize=8)
    ax.grid(alpha=0.3)


def _grid(models: dict[str, dict[str, Any]], metrics: list[tuple[str, str]], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fams = families(models)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(len(fams), len(metrics), figsize=(3.2 * len(metrics), 2.7 * len(fams)), squeeze=False,
                             constrained_layout=True)
    for i, (fam, members) in enumerate(fams.items()):
        for j, (metric, name) in enumerate(metrics):
            ax = axes[i][j]
            _panel(ax, members, models, metric, colors[i % len(colors)])
            if i == 0:
                ax.set_title(name, fontweight="bold")
            if j == 0:
                ax.set_ylabel(f"{fam}\nprobability")
            if i == len(fams) - 1:
                ax.set_xlabel("model size (ordinal)")
    fig.suptitle(title + " (95% Wilson intervals)")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_decomposition(models: dict[str, dict[str, Any]], path: str | Path) -> Path:
    """Curiosity, recognition, efficiency per model, one row per family (the paper's Figure 2)."""
    return _grid(models, [("C", "Curiosity C"), ("R", "Recognition R"), ("E", "Efficiency E")], Path(path),
                 "Lomekwi decomposition")


def plot_build_rate(models: dict[str, dict[str, Any]], path: str | Path) -> Path:
    """Overall success and build rate against model size, one row per family (the paper's Figure 1)."""
    return _grid(models, [("S", "P(win) overall"), ("build_rate", "P(build) overall")], Path(path),
                 "Lomekwi success and build rate vs model size")


def plot_deep(models: dict[str, dict[str, Any]], path: str | Path) -> Path:
    """Deep Lomekwi's figure: curiosity, the two recognition steps, efficiency and solve rate per model, one
    row per family (the released figure's five panels, laid out in one row)."""
    return _grid(models, [("C", "Curiosity C"), ("R1", "Recognition step 1 R1"), ("R2", "Recognition step 2 R2"),
                          ("E", "Efficiency E"), ("S", "Solve rate")], Path(path), "Deep Lomekwi")
