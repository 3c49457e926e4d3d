"""The training prompt stream: rows alternate build / use so every batch splits exactly 1:1.

Each row is a key ("build:17": the 17th build task); the rollout turns it into a task deterministically,
so a resumed run (the Trainer skips consumed rows) replays exactly the tasks it would have seen.
Categories are stratified: each run of len(categories) tasks of a kind covers every category once, in a
seeded order, so a batch's mix of categories (and with it the reward) varies far less from step to step
than with independent draws, without favouring any category.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from smith.config import BuildConfig, TasksConfig
from smith.rollout.episodes import BuildTask, EpisodeKind, UseTask
from smith.tasks import items


@dataclass
class TaskSource:
    """Seen categories with cached item banks per band; rows -> tasks."""

    categories: list[str]
    n_examples: int
    k_heldout: int
    seed: int
    cache_dir: str | None
    bank_size: int = TasksConfig.bank_size  # defaults: smith.config's
    band_examples: str = BuildConfig.band_examples
    band_heldout: str = BuildConfig.band_heldout
    catalog: Any = None  # where the categories' bands come from (`tasks.catalog`); None: the packaged catalog

    def __post_init__(self) -> None:
        self._banks: dict[tuple[str, str], list[Any]] = {}

    def bank(self, category: str, band: str) -> list[Any]:
        """Up to `bank_size` items; narrow bands (few distinct questions) give what they have, at least K+1."""
        key = (category, band)
        size = self.bank_size
        while key not in self._banks:
            try:
                self._banks[key] = items(category, band, size, seed=self.seed, cache_dir=self.cache_dir,
                                         catalog=self.catalog)
            except ValueError:
                if size <= self.k_heldout + 1:
                    raise
                size = max(size // 2, self.k_heldout + 1)
        return self._banks[key]

    def category(self, kind: str, ordinal: int) -> str:
        block, position = divmod(ordinal, len(self.categories))
        order = sorted(self.categories)
        random.Random(f"{self.seed}:{kind}:{block}").shuffle(order)
        return order[position]

    def category_of(self, key: str) -> str:
        """The category of a task key: `kind:N` draws it in the stratified order (`category`); `kind:N:category`
        names it (a refill group keeps the category of the group it replaces, so the batch stays stratified)."""
        kind, ordinal, *named = key.split(":")
        return named[0] if named else self.category(kind, int(ordinal))

    def task(self, key: str) -> BuildTask | UseTask:
        kind = EpisodeKind.of(key)
        rng = random.Random(f"{self.seed}:{key}")
        category = self.category_of(key)
        examples = rng.sample(self.bank(category, self.band_examples), self.n_examples)
        hard = self.bank(category, self.band_heldout)
        if kind is EpisodeKind.BUILD:
            return BuildTask(category, examples, rng.sample(hard, self.k_heldout))
        picked = rng.sample(hard, self.k_heldout + 1)
        return UseTask(category, examples, picked[0], picked[1:], key=f"{self.seed}:{key}")


def prompt_rows(n_prompts: int, build_fraction: float = 0.5) -> list[dict[str, str]]:
    """Interleaved keys (kind, ordinal within the kind); with an even prompts-per-step the sampler gives every
    batch half build, half use."""
    if build_fraction != 0.5:
        period = round(1 / build_fraction) if build_fraction > 0 else 0
        kinds = [EpisodeKind.BUILD if period and i % period == 0 else EpisodeKind.USE for i in range(n_prompts)]
    else:
        kinds = [EpisodeKind.BUILD if i % 2 == 0 else EpisodeKind.USE for i in range(n_prompts)]
    seen = dict.fromkeys(EpisodeKind, 0)
    rows = []
    for k in kinds:
        rows.append({"prompt": f"{k}:{seen[k]}"})
        seen[k] += 1
    return rows
