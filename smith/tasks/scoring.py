"""Guarded scoring with the dataset's own `score_answer` (docs/architecture.md, "reasoning-gym").

Correct means a score of exactly 1.0: several scorers give partial credit (near-miss numbers, a correct
but longer Hanoi solution, trailing text), which SMITH counts as wrong. Answers are stripped, scorers
that raise count as 0, and the answer is checked against the category's `answer_pattern` first because
some scorers run `sympy.parse_expr` (an eval) on it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from smith.tasks.catalog import Category, load_catalog
from smith.tasks.item import Item

MAX_ANSWER_CHARS = 100_000  # the longest real answers (10-disk Hanoi) are ~35k characters


@cache
def _scorer(dataset: str, config_json: str) -> Any:
    import json

    import reasoning_gym

    return reasoning_gym.create_dataset(dataset, size=1, seed=0, **json.loads(config_json))


def score_entry(cat: Category, band: str, answer: Any, entry: dict[str, Any]) -> float:
    """1.0 if the dataset's scorer gives `answer` full marks on `entry`, else 0.0; never raises."""
    import json

    if not isinstance(answer, str):
        return 0.0
    answer = answer.strip()
    if not answer or len(answer) > MAX_ANSWER_CHARS or not cat.answer_allowed(answer):
        return 0.0
    try:
        ds = _scorer(cat.dataset, json.dumps(cat.config(band), sort_keys=True))
        value = float(ds.score_answer(answer, entry))
    except Exception:
        return 0.0
    return 1.0 if value >= 1.0 else 0.0


def score(category: str | Category, answer: Any, item: Item) -> float:
    """Score `answer` for `item` of `category`: 0.0 or 1.0."""
    cat = category if isinstance(category, Category) else load_catalog().get(category)
    if item.category != cat.name:
        raise ValueError(f"item {item.id} belongs to {item.category!r}, not {cat.name!r}; score it with its category")
    return score_entry(cat, item.band, answer, item.entry)
