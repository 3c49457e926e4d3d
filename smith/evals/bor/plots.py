"""bor's figures: BoR and coverage against the shortlist depth K, one PNG per benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from smith.evals.bor.metric import bor_ceiling

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def bor_figure(rows: list[dict], bench: str) -> Figure:
    """One benchmark: BoR (top) and coverage (bottom) against K for each registry size; fixed-K as lines per
    scorer, agents as markers at their mean depth, the BoR ceiling -log2(K/N) dashed, n (queries) in each
    title, and the legend below the panels inside the canvas."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import StrMethodFormatter

    from smith.evals.bor import AGENTS

    sub = [r for r in rows if r["benchmark"] == bench]
    sizes = sorted({r["N"] for r in sub})
    fig, axes = plt.subplots(2, len(sizes), figsize=(4 * len(sizes), 7), squeeze=False, layout="constrained")
    for col, N in enumerate(sizes):
        ax_b, ax_c = axes[0, col], axes[1, col]
        for i, sname in enumerate(sorted({r["scorer"] for r in sub})):
            color = f"C{i}"
            cell = [r for r in sub if r["N"] == N and r["scorer"] == sname]
            fixed = sorted((r for r in cell if r["policy"].startswith("fixed-")), key=lambda r: r["mean_depth"])
            ks = [r["mean_depth"] for r in fixed]
            style = {"color": color, "ms": 3, "marker": "o", "ls": ("-", "--", "-.", ":")[i % 4]}  # ties stay apart
            ax_b.plot(ks, [r["bor"] for r in fixed], label=f"{sname} fixed-K", **style)
            ax_c.plot(ks, [r["coverage"] for r in fixed], **style)
            for r in (r for r in cell if not r["policy"].startswith("fixed-")):
                mark = dict(zip(AGENTS, "^s*D", strict=True))[r["policy"]]
                ax_b.plot(
                    r["mean_depth"], r["bor"], mark, color=color, ms=9, mec="k", label=f"{sname} {r['policy']}"
                )
                ax_c.plot(r["mean_depth"], r["coverage"], mark, color=color, ms=9, mec="k")
        kk = np.unique(np.clip(np.geomspace(1, N, 50).round().astype(int), 1, N))
        ax_b.plot(kk, [bor_ceiling(N, 1, int(k)) for k in kk], "k--", lw=0.8, label="ceiling -log2(K/N)")
        for ax, label in ((ax_b, "BoR (bits)"), (ax_c, "coverage P_obs")):
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))  # 1, 10 rather than 10^0, 10^1
            ax.set_xlabel("K (shortlist depth)")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        ns = sorted({r["n"] for r in sub if r["N"] == N})
        ax_b.set_title(f"{bench}, N={N}, n={'-'.join(map(str, ns[:: max(1, len(ns) - 1)]))} queries")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 2 * len(sizes)), fontsize=7,
               frameon=False)
    return fig


def write_plots(rows: list[dict], out: Path) -> list[Path]:
    """bor_figure of every benchmark, written to bor_<benchmark>.png."""
    import matplotlib.pyplot as plt

    paths = []
    for bench in sorted({r["benchmark"] for r in rows}):
        fig = bor_figure(rows, bench)
        path = out / f"bor_{bench}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths
