"""Seeded reasoning-gym items for one category and band, cached on disk as JSONL.

Items come from `reasoning_gym.create_dataset` only (never hand-written). The same (category, band, n,
seed) always gives the same items: reasoning-gym seeds item i with `seed + i`, and this module keeps the
first n valid, distinct items of a band-specific seed, so a longer request extends a shorter one.
An item is kept only if its own answer scores 1.0 under the dataset's scorer (this drops mislabelled
items), and an easy item is dropped if its question also occurs in the hard band of the same seed
(docs/architecture.md, "reasoning-gym": the two bands never overlap).

`Item.entry` is the full reasoning-gym entry with its metadata. It stays on the grading side: prompts and
tools get `Item.question` only (metadata often holds the answer).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

from smith.tasks.catalog import BANDS, Catalog, Category, load_catalog
from smith.tasks.item import Item
from smith.tasks.scoring import SCORING_VERSION, score_entry

DEFAULT_CACHE = Path("~/.cache/smith/rg_items")
_MAX_TRIES_PER_ITEM = 20  # a band with few distinct questions fails loudly instead of looping




def band_seed(category: str, band: str, seed: int) -> int:
    """A seed per (category, band, seed) far from its neighbours, so reasoning-gym's `seed + i` streams of
    the two bands (and of consecutive seeds) do not share random states."""
    digest = hashlib.sha256(f"{category}/{band}/{seed}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2**31 - 1)


def _json_safe(x: Any) -> Any:
    """Entries hold tuples and numpy scalars; JSON keeps lists and plain Python values."""
    return json.loads(json.dumps(x, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


def _cache_file(cat: Category, band: str, seed: int, cache_dir: Path) -> Path:
    # what decides which items are valid is part of the key: the generator and the grading
    grading = [cat.answer_pattern, cat.full_marks, SCORING_VERSION]
    key = json.dumps([cat.dataset, cat.config(band), version("reasoning-gym"), *grading], sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return cache_dir / f"{cat.name}-{band}-seed{seed}-{digest}.jsonl"


def _read(path: Path) -> list[Item]:
    if not path.is_file():
        return []
    return [Item.from_json(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, rows: list[Item]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.writelines(r.to_json() + "\n" for r in rows)
    os.replace(tmp, path)


def _generate(cat: Category, band: str, n: int, seed: int, exclude: set[str]) -> list[Item]:
    import reasoning_gym

    limit = max(64, n * _MAX_TRIES_PER_ITEM)
    ds = reasoning_gym.create_dataset(cat.dataset, size=limit, seed=band_seed(cat.name, band, seed), **cat.config(band))
    out: list[Item] = []
    seen: set[str] = set()
    for i in range(limit):
        entry = _json_safe(ds[i])
        question = entry["question"]
        answer = entry["answer"] if entry["answer"] is not None else entry["metadata"].get("example_answer")
        if question in seen or question in exclude or not isinstance(answer, str):
            continue
        if score_entry(cat, band, answer, entry) != 1.0:
            continue  # the dataset's own answer fails its scorer: a mislabelled item
        seen.add(question)
        out.append(Item(f"{cat.name}/{band}/{seed}/{i}", cat.name, band, question, answer, entry))
        if len(out) == n:
            return out
    raise ValueError(
        f"{cat.name} {band} band gave only {len(out)} distinct valid items in {limit} draws (wanted {n}); "
        "widen its config in the catalog or ask for fewer"
    )


def items(
    category: str | Category,
    band: str,
    n: int,
    seed: int,
    cache_dir: str | Path | None = None,
    catalog: Catalog | None = None,
) -> list[Item]:
    """The first `n` items of `category`'s `band` for `seed` (cached under `cache_dir`,
    default ~/.cache/smith/rg_items)."""
    if band not in BANDS:
        raise ValueError(f"band {band!r} unknown; use one of {BANDS}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    cat = category if isinstance(category, Category) else (catalog or load_catalog()).get(category)
    root = Path(cache_dir if cache_dir is not None else DEFAULT_CACHE).expanduser()
    path = _cache_file(cat, band, seed, root)
    cached = _read(path)
    if len(cached) >= n:
        return cached[:n]
    exclude = {it.question for it in items(cat, "hard", max(n, 16), seed, root)} if band == "easy" else set()
    fresh = _generate(cat, band, n, seed, exclude)
    _write(path, fresh)
    return fresh
