"""The SMITH tool pool: tools with r_eval > 0 are admitted under their category and feed use tasks.

Paper, "Use-task correctness": "Any tool with r_eval > 0 is pushed into a shared Tool Pool for reuse by
future use-task rollouts." Reference code: at most 20 tools per category, lowest quality evicted.
"""

from __future__ import annotations

import ast
import copy
import json
import math
import os
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smith.config import PoolConfig
from smith.errors import ConfigError
from smith.toolspec import ToolSpec, schema_error

POOL_FILE = "tool_pool.json"
FORMAT_VERSION = 1


def function_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The function part of an OpenAI tool schema, whether given wrapped ({"type": "function", ...}) or bare."""
    return schema.get("function", schema) if isinstance(schema, dict) else {}


def normalise_code(code: str) -> str:
    """Code identity for de-duplication: the AST (formatting, comments and docstrings do not count)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return " ".join(code.split())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False)


@dataclass
class PoolEntry:
    """A pooled tool: the `ToolSpec` a build episode produced, the category it was admitted under, and the
    rewards that order it. In the pool file an entry is one flat row (`to_row`, `from_row`)."""

    category: str
    tool: ToolSpec
    r_eval: float
    r_judge: float | None = None
    step: int = 0
    source_run: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def quality(self) -> tuple[float, float, int]:
        """Eviction order: evaluation reward first, judge second, newer wins ties."""
        return (self.r_eval, self.r_judge if self.r_judge is not None else 0.0, self.step)

    def document(self) -> str:
        """Text a retriever indexes: name, description and parameter descriptions."""
        params = self.tool.parameters.get("properties", {})
        parts = [self.tool.function_name, self.tool.description]
        parts += [f"{k}: {v.get('description', '')}" for k, v in params.items() if isinstance(v, dict)]
        return " ".join(p for p in parts if p)

    def to_row(self) -> dict[str, Any]:
        """The entry as the pool file writes it (fields in `_ENTRY` order; schema and meta copied)."""
        return {"category": self.category, "code": self.tool.code, "schema": copy.deepcopy(self.tool.schema),
                "function_name": self.tool.function_name, "r_eval": self.r_eval, "r_judge": self.r_judge,
                "step": self.step, "source_run": self.source_run, "meta": copy.deepcopy(self.meta)}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PoolEntry:
        """A pool-file row (checked by `_check_pool_file`); a wrapped schema is stored unwrapped."""
        tool = ToolSpec(row["code"], function_schema(row["schema"]), row["function_name"])
        rest = {k: row[k] for k in ("r_judge", "step", "source_run", "meta") if k in row}
        return cls(row["category"], tool, row["r_eval"], **rest)


class PoolFileError(ConfigError):
    """A pool file that cannot be read; never silently treated as an empty pool (a ConfigError: the user named
    the file, so train.py, eval.py and smith report it in one line)."""


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


# entry field -> (check, what it must be)
_ENTRY = {
    "category": (lambda x: isinstance(x, str) and x, "a non-empty string"),
    "code": (lambda x: isinstance(x, str), "a string"),
    "schema": (lambda x: isinstance(x, dict), "an object"),
    "function_name": (lambda x: isinstance(x, str) and x, "a non-empty string"),
    "r_eval": (lambda x: _number(x) and 0 <= x <= 1, "a number in [0, 1]"),
    "r_judge": (lambda x: x is None or _number(x), "null or a number"),
    "step": (lambda x: isinstance(x, int) and not isinstance(x, bool) and x >= 0, "an integer >= 0"),
    "source_run": (lambda x: isinstance(x, str), "a string"),
    "meta": (lambda x: isinstance(x, dict), "an object"),
}
_REQUIRED = ("category", "code", "schema", "function_name", "r_eval")  # the rest have defaults


def _check_pool_file(data: Any) -> None:
    """The file's shape, types and ranges, so a bad file fails here in one line (not later, or silently)."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if data.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"format_version {data.get('format_version')!r}; this smith reads {FORMAT_VERSION}")
    cap = data.get("cap_per_category")
    if not (isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1):
        raise ValueError(f"cap_per_category {cap!r} is not an integer >= 1")
    groups = data.get("groups") or {}
    if not (isinstance(groups, dict) and all(isinstance(v, str) for v in groups.values())):
        raise ValueError("groups is not an object of strings")
    if not isinstance(data.get("entries"), list):
        raise ValueError("entries is not a list")
    for i, raw in enumerate(data["entries"]):
        if not isinstance(raw, dict):
            raise ValueError(f"entry {i} is not an object")
        unknown = sorted(set(raw) - set(_ENTRY))
        if unknown:
            raise ValueError(f"entry {i} has unknown fields {unknown}")
        missing = [name for name in _REQUIRED if name not in raw]
        if missing:
            raise ValueError(f"entry {i} lacks fields {missing}")
        for name, (ok, want) in _ENTRY.items():
            if name in raw and not ok(raw[name]):
                raise ValueError(f"entry {i}: {name} is {str(raw[name])[:40]!r}, want {want}")
        # an OpenAI function schema (one without `parameters` is offered as taking none, ToolSpec.openai_tool)
        problem = schema_error({"parameters": {"type": "object", "properties": {}}, **function_schema(raw["schema"])},
                               use_xgrammar=False)
        if problem:
            raise ValueError(f"entry {i}: schema: {problem}")


class ToolPool:
    """Per-category tool store with capped, quality-ordered admission and atomic persistence."""

    def __init__(self, cap_per_category: int = PoolConfig.cap_per_category,
                 groups: dict[str, str] | None = None) -> None:
        if cap_per_category < 1:
            raise ValueError(f"cap_per_category must be >= 1, got {cap_per_category}")
        self.cap = cap_per_category
        self.groups = dict(groups or {})  # category -> group, so distractors can come from other groups
        self._by_cat: dict[str, list[PoolEntry]] = {}

    # -- admission ---------------------------------------------------------------------------------
    def admit(self, entry: PoolEntry) -> bool:
        """Admit a tool with r_eval > 0; keeps the better of two identical (normalised) codes, evicts the worst."""
        if not entry.r_eval > 0:
            return False
        entries = self._by_cat.setdefault(entry.category, [])
        key = normalise_code(entry.tool.code)
        for i, old in enumerate(entries):
            if normalise_code(old.tool.code) == key:
                if entry.quality > old.quality:
                    entries[i] = entry
                    return True
                return False
        entries.append(entry)
        entries.sort(key=lambda e: e.quality, reverse=True)
        if len(entries) > self.cap:
            evicted = entries.pop()
            return evicted is not entry
        return True

    # -- queries -----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return sum(len(v) for v in self._by_cat.values())

    def __iter__(self) -> Iterator[PoolEntry]:
        for cat in sorted(self._by_cat):
            yield from self._by_cat[cat]

    def categories(self) -> list[str]:
        return sorted(c for c, v in self._by_cat.items() if v)

    def sizes(self) -> dict[str, int]:
        return {c: len(self._by_cat[c]) for c in self.categories()}

    def entries(self, category: str) -> list[PoolEntry]:
        return list(self._by_cat.get(category, []))

    def matching(self, category: str, rng: random.Random | None = None) -> PoolEntry | None:
        """The category's best tool, or (with an rng) a quality-weighted draw so use tasks see variety."""
        entries = self._by_cat.get(category)
        if not entries:
            return None
        if rng is None:
            return entries[0]
        weights = [max(e.r_eval, 1e-6) for e in entries]
        return rng.choices(entries, weights=weights, k=1)[0]

    def distractors(self, category: str, k: int, rng: random.Random) -> list[PoolEntry]:
        """k tools from other categories (other groups first: "distractor tools from unrelated categories")."""
        group = self.groups.get(category)
        others = [c for c in self.categories() if c != category]
        far = [c for c in others if group is None or self.groups.get(c) != group]
        near = [c for c in others if c not in far]
        rng.shuffle(far)
        rng.shuffle(near)
        chosen = (far + near)[:k]
        return [rng.choice(self._by_cat[c]) for c in chosen]

    # -- persistence -------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "cap_per_category": self.cap,
            "groups": self.groups,
            "entries": [e.to_row() for e in self],
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Atomic: write a temporary file in the same directory, fsync, then rename over the target."""
        path = Path(path)
        if path.is_dir():
            path = path / POOL_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with tmp.open("w") as f:
            json.dump(self.to_json(), f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> ToolPool:
        """Load a pool file, or the pool of a run / checkpoint directory (its latest checkpoint's pool)."""
        path = resolve_pool_path(path)
        try:
            data = json.loads(path.read_text())
            _check_pool_file(data)
            pool = cls(cap_per_category=data["cap_per_category"], groups=data.get("groups"))
            for raw in data["entries"]:
                pool._by_cat.setdefault(raw["category"], []).append(PoolEntry.from_row(raw))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, RecursionError) as e:
            raise PoolFileError(f"tool pool file {path} is corrupt or not a smith pool ({e}); not loading it") from None
        for entries in pool._by_cat.values():
            entries.sort(key=lambda e: e.quality, reverse=True)
        return pool

    def restore(self, path: str | os.PathLike) -> None:
        """Become the saved pool at `path` in place (a resume: the rollout and the session share this object)."""
        saved = ToolPool.load(path)
        self.cap, self.groups, self._by_cat = saved.cap, saved.groups, saved._by_cat


def checkpoints(run_dir: str | os.PathLike) -> list[tuple[int, Path]]:
    """A run directory's `checkpoint-<step>` directories, oldest first; anything else there (a
    `checkpoint-4-backup` a user made) is ignored."""
    found = [(int(m.group(1)), p) for p in Path(run_dir).glob("checkpoint-*")
             if p.is_dir() and (m := re.fullmatch(r"checkpoint-(\d+)", p.name))]
    return sorted(found)


def resolve_pool_path(path: str | os.PathLike) -> Path:
    """A pool file, a checkpoint directory holding one, or a run directory (newest checkpoint with a pool)."""
    path = Path(path)
    if path.is_file():
        return path
    if (path / POOL_FILE).is_file():
        return path / POOL_FILE
    if path.is_dir():
        candidates = [c / POOL_FILE for _, c in checkpoints(path) if (c / POOL_FILE).is_file()]
        if candidates:
            return candidates[-1]
    raise FileNotFoundError(f"no tool pool at {path} (expected a {POOL_FILE} file, or a run/checkpoint directory)")
