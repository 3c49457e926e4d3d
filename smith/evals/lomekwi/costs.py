"""Expected action costs of the two Lomekwi paths and the build-vs-grind threshold (Appendix B).

Grind: the coupon collector over the n keys plus n opens, E[grind] = n H_n + n.
Build, done in three sequential steps (an upper bound on optimal play): collect the T shard types
(T H_T examines), search the C(T,2) pairs ((C(T,2) + 1) / 2 combines on average), then open every door
with at most two actions each (2n). Building is optimal where E[build] < E[grind].
"""

from __future__ import annotations

from fractions import Fraction
from math import comb
from pathlib import Path

import numpy as np


def harmonic(n: int) -> float:
    """H_n = 1 + 1/2 + ... + 1/n."""
    return sum(1.0 / k for k in range(1, n + 1))


def expected_grind(n: int) -> float:
    """E[grind] = n H_n + n (Appendix B)."""
    return n * harmonic(n) + n


def expected_collect(n_types: int) -> float:
    """E[collect] = T H_T examines until every shard type has dropped."""
    return n_types * harmonic(n_types)


def expected_combine(n_types: int) -> float:
    """E[combine] = (C(T,2) + 1) / 2 tries to hit the one recipe pair among C(T,2)."""
    return (comb(n_types, 2) + 1) / 2


def expected_open(n: int) -> float:
    """E[open] <= 2n: machine then key on every door, ignoring keys already dropped."""
    return 2.0 * n


def expected_build(n: int, n_types: int) -> float:
    """E[build] = E[collect] + E[combine] + E[open]."""
    return expected_collect(n_types) + expected_combine(n_types) + expected_open(n)


def build_preferred(n: int, n_types: int) -> bool:
    """The optimal policy's choice: build iff E[build] < E[grind] (section 5.1)."""
    return expected_build(n, n_types) < expected_grind(n)


def p_collect_all(k: int, draws: int) -> float:
    """P(all k coupons seen within `draws` uniform draws) = sum_j (-1)^j C(k,j) ((k-j)/k)^draws.

    Appendix B: k = 10 keys in 37 draws ~ 0.809; k = 4 shards in 21 draws ~ 0.991.
    """
    return float(sum((-1) ** j * comb(k, j) * Fraction(k - j, k) ** draws for j in range(k + 1)))  # exact, then float


def threshold_map(n_values: list[int], t_values: list[int]) -> np.ndarray:
    """Boolean grid [len(n_values), len(t_values)]: True where building is cheaper in expectation."""
    return np.array([[build_preferred(n, t) for t in t_values] for n in n_values], dtype=bool)


def plot_threshold_map(path: str | Path, n_values: list[int] | None = None, t_values: list[int] | None = None,
                       box: tuple[list[int], list[int]] | None = ([9, 10, 11], [2, 3, 4])) -> Path:
    """The Appendix B figure: green where E[build] < E[grind], grey elsewhere, the swept cells boxed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch, Rectangle

    n_values = n_values or list(range(1, 31))
    t_values = t_values or list(range(2, 16))
    grid = threshold_map(n_values, t_values)
    fig, ax = plt.subplots(figsize=(6.4, 6.4))
    ax.pcolormesh(t_values, n_values, grid.astype(int), cmap=ListedColormap(["0.75", "#2ca02c"]), vmin=0, vmax=1,
                  shading="nearest")
    ax.set_xlabel("shard types T")
    ax.set_ylabel("number of doors n")
    ax.set_xticks(t_values[::2])
    ax.set_xticks(np.array(t_values) - 0.5, minor=True)
    ax.set_yticks(np.array(n_values) - 0.5, minor=True)
    ax.grid(which="minor", color="black", linewidth=0.4, alpha=0.4)
    ax.tick_params(which="minor", length=0)
    if box:
        ns, ts = box
        ax.add_patch(Rectangle((min(ts) - 0.5, min(ns) - 0.5), len(ts), len(ns), fill=False, edgecolor="red",
                               linewidth=2.5, zorder=5))
    ax.legend(handles=[Patch(color="#2ca02c", label="E[build] < E[grind]"), Patch(color="0.75", label="grind")],
              loc="lower right")
    ax.set_title("Lomekwi: build vs grind (Appendix B)")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
