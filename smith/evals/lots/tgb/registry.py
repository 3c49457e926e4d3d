"""TGB's registry: the global tool set S in canonical order (authored tools, then synthetic distractors)."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from .tools import AUTHORED, Tool, synthetic_distractors


@dataclass(frozen=True)
class Registry:
    """The global tool registry S in canonical order (authored tools first, then synthetic distractors)."""

    tools: tuple[Tool, ...]
    seed: int = 0

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    def __getitem__(self, name: str) -> Tool:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"tool {name!r} is not in this {len(self)}-tool registry") from None

    @functools.cached_property
    def _by_name(self) -> dict[str, Tool]:
        return {t.name: t for t in self.tools}

    @functools.cached_property
    def _order(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}

    def __len__(self) -> int:
        return len(self.tools)

    def canonical(self, menu: Iterable[str]) -> list[str]:
        """The served tools in registry order (the paper's fixed canonical order of context lines)."""
        order = self._order
        unknown = [m for m in menu if m not in order]
        if unknown:
            raise KeyError(f"tools not in the registry: {unknown}")
        return sorted(set(menu), key=order.__getitem__)


def make_registry(size: int = 15, seed: int = 0) -> Registry:
    """15 authored tools, plus `size - 15` seeded synthetic distractors (F.1: 30/60/120/240)."""
    if size < len(AUTHORED):
        raise ValueError(f"a TGB registry has at least {len(AUTHORED)} tools; asked for {size}")
    return Registry(AUTHORED + tuple(synthetic_distractors(size - len(AUTHORED), seed)), seed)
