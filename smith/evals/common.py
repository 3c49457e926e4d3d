"""Shared plumbing for every suite: output directory, resumable JSONL logs, summaries, intervals."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig


def output_dir(cfg: DictConfig) -> Path:
    """`output_dir=PATH` or checkpoints/eval/<suite>-<timestamp>; created, and recorded in cfg."""
    path = cfg.get("output_dir") or f"checkpoints/eval/{cfg.suite.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    return out


class EpisodeLog:
    """Append-only JSONL log keyed by a string id, so an interrupted suite resumes where it stopped.

    Each row is flushed and fsynced as written: a crash loses at most the episode in flight. A torn
    last line (killed mid-write) is ignored on reload.
    """

    def __init__(self, path: str | os.PathLike, key: str = "key") -> None:
        self.path = Path(path)
        self.key = key
        self.rows: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                self.rows[str(row[key])] = row
            # rewrite without any torn line so appends stay valid JSONL
            self._rewrite()

    def _rewrite(self) -> None:
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in self.rows.values()))
        os.replace(tmp, self.path)

    def __contains__(self, key: str) -> bool:
        return str(key) in self.rows

    def add(self, row: dict[str, Any]) -> None:
        self.rows[str(row[self.key])] = row
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def __iter__(self):
        return iter(self.rows.values())

    def __len__(self) -> int:
        return len(self.rows)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Atomic JSON write (write then rename)."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=_jsonable))
    os.replace(tmp, path)


def _jsonable(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def markdown_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], floatfmt: str = ".3f") -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return format(v, floatfmt)
        return "" if v is None else str(v)

    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    return head + "".join("| " + " | ".join(fmt(r.get(c)) for c in columns) + " |\n" for r in rows)


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials; (nan, nan) when n == 0."""
    if n == 0:
        return (float("nan"), float("nan"))
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return (float(ci.low), float(ci.high))


def bootstrap(
    values: Iterable[float] | np.ndarray,
    statistic=np.mean,  # noqa: ANN001
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, float]:
    """Percentile bootstrap over units (e.g. whole rollouts): mean, standard error and interval.

    `values` may be 2-D (units x columns) when `statistic` needs several columns per unit.
    """
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    if len(arr) == 0:
        nan = float("nan")
        return {"value": nan, "se": nan, "lo": nan, "hi": nan}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(arr), size=(n_resamples, len(arr)))
    stats = np.array([statistic(arr[i]) for i in idx])
    alpha = (1 - confidence) / 2
    return {
        "value": float(statistic(arr)),
        "se": float(np.std(stats, ddof=1)),
        "lo": float(np.quantile(stats, alpha)),
        "hi": float(np.quantile(stats, 1 - alpha)),
    }
