"""What a training run shows a person: one line per step, a before -> after summary, `curves.png`.

TRL's own per-step dict (about 50 keys) still goes to `metrics.jsonl`; the console gets the few numbers
that say whether SMITH is learning: the reward axes, use accuracy, pool size, dropped groups, time.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from smith.config import TrainConfig, as_plain
from smith.curves import number, plot_curves, read_metrics, rolled_out
from smith.rewards import AXES

# (metrics.jsonl key, console label); curves.png draws these and more (smith/curves.py)
COLUMNS = [(f"rewards/{a}/mean", a[:4]) for a in AXES] + [
    ("use/correct", "use_acc"),
    ("pool/size", "pool"),
    ("dynamic_sampling/frac_dropped", "dropped"),
]
WINDOW = 5  # steps averaged for "first" and "last" in the summary


def step_line(row: dict[str, Any], max_steps: int, seconds: float) -> str:
    parts = [f"step {row['step']:>3}/{max_steps}"]
    for key, label in COLUMNS:
        v = number(row.get(key))
        parts.append(f"{label} {'-' if v is None else (f'{v:.0f}' if key == 'pool/size' else f'{v:.2f}')}")
    return "  ".join(parts) + f"  {seconds:.1f}s"


def window_means(rows: list[dict[str, Any]], key: str, first: bool, n: int = WINDOW) -> float | None:
    values = [v for r in rows if (v := number(r.get(key))) is not None]
    picked = values[:n] if first else values[-n:]
    return sum(picked) / len(picked) if picked else None


def summary(rows: list[dict[str, Any]]) -> str:
    """Per axis: mean over the first and the last `WINDOW` steps that rolled out a batch."""
    rows = rolled_out(rows)
    n = min(WINDOW, max(len(rows) // 2, 1))
    lines = [f"before -> after (mean of the first and last {n} steps):"]
    for key, label in COLUMNS:
        a, b = window_means(rows, key, True, n), window_means(rows, key, False, n)
        if a is not None and b is not None:
            lines.append(f"  {label:<8} {a:6.2f} -> {b:6.2f}  ({b - a:+.2f})")
    return "\n".join(lines)


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


LEARNING_KEYS = ("rewards/evaluation/mean", "rewards/use/mean")  # what the build and use halves earn


def learning_score(row: dict[str, Any], keys: tuple[str, ...] = LEARNING_KEYS) -> float:
    """Evaluation + use reward of one step (an axis not logged that step counts 0)."""
    return sum(number(row.get(k)) or 0.0 for k in keys)


def learning_gain(rows: list[dict[str, Any]], n: int = WINDOW) -> float:
    """Mean learning score of the last `n` steps minus that of the first `n` (steps that rolled out a batch)."""
    scores = [learning_score(r) for r in rolled_out(rows)]
    return sum(scores[-n:]) / n - sum(scores[:n]) / n


def paired_gap(rows: list[dict[str, Any]], control: list[dict[str, Any]], n: int = WINDOW,
               keys: tuple[str, ...] = LEARNING_KEYS) -> float:
    """Mean over the last `n` steps of (run - control) learning score (the sum of `keys`), step by step (same task
    stream)."""
    a = {r["step"]: learning_score(r, keys) for r in rolled_out(rows)}
    b = {r["step"]: learning_score(r, keys) for r in rolled_out(control)}
    steps = sorted(set(a) & set(b))[-n:]
    return sum(a[s] - b[s] for s in steps) / len(steps)


def late_drop(values: list[float], n: int = WINDOW) -> float:
    """The best mean of `n` consecutive values minus the mean of the last `n`: how far a run's reward fell from its
    best window by the end (issue 42's collapse check on the use reward)."""
    windows = [sum(values[i:i + n]) / n for i in range(max(len(values) - n + 1, 1))]
    return max(windows) - windows[-1]


def use_drop(rows: list[dict[str, Any]]) -> float:
    """`late_drop` of the use reward over the steps that rolled out a batch."""
    return late_drop([number(r.get("rewards/use/mean")) or 0.0 for r in rolled_out(rows)])


class WandbConfig(TrainerCallback):
    """smith's whole config in the wandb run's config (TRL's WandbCallback, which runs first, sends only
    GRPOConfig's), under the key `smith`."""

    def __init__(self, conf: TrainConfig) -> None:
        self.config = as_plain(conf)

    def on_train_begin(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        if "wandb" not in (args.report_to or []) or not state.is_world_process_zero:
            return
        import wandb

        if wandb.run is not None:
            wandb.run.config.update({"smith": self.config}, allow_val_change=True)
