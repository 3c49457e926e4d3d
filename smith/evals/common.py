"""Shared plumbing for every suite: the checks of eval.py's arguments, output directory, resumable JSONL
logs, summaries, intervals."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, open_dict

from smith.errors import ConfigError, writable_dir

SUITE_MARK = ".smith-suite"  # names the suite whose results a directory holds


def check_inputs(cfg: DictConfig, specs: Sequence[tuple[str, str]]) -> Path:
    """The checks every suite shares, before any model loads: `limit`, the model SPECs the suite will load
    (`(setting, spec)` pairs, from its `check`), and the output directory (created). Returns that directory."""
    from smith.models import check_spec

    limit = cfg.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"limit={limit} must be a positive integer (or null for no limit)")
    for what, spec in specs:
        check_spec(spec, cfg, what)
    return output_dir(cfg)


def output_dir(cfg: DictConfig) -> Path:
    """`output_dir=PATH` or checkpoints/eval/<suite>-<timestamp>: created, checked to be writable and not to
    hold another suite's results (mixed logs break resuming), and recorded in cfg so later calls agree."""
    suite = str(cfg.suite.name)
    path = cfg.get("output_dir") or f"checkpoints/eval/{suite}-{time.strftime('%Y%m%d-%H%M%S')}"
    out = writable_dir(path, "output_dir")
    owner = suite_of(out)
    if owner not in (None, suite):
        raise ConfigError(f"output_dir={out} holds results of suite {owner}; pick another output_dir for suite "
                          f"{suite}")
    (out / SUITE_MARK).write_text(suite + "\n")
    with open_dict(cfg):
        cfg.output_dir = str(out)
    return out


def suite_of(out: Path) -> str | None:
    """The suite whose results `out` holds: its mark, else (a directory written before marks) the `suite` of
    its summary.json; None for a fresh directory."""
    if (out / SUITE_MARK).is_file():
        return (out / SUITE_MARK).read_text().strip() or None
    try:
        summary = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    return str(summary["suite"]) if isinstance(summary, dict) and summary.get("suite") else None


def check_pool(path: str, what: str) -> None:
    """A tool pool setting that names no pool, or a pool that does not load, fails here in one line."""
    from smith.pool import ToolPool

    try:
        ToolPool.load(path)
    except FileNotFoundError as e:
        raise ConfigError(f"{what}={path}: {e}") from None


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
                if not isinstance(row, dict) or key not in row:
                    raise ConfigError(f"{self.path} holds rows without '{key}' (another suite's log?); pick "
                                      "another output_dir")
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
