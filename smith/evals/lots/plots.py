"""The LOTS suite's figures: accuracy vs a fixed budget K (Figure 9), accuracy vs registry size (Figure 21)
and accuracy over streamed space updates (Figure 4). Methods often tie (a small run puts several at the
same accuracy), so every series has its own marker and line style and is shifted sideways by a few points:
tied series stay side by side instead of hiding each other. Titles say n, the evaluation requests behind
each point."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MARKERS = "osD^vP*X"
LINESTYLES = ("-", "--", "-.", ":")


def _series(ax: Axes, xs: list[float], ys: list[float], i: int, k: int, label: str) -> None:
    """Series i of k: its own marker and line style, shifted (i - (k-1)/2) * 5 points sideways (after
    autoscaling, which an offset transform would throw off)."""
    from matplotlib.transforms import offset_copy

    (line,) = ax.plot(xs, ys, marker=MARKERS[i % len(MARKERS)], ls=LINESTYLES[i % len(LINESTYLES)], ms=6,
                      mfc="none", mew=1.5, label=label)
    line.set_transform(offset_copy(ax.transData, fig=ax.figure, x=5 * (i - (k - 1) / 2), units="points"))


def _finish(ax: Axes, xs: list[float], title: str, xlabel: str, legend_cols: int = 1) -> None:
    ax.set_xticks(xs, [f"{x:g}" for x in xs])
    ax.set_ylim(-4, 104)  # markers at 0 and 100 stay whole
    ax.set(xlabel=xlabel, ylabel="accuracy (%)")
    ax.set_title(title, fontsize=9)
    ax.margins(x=0.08)
    ax.grid(alpha=0.3)
    ax.figure.legend(fontsize=7, loc="outside right upper", ncols=legend_cols)


def _figure() -> tuple[Figure, Axes]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(6.2, 3.6), layout="constrained")


def fixed_k_figure(fixed: dict[str, dict[int, float]], keep_all: float | None, n: str) -> Figure:
    """Figure 9: every ranking at the same K per family, Keep all as a reference line."""
    fig, ax = _figure()
    curves = {m: {int(k): v for k, v in curve.items()} for m, curve in fixed.items()}  # JSON keys are strings
    ks = sorted({k for curve in curves.values() for k in curve})
    for i, (m, curve) in enumerate(curves.items()):
        _series(ax, ks, [100 * curve[k] for k in ks], i, len(curves), m)
    if keep_all is not None:
        ax.axhline(100 * keep_all, ls=":", c="k", label="keep all")
    _finish(ax, ks, f"TGB: accuracy vs K\n{n}", "budget K (tools per family)")
    return fig


def stream_figure(stream: dict[str, dict[str, Any]], n: str) -> Figure:
    """Figure 4: accuracy of each family's space after every streamed update."""
    fig, ax = _figure()
    rounds = list(range(1, 1 + max(len(st["accuracy"]) for st in stream.values())))
    for i, (f, st) in enumerate(stream.items()):
        _series(ax, rounds[: len(st["accuracy"])], [100 * a for a in st["accuracy"]], i, len(stream), f)
    _finish(ax, rounds, f"TGB: space updates under a serving cap\n{n}", "update (batch)")
    return fig


def registry_figure(scaling: dict[int, dict[str, float]], n: str) -> Figure:
    """Figure 21: Keep all against LOTS spaces as distractors grow the registry (log2 x, ticks at the sizes)."""
    fig, ax = _figure()
    by_size = {int(s): v for s, v in scaling.items()}
    sizes = sorted(by_size)
    ax.set_xscale("log", base=2)
    for i, (key, label) in enumerate((("keep_all", "keep all"), ("lots", "LOTS space"))):
        _series(ax, sizes, [100 * by_size[s][key] for s in sizes], i, 2, label)
    ax.minorticks_off()
    _finish(ax, sizes, f"TGB: accuracy vs registry size\n{n}", "registry size (tools)")
    return fig


def write(out: Path, results: dict, fixed: dict, scaling: dict, stream: dict, n: dict[str, str]) -> list[Path]:
    """The figures whose experiment ran; `n` says, per figure ("fixed", "stream", "scaling"), what each point
    averages over."""
    import matplotlib.pyplot as plt

    figures = {"accuracy_vs_k.png": (fixed, lambda: fixed_k_figure(
                   fixed, results["keep_all"]["accuracy"] if "keep_all" in results else None, n["fixed"])),
               "stream_updates.png": (stream, lambda: stream_figure(stream, n["stream"])),
               "accuracy_vs_registry.png": (scaling, lambda: registry_figure(scaling, n["scaling"]))}
    paths = []
    for name, (data, draw) in figures.items():
        if data:
            fig = draw()
            fig.savefig(out / name, dpi=120)
            plt.close(fig)
            paths.append(out / name)
    return paths
