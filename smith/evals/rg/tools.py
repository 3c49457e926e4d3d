"""Where a category's tool comes from in build_use and pool modes, and the menu a question is offered.

build_use: the writer model builds one tool per category from N = 4 easy examples (SMITH at inference;
the writer may be another model or checkpoint: the paper's tool-transfer experiments). pool: the best
tool of the category in an exported pool (quality order of smith.pool), and for a category the pool does
not cover (the unseen ones) the writer builds one, as a use episode does during training (docs/architecture.md,
"One training step"). Tools are logged once per category, so a resumed run offers the very same tools.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from smith.pool import PoolEntry, ToolPool, menu_names
from smith.toolspec import ToolSpec

from .episodes import BuildResult


def pool_row(entry: PoolEntry) -> dict[str, Any]:
    return {"category": entry.category, "source": "pool", "ok": True, "reason": None, "code": entry.tool.code,
            "schema": entry.tool.schema, "function_name": entry.tool.function_name, "prompt_tokens": 0,
            "completion_tokens": 0, "pool_step": entry.step, "pool_r_eval": entry.r_eval,
            "source_run": entry.source_run}


def built_row(result: BuildResult, writer: str) -> dict[str, Any]:
    return {"category": result.category, "source": "built" if result.ok else "none", "ok": result.ok,
            "reason": result.reason, "code": result.code, "schema": result.schema,
            "function_name": result.function_name, "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens, "writer": writer, "response": result.response}


def from_pool(pool: ToolPool, categories: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Rows for the categories the pool covers (its best tool each)."""
    rows = {}
    for cat in categories:
        entry = pool.matching(cat)
        if entry is not None:
            rows[cat] = pool_row(entry)
    return rows


def entry_of(row: dict[str, Any]) -> PoolEntry | None:
    """A logged tool row as a PoolEntry (what the executor runs), or None when building it failed."""
    if not row.get("ok"):
        return None
    r_eval = float(row.get("pool_r_eval") or 0.0)
    return PoolEntry(row["category"], ToolSpec(row["code"], row["schema"], row["function_name"]), r_eval)


def menu(
    category: str, tools: dict[str, PoolEntry], groups: dict[str, str], n_distractors: int, rng: random.Random
) -> dict[str, PoolEntry]:
    """The category's own tool plus `n_distractors` tools of other categories (other groups first), shuffled.

    Tools keep their own names; a repeated one (written tools often share `solve`) is suffixed, and
    descriptions tell them apart (docs/architecture.md, "One training step").
    """
    own = tools.get(category)
    if own is None:
        return {}
    if n_distractors <= 0:
        return {own.tool.function_name: own}
    others = sorted(c for c in tools if c != category)
    far = [c for c in others if groups.get(c) != groups.get(category)]
    near = [c for c in others if c not in far]
    rng.shuffle(far)
    rng.shuffle(near)
    chosen = [own, *(tools[c] for c in (far + near)[:n_distractors])]
    rng.shuffle(chosen)
    return menu_names(chosen)
