"""`Item`: one question, in its own module so that the catalog (which scores items) and the item store (which
makes them) both use it without importing each other."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Item:
    """One question. `answer` is the example answer a build prompt may show (easy band only);
    `entry` is what the scorer needs and must never reach a prompt or a tool."""

    id: str
    category: str
    band: str
    question: str
    answer: str
    entry: dict[str, Any]

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> Item:
        return cls(**json.loads(line))
