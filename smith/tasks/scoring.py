"""Guarded scoring with the dataset's own `score_answer` (docs/architecture.md, "reasoning-gym").

Correct means a score of exactly 1.0: several scorers give partial credit (near-miss numbers, a correct
but longer Hanoi solution, trailing text), which SMITH counts as wrong. Answers are stripped, scorers
that raise count as 0, and the answer is checked against the category's `answer_pattern` first because
some scorers run `sympy.parse_expr` (an eval) on it.

The bottom of smith.tasks: it imports neither the catalog nor the item store. `catalog.Category.score` and
the store (which keeps only items whose own answer scores 1.0) build on `score_entry`.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any, Protocol

MAX_ANSWER_CHARS = 100_000  # the longest real answers (10-disk Hanoi) are ~35k characters


class Scorable(Protocol):
    """What scoring needs of a category (a catalog `Category`)."""

    @property
    def dataset(self) -> str: ...

    def config(self, band: str) -> dict[str, Any]: ...

    def answer_allowed(self, answer: str) -> bool: ...


@cache
def _scorer(dataset: str, config_json: str) -> Any:
    import reasoning_gym

    return reasoning_gym.create_dataset(dataset, size=1, seed=0, **json.loads(config_json))


def score_entry(cat: Scorable, band: str, answer: Any, entry: dict[str, Any]) -> float:
    """1.0 if the dataset's scorer gives `answer` full marks on `entry`, else 0.0; never raises."""
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
