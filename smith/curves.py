"""A training run's `metrics.jsonl` read back and drawn as `curves.png`.

One module because two commands draw the same figure: `train.py` at the end of a run and `smith report`
for any run on disk; the reader keeps the last row per step, so a resumed run's replayed steps count once.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from smith.rewards import AXES

WINDOW = 5  # steps in the moving average of single-series panels

# (panel title, [(metrics.jsonl key, legend label)]): what a user checks at a glance, rewards first.
PANELS: list[tuple[str, list[tuple[str, str]]]] = [
    *[(f"{a} reward", [(f"rewards/{a}/mean", a)]) for a in AXES],
    ("use accuracy", [("use/correct", "correct answer")]),
    ("pool size", [("pool/size", "tools")]),
    ("well-formed share", [("format/ok", "format ok")]),
    ("dropped groups", [("dynamic_sampling/frac_dropped", "zero-variance share")]),
    ("loss", [("loss", "loss")]),
    ("KL to reference", [("kl", "kl")]),
    ("clip ratios", [("clip_ratio/low_mean", "low"), ("clip_ratio/high_mean", "high"),
                     ("clip_ratio/region_mean", "region")]),
    ("completion length (tokens)", [("completions/mean_length", "mean"), ("completions/max_length", "max")]),
    ("truncated completions", [("completions/clipped_ratio", "share clipped")]),
]
# styles that stay distinguishable when two series coincide
STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D")]


def number(v: Any) -> float | None:
    """A finite float, or None for missing, null, NaN or non-numbers."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """Training-step rows (those with a `loss`), the last row per step, in step order. A torn last line of
    a killed run is skipped; TRL's end-of-run summary row has no `loss` and is not a step."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    rows: dict[int, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "loss" in row and number(row.get("step")) is not None:
            rows[int(row["step"])] = row
    return [rows[k] for k in sorted(rows)]


def rolled_out(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps that rolled out a batch (TRL's `reward` is logged then): with `dapo.updates_per_batch` > 1 the
    other steps only update on it and log no rewards."""
    return [r for r in rows if "reward" in r]


ROLES = ("policy", "evaluator", "judge")  # who generates in a SMITH step (smith.models.base.Metered)


def role_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per role and engine, the mean over the steps that rolled out of `tokens/<role>/<engine>` and `time/<role>`,
    with tokens/s and each role's share of the step's generation seconds: where a step's tokens and seconds go."""
    rows = rolled_out(rows)
    found = sorted({(r, k.split("/")[2]) for row in rows for k in row
                    for r in ROLES if k.startswith(f"tokens/{r}/")}, key=lambda x: ROLES.index(x[0]))
    if not rows or not found:
        return []
    out = []
    for role, engine in found:
        tokens = sum(number(x.get(f"tokens/{role}/{engine}")) or 0.0 for x in rows) / len(rows)
        seconds = sum(number(x.get(f"time/{role}")) or 0.0 for x in rows) / len(rows)
        out.append({"role": role, "engine": engine, "tokens": tokens, "seconds": seconds,
                    "tokens/s": tokens / seconds if seconds else None})
    total = sum(r["seconds"] for r in out)
    for r in out:
        r["share"] = r["seconds"] / total if total else None
    return out


def series(rows: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of one metric, where the row has a finite number for it."""
    pts = [(float(r["step"]), v) for r in rows if (v := number(r.get(key))) is not None]
    return [s for s, _ in pts], [v for _, v in pts]


def moving_average(values: list[float], n: int = WINDOW) -> list[float]:
    return [sum(values[max(0, i - n + 1): i + 1]) / len(values[max(0, i - n + 1): i + 1]) for i in range(len(values))]


def plot_curves(rows: list[dict[str, Any]], path: Path, title: str = "") -> Path | None:
    """Every panel with data, four per row. A single series shows per-step points and a moving average; several
    series share a panel with distinct line styles and markers, so identical series stay visible."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    panels = [(t, [(k, lab) for k, lab in keys if series(rows, k)[0]]) for t, keys in PANELS]
    panels = [(t, keys) for t, keys in panels if keys]
    if not panels:
        return None
    cols = 4
    n_rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(n_rows, cols, figsize=(3.6 * cols, 2.7 * n_rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for ax, (name, keys) in zip(axes.flat, panels, strict=False):
        lo, hi = 0.0, 0.0
        for i, (key, label) in enumerate(keys):
            steps, values = series(rows, key)
            lo, hi = min(lo, *values), max(hi, *values)
            line, marker = STYLES[i % len(STYLES)]
            if len(keys) == 1:
                ax.plot(steps, values, marker="o", ms=2.5, lw=0.8, alpha=0.6, label="per step")
                if len(values) >= WINDOW:
                    ax.plot(steps, moving_average(values), lw=2, label=f"{WINDOW}-step mean")
            else:
                ax.plot(steps, values, ls=line, marker=marker, ms=3.5 - 0.6 * i, lw=1.2, label=label)
        pad = 0.05 * max(hi - lo, 0.1)
        ax.set_ylim(lo - pad, max(hi, lo + 0.1) + pad)  # from 0, so a flat line does not look like noise
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if len(keys) > 1:
            ax.legend(fontsize=7, loc="best")
    first_single = next((ax for ax, (_, keys) in zip(axes.flat, panels, strict=False) if len(keys) == 1), None)
    if first_single is not None:  # the per-step / mean legend, in a free panel when there is one
        handles, labels = first_single.get_legend_handles_labels()
        free = len(panels) < axes.size
        (axes.flat[-1] if free else first_single).legend(handles, labels, fontsize=9 if free else 7,
                                                        loc="center" if free else "best")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
