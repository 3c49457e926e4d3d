"""The reasoning-gym catalog: categories, their group, seen/unseen split and easy/hard bands.

The split and the bands live in `catalog.yaml` next to this file (docs/architecture.md, "reasoning-gym"),
with a line per
task on why it is in; this module only loads and checks that file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from smith.errors import ConfigError
from smith.tasks.item import Item
from smith.tasks.scoring import FULL_MARKS, score_entry

GROUPS = ("Arithmetic", "Algorithms", "Algebra", "Games", "Logic")
SPLITS = ("seen", "unseen")
BANDS = ("easy", "hard")
DEFAULT_PATH = Path(__file__).with_name("catalog.yaml")

_MEASURE = re.compile(
    r"^(?:len\((metadata(?:\.\w+)+)\)|(metadata(?:\.\w+)+)|number\(answer\)|question_chars|answer_chars)$"
)


@dataclass(frozen=True)
class Category:
    """One reasoning-gym task with its two difficulty bands (configs passed to `create_dataset`)."""

    name: str
    group: str
    split: str
    easy: dict[str, Any]
    hard: dict[str, Any]
    measure: str
    why: str
    full_marks: str
    full_marks_why: str
    dataset: str = ""
    answer_pattern: str | None = None
    _pattern: re.Pattern[str] | None = field(default=None, repr=False, compare=False)

    def config(self, band: str) -> dict[str, Any]:
        if band not in BANDS:
            raise ValueError(f"band {band!r} unknown; use one of {BANDS}")
        return dict(self.easy if band == "easy" else self.hard)

    def score(self, answer: Any, item: Item) -> float:
        """Full marks (1.0) or 0.0: the guarded scorer and the `full_marks` check (smith.tasks.scoring); evaluation
        suites score any item source's categories through this one method (smith.evals.rg.sources)."""
        if item.category != self.name:
            raise ValueError(f"item {item.id} belongs to {item.category!r}, not {self.name!r}; score it with its "
                             "category")
        return score_entry(self, item.band, answer, item.entry)

    def answer_allowed(self, answer: str) -> bool:
        """Answers this category's scorer may see: the form of an answer, where the scorer evaluates the text
        (sympy: nothing outside the expected alphabet reaches an `eval`) or skips text it cannot read."""
        return self._pattern is None or self._pattern.fullmatch(answer) is not None

    def hardness(self, question: str, answer: str, metadata: dict[str, Any]) -> float:
        """The catalog's `measure` of one item; the hard band must have the larger mean."""
        if self.measure == "question_chars":
            return float(len(question))
        if self.measure == "answer_chars":
            return float(len(answer))
        if self.measure == "number(answer)":
            return float(answer)
        m = _MEASURE.match(self.measure)
        assert m is not None  # checked at load time
        path = (m.group(1) or m.group(2)).split(".")[1:]
        value: Any = metadata
        for key in path:
            value = value[key]
        return float(len(value)) if m.group(1) else float(value)


@dataclass(frozen=True)
class Catalog:
    categories: list[Category]

    @property
    def seen(self) -> list[Category]:
        return [c for c in self.categories if c.split == "seen"]

    @property
    def unseen(self) -> list[Category]:
        return [c for c in self.categories if c.split == "unseen"]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.categories]

    def get(self, name: str) -> Category:
        for c in self.categories:
            if c.name == name:
                return c
        raise ValueError(f"category {name!r} not in the catalog; known: {', '.join(self.names)}")

    def check_names(self, names: Any, what: str) -> None:
        """Category names a user gave under the setting `what`: unknown ones fail in one line, naming them and
        the known ones (before any model loads)."""
        if isinstance(names, str):
            raise ConfigError(f"{what}={names} must be a list, e.g. {what}=[{names}]")
        unknown = sorted(set(names) - set(self.names))
        if unknown:
            raise ConfigError(f"{what} has unknown categories {unknown}; known: {', '.join(self.names)}")

    def by_group(self, split: str | None = None) -> dict[str, list[Category]]:
        out: dict[str, list[Category]] = {g: [] for g in GROUPS}
        for c in self.categories:
            if split is None or c.split == split:
                out[c.group].append(c)
        return out


def _category(name: str, raw: dict[str, Any], where: Path) -> Category:
    missing = {"group", "split", "easy", "hard", "measure", "why", "full_marks"} - raw.keys()
    if missing:
        raise ValueError(f"{where}: category {name!r} lacks {sorted(missing)}; add them")
    full = raw["full_marks"]
    if not isinstance(full, dict) or full.get("check") not in FULL_MARKS or not full.get("why"):
        checks = sorted(FULL_MARKS)
        raise ValueError(f"{where}: category {name!r} needs full_marks: {{check: one of {checks}, why: ...}}")
    if raw["group"] not in GROUPS:
        raise ValueError(f"{where}: category {name!r} has group {raw['group']!r}; use one of {GROUPS}")
    if raw["split"] not in SPLITS:
        raise ValueError(f"{where}: category {name!r} has split {raw['split']!r}; use one of {SPLITS}")
    if not _MEASURE.match(raw["measure"]):
        raise ValueError(f"{where}: category {name!r} has measure {raw['measure']!r}; see the file header")
    pattern = raw.get("answer_pattern")
    return Category(
        name=name,
        group=raw["group"],
        split=raw["split"],
        easy=dict(raw["easy"]),
        hard=dict(raw["hard"]),
        measure=raw["measure"],
        why=" ".join(str(raw["why"]).split()),
        full_marks=full["check"],
        full_marks_why=" ".join(str(full["why"]).split()),
        dataset=raw.get("dataset", name),
        answer_pattern=pattern,
        _pattern=re.compile(pattern) if pattern else None,
    )


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Load and check a catalog file (default: the packaged `catalog.yaml`); cached until the file changes."""
    where = Path(path) if path is not None else DEFAULT_PATH
    if not where.is_file():
        raise FileNotFoundError(f"catalog file {where} not found; pass an existing YAML file")
    return _load(where.resolve(), where.stat().st_mtime_ns)


def score(category: str | Category, answer: Any, item: Item) -> float:
    """Score `answer` for `item` of `category` (a name in the packaged catalog, or a Category): 0.0 or 1.0."""
    cat = category if isinstance(category, Category) else load_catalog().get(category)
    return cat.score(answer, item)


@cache
def _load(where: Path, mtime_ns: int) -> Catalog:
    raw = yaml.safe_load(where.read_text())
    if not isinstance(raw, dict) or not isinstance(raw.get("categories"), dict):
        raise ValueError(f"{where}: expected a mapping with a 'categories' mapping")
    return Catalog([_category(name, body, where) for name, body in raw["categories"].items()])
