"""What a training run shows a person: one line per step, a before -> after summary, `curves.png`.

TRL's own per-step dict (about 50 keys) still goes to `metrics.jsonl`; the console gets the few numbers
that say whether SMITH is learning: the four reward axes, use accuracy, pool size, dropped groups, time.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from smith.rollout.episodes import AXES

# (metrics.jsonl key, console label, curves.png panel title)
COLUMNS = [(f"rewards/{a}/mean", a[:4], f"{a} reward") for a in AXES] + [
    ("use/correct", "use_acc", "use accuracy"),
    ("pool/size", "pool", "pool size"),
    ("dynamic_sampling/frac_dropped", "dropped", "dropped groups"),
]
WINDOW = 5  # steps averaged for "first" and "last" in the summary


def _num(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def step_line(row: dict[str, Any], max_steps: int, seconds: float) -> str:
    parts = [f"step {row['step']:>3}/{max_steps}"]
    for key, label, _ in COLUMNS:
        v = _num(row.get(key))
        parts.append(f"{label} {'-' if v is None else (f'{v:.0f}' if key == 'pool/size' else f'{v:.2f}')}")
    return "  ".join(parts) + f"  {seconds:.1f}s"


def window_means(rows: list[dict[str, Any]], key: str, first: bool, n: int = WINDOW) -> float | None:
    values = [v for r in rows if (v := _num(r.get(key))) is not None]
    picked = values[:n] if first else values[-n:]
    return sum(picked) / len(picked) if picked else None


def summary(rows: list[dict[str, Any]]) -> str:
    """Per axis: mean over the first and the last `WINDOW` logged steps."""
    n = min(WINDOW, max(len(rows) // 2, 1))
    lines = [f"before -> after (mean of the first and last {n} steps):"]
    for key, label, _ in COLUMNS:
        a, b = window_means(rows, key, True, n), window_means(rows, key, False, n)
        if a is not None and b is not None:
            lines.append(f"  {label:<8} {a:6.2f} -> {b:6.2f}  ({b - a:+.2f})")
    return "\n".join(lines)


def plot_curves(rows: list[dict[str, Any]], path: Path, title: str = "") -> Path:
    """One panel per column: the per-step value and a 5-step moving average."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    cols = 4
    panels = [c for c in COLUMNS if any(_num(r.get(c[0])) is not None for r in rows)]
    n_rows = max(1, math.ceil(len(panels) / cols))
    fig, axes = plt.subplots(n_rows, cols, figsize=(3.4 * cols, 2.7 * n_rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for ax, (key, _, name) in zip(axes.flat, panels, strict=False):
        pts = [(r["step"], v) for r in rows if (v := _num(r.get(key))) is not None]
        steps, values = [p[0] for p in pts], [p[1] for p in pts]
        ax.plot(steps, values, marker="o", ms=2.5, lw=0.8, alpha=0.6, label="per step")
        if len(values) >= WINDOW:
            avg = [sum(values[max(0, i - WINDOW + 1): i + 1]) / len(values[max(0, i - WINDOW + 1): i + 1])
                   for i in range(len(values))]
            ax.plot(steps, avg, lw=2, label=f"{WINDOW}-step mean")
        lo, hi = min(0.0, *values), max(values)
        pad = 0.05 * max(hi - lo, 0.1)
        ax.set_ylim(lo - pad, max(hi, lo + 0.1) + pad)  # from 0, so a flat line does not look like noise
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if panels:  # the legend goes into a free panel when there is one, so it hides no data
        handles, labels = axes.flat[0].get_legend_handles_labels()
        free = len(panels) < axes.size
        (axes.flat[-1] if free else axes.flat[0]).legend(handles, labels, fontsize=9 if free else 7,
                                                         loc="center" if free else "best")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


class ConsoleCallback(TrainerCallback):
    """Prints `step_line` on rank 0 for every logged training step, and the summary and plot at the end."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._t = time.perf_counter()

    def on_step_begin(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        self._t = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kw):  # noqa: ANN001, ANN201
        if not state.is_world_process_zero or not logs or "loss" not in logs:
            return
        row = {"step": state.global_step, **logs}
        print(step_line(row, state.max_steps, time.perf_counter() - self._t), flush=True)

    def on_train_end(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        """The whole run's rows (a resumed run's earlier steps too) from metrics.jsonl."""
        if not state.is_world_process_zero:
            return
        rows = read_metrics(self.run_dir)
        if rows:
            print(summary(rows))
            print(f"curves: {plot_curves(rows, self.run_dir / 'curves.png', self.run_dir.name)}")


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """Training-step rows of `metrics.jsonl`, the last row per step (a resume may repeat a step)."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    rows = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "loss" in row:
            rows[row["step"]] = row
    return [rows[k] for k in sorted(rows)]


LEARNING_KEYS = ("rewards/evaluation/mean", "rewards/use/mean")  # what the build and use halves earn


def learning_score(row: dict[str, Any], keys: tuple[str, ...] = LEARNING_KEYS) -> float:
    """Evaluation + use reward of one step (an axis not logged that step counts 0)."""
    return sum(_num(row.get(k)) or 0.0 for k in keys)


def learning_gain(rows: list[dict[str, Any]], n: int = WINDOW) -> float:
    """Mean learning score of the last `n` steps minus that of the first `n`."""
    scores = [learning_score(r) for r in rows]
    return sum(scores[-n:]) / n - sum(scores[:n]) / n


def paired_gap(rows: list[dict[str, Any]], control: list[dict[str, Any]], n: int = WINDOW) -> float:
    """Mean over the last `n` steps of (run - control) learning score, step by step (same task stream)."""
    a = {r["step"]: learning_score(r) for r in rows}
    b = {r["step"]: learning_score(r) for r in control}
    steps = sorted(set(a) & set(b))[-n:]
    return sum(a[s] - b[s] for s in steps) / len(steps)
