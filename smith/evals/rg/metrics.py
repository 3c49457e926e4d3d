"""Accuracy per category, per group and macro-averaged, with stratified bootstrap intervals.

SMITH paper, "Main results on Reasoning-Gym": the unseen columns are groups (Logic, Game, Algebra, Arith,
Algo) and "Avg" is the mean of the five group accuracies (e.g. Standard CoT: mean(49.9, 60.3, 56.8, 62.7,
48.6) = 55.7). A group's accuracy is the mean of its categories' accuracies, so every category weighs the
same whatever its item count. "Seen Avg" is computed the same way over the seen categories.

Intervals: a stratified percentile bootstrap -- each category's items are resampled within the category,
so resamples keep the design (n items per category) and a one-item category still has an interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from smith.evals.common import io_tokens

# the paper's column order and labels; keys are smith.tasks.GROUPS
PAPER_GROUPS = (("Logic", "Logic"), ("Games", "Game"), ("Algebra", "Algebra"), ("Arithmetic", "Arith"),
                ("Algorithms", "Algo"))
SPLITS = ("seen", "unseen")


def bootstrap_matrix(samples: Sequence[Sequence[float]], n_resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """Resampled per-category means, shape (n_resamples, n_categories); each column resamples its own items."""
    rng = np.random.default_rng(seed)
    cols = []
    for values in samples:
        arr = np.asarray(values, dtype=float)
        if arr.size == 0:
            cols.append(np.full(n_resamples, np.nan))
            continue
        idx = rng.integers(0, arr.size, size=(n_resamples, arr.size))
        cols.append(arr[idx].mean(axis=1))
    return np.stack(cols, axis=1) if cols else np.empty((n_resamples, 0))


def interval(point: float, resampled: np.ndarray, confidence: float = 0.95) -> dict[str, float]:
    """Point estimate with the bootstrap standard error and percentile interval of its resamples."""
    resampled = resampled[~np.isnan(resampled)]
    if resampled.size == 0:
        nan = float("nan")
        return {"value": float(point), "se": nan, "lo": nan, "hi": nan}
    alpha = (1 - confidence) / 2
    return {
        "value": float(point),
        "se": float(resampled.std(ddof=1)) if resampled.size > 1 else 0.0,
        "lo": float(np.quantile(resampled, alpha)),
        "hi": float(np.quantile(resampled, 1 - alpha)),
    }


def accuracy_table(
    correct: Mapping[str, Sequence[float]],
    groups: Mapping[str, str],
    splits: Mapping[str, str],
    n_resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Per-category, per-(split, group) and per-split macro accuracy with intervals.

    `correct[category]` is the list of 0/1 outcomes of its items; `groups` and `splits` map a category to its
    group and split. Categories without items are left out of every average.
    """
    cats = [c for c in correct if len(correct[c]) > 0]
    boot = bootstrap_matrix([correct[c] for c in cats], n_resamples, seed)
    point = np.array([float(np.mean(correct[c])) for c in cats])
    col = {c: i for i, c in enumerate(cats)}
    out: dict[str, Any] = {"categories": {}, "groups": {}, "macro": {}}
    for c in cats:
        out["categories"][c] = {"group": groups[c], "split": splits[c], "n": len(correct[c]),
                                "correct": round(float(np.sum(correct[c]))), **interval(point[col[c]], boot[:, col[c]])}
    for split in SPLITS:
        by_group: dict[str, list[int]] = {}
        for c in cats:
            if splits[c] == split:
                by_group.setdefault(groups[c], []).append(col[c])
        if not by_group:
            continue
        group_point = {g: float(point[ix].mean()) for g, ix in by_group.items()}
        group_boot = {g: boot[:, ix].mean(axis=1) for g, ix in by_group.items()}
        out["groups"][split] = {
            g: {"n_categories": len(by_group[g]), **interval(group_point[g], group_boot[g])} for g in sorted(by_group)
        }
        macro_point = float(np.mean(list(group_point.values())))
        macro_boot = np.mean(np.stack(list(group_boot.values()), axis=1), axis=1)
        out["macro"][split] = {"n_groups": len(by_group), "n_categories": sum(map(len, by_group.values())),
                               **interval(macro_point, macro_boot)}
    return out


def paper_row(summary: Mapping[str, Any]) -> dict[str, Any]:
    """One row of the paper's main table from the metrics of an rg summary (results schema): Seen Avg, unseen
    groups, unseen Avg (percent, "value±se" with the bootstrap standard error) and mean input / output tokens
    per question."""
    metrics = summary.get("metrics", {})

    def pct(cell: Mapping[str, Any] | None) -> str | None:
        if cell is None or cell.get("value") is None:
            return None
        se = cell.get("se")
        value = 100.0 * float(cell["value"])
        return f"{value:.1f}" if se is None else f"{value:.1f}±{100.0 * float(se):.1f}"

    row: dict[str, Any] = {"Seen Avg": pct(metrics.get("seen/avg"))}
    for key, label in PAPER_GROUPS:
        row[label] = pct(metrics.get(f"unseen/{key}"))
    row["Avg"] = pct(metrics.get("unseen/avg"))
    row["I/O tokens"] = io_tokens(metrics)
    return row


PAPER_COLUMNS = ("Seen Avg", *(label for _, label in PAPER_GROUPS), "Avg", "I/O tokens")
