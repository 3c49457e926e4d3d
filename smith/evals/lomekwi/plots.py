"""The paper's Lomekwi figures from a summary: the C/R/E decomposition (Figure 2) and success and build
rate against model size (Figure 1). Models are grouped into families and ordered by size within a
family; Claude sizes are unpublished, so Haiku < Sonnet < Opus is an ordinal rank (section 4.2). Scripted
agents and models of no known family are no size series: they share one row of unconnected markers."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .metrics import Counts

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_CLAUDE = {"haiku": 1, "sonnet": 2, "opus": 3}
_QWEN = re.compile(r"qwen[-_]?(\d+(?:[.-]\d+)?)[-_]?(\d+(?:\.\d+)?)b", re.IGNORECASE)
_MARKERS = "osD^vP*Xh"
OTHER = "other agents"  # the row of models that are not ordered by size


def classify(model: str) -> tuple[str, float, str]:
    """model name -> (family, size key, short label); unknown models form their own family (size key 0)."""
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


def rows(models: dict[str, dict[str, Any]]) -> list[tuple[str, list[tuple[str, str]], bool]]:
    """The figure's rows, (name, [(model, label)], is a size series): one per family with a size order, then
    one row of every other model (scripted agents, unknown models), which must not be joined by lines."""
    sized, other = [], []
    for fam, members in families(models).items():
        if classify(members[0][0])[1] > 0:
            sized.append((fam, members, True))
        else:
            other += [(m, lab if m.startswith("scripted:") else m.rstrip("/").split("/")[-1]) for m, lab in members]
    return sized + ([(OTHER if any(not m.startswith("scripted:") for m, _ in other) else "scripted agents", other,
                      False)] if other else [])


def trials(summary: dict[str, Any], metric: str) -> int:
    """The episodes a metric is a fraction of (R is conditional on holding, E on building, R1/R2 on their
    deep-world steps), so each tick can say how much evidence its point rests on."""
    if metric in summary.get("step_counts", {}):
        return int(summary["step_counts"][metric][1])
    return Counts(**summary["counts"]).fractions()[metric][1]


def _panel(ax, members: list[tuple[str, str]], models: dict[str, dict[str, Any]], metric: str,  # noqa: ANN001
           color: str, sized: bool) -> None:
    import matplotlib.pyplot as plt

    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    points = []
    for rank, (model, _) in enumerate(members, start=1):
        v, (lo, hi) = models[model][metric], models[model][f"{metric}_ci"]
        points.append((rank, v, 0.0 if math.isnan(v) else v - lo, 0.0 if math.isnan(v) else hi - v))
    if sized:  # one family ordered by size: a line through its points
        xs, ys, lo, hi = zip(*points, strict=True)
        ax.errorbar(xs, ys, yerr=[lo, hi], capsize=3, color=color, marker="o", lw=2)
    else:  # unrelated agents: each its own marker and colour, nothing joining them
        for i, (x, y, lo, hi) in enumerate(points):
            ax.errorbar([x], [y], yerr=[[lo], [hi]], capsize=3, color=cycle[i % len(cycle)],
                        marker=_MARKERS[i % len(_MARKERS)], ms=7, ls="none")
    ax.set_xlim(0.5, len(members) + 0.5)
    ax.set_ylim(-0.05, 1.05)  # markers at 0 and 1 stay whole
    ax.set_xticks(range(1, len(members) + 1))
    ax.set_xticklabels([f"{lab}\nn={trials(models[m], metric)}" for m, lab in members], fontsize=7)
    ax.grid(alpha=0.3)


def figure(models: dict[str, dict[str, Any]], metrics: list[tuple[str, str]], title: str) -> Figure:
    """One panel per (row, metric); rows from `rows`. Returned unsaved so tests can inspect its artists."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layout = rows(models)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(len(layout), len(metrics), figsize=(3.2 * len(metrics), 2.9 * len(layout)),
                             squeeze=False, constrained_layout=True)
    for i, (name, members, sized) in enumerate(layout):
        for j, (metric, label) in enumerate(metrics):
            ax = axes[i][j]
            _panel(ax, members, models, metric, colors[i % len(colors)], sized)
            if i == 0:
                ax.set_title(label, fontweight="bold")
            if j == 0:
                ax.set_ylabel(f"{name}\nprobability")
            if not sized:
                ax.set_xlabel("agent (no size order)")
            elif i == len(layout) - 1 or not layout[i + 1][2]:
                ax.set_xlabel("model size (ordinal)")
    fig.suptitle(f"{title}\n95% Wilson intervals; n = episodes behind each point", fontsize=10)
    return fig


def _grid(models: dict[str, dict[str, Any]], metrics: list[tuple[str, str]], path: Path, title: str) -> Path:
    import matplotlib.pyplot as plt

    fig = figure(models, metrics, title)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


DECOMPOSITION = [("C", "Curiosity C"), ("R", "Recognition R"), ("E", "Efficiency E")]
BUILD_RATE = [("S", "P(win) overall"), ("build_rate", "P(build) overall")]
DEEP = [("C", "Curiosity C"), ("R1", "Recognition step 1 R1"), ("R2", "Recognition step 2 R2"),
        ("E", "Efficiency E"), ("S", "Solve rate")]


def plot_decomposition(models: dict[str, dict[str, Any]], path: str | Path) -> Path:
    """Curiosity, recognition, efficiency per model, one row per family (the paper's Figure 2)."""
    return _grid(models, DECOMPOSITION, Path(path), "Lomekwi decomposition")


def plot_build_rate(models: dict[str, dict[str, Any]], path: str | Path) -> Path:
    """Overall success and build rate against model size, one row per family (the paper's Figure 1)."""
    return _grid(models, BUILD_RATE, Path(path), "Lomekwi success and build rate vs model size")


def plot_deep(models: dict[str, dict[str, Any]], path: str | Path) -> Path:
    """Deep Lomekwi's figure: curiosity, the two recognition steps, efficiency and solve rate per model, one
    row per family (the released figure's five panels, laid out in one row)."""
    return _grid(models, DEEP, Path(path), "Deep Lomekwi")
