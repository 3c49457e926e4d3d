"""Where the rg runner's questions come from: reasoning-gym's catalog, or a benchmark's local files.

The rg machinery (modes, baselines, episodes, sandbox, summary) only needs categories -- each with a name, a
group, a split and a `score(answer, item)` -- their held-out questions and their example items (what a
tool writer or a baseline's tool maker sees). An `ItemSource` supplies exactly that, so the out-of-domain
suites (`smith.evals.tabmwp`, `smith.evals.gqa`) run every rg mode by handing rg a `FileSource`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from smith.errors import ConfigError
from smith.tasks import Item

if TYPE_CHECKING:
    from .config import RgEval


class ItemSource(Protocol):
    """The questions an rg-style run evaluates."""

    def check(self, cfg: RgEval) -> None:
        """The source's own settings, before any model loads (ConfigError on a bad one)."""

    def categories(self) -> list[Any]:
        """Categories in table order; each has `name`, `group`, `split` and `score(answer, item) -> float`."""

    def questions(self, cat: Any, n: int | None) -> list[Item]:
        """The first `n` held-out questions of `cat` (None: all)."""

    def examples(self, cat: Any, n: int) -> list[Item]:
        """Up to `n` solved items of `cat` for tool making, never among its questions."""

    def headline(self, summary: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The results.md row of a summary and its columns."""


class ReasoningGym:
    """rg's own source: the catalog's categories of `suite.splits`, hard-band questions and easy examples,
    both drawn with `suite.seed` (smith.tasks.items)."""

    def __init__(self, cfg: RgEval) -> None:
        self.s = cfg.suite
        self.limit = cfg.limit

    def check(self, cfg: RgEval) -> None:
        from smith.tasks import load_catalog

        if self.s.seed == self.s.train_seed:
            raise ConfigError(f"suite.seed={self.s.seed} equals the training seed suite.train_seed; held-out items "
                              "need another seed")
        if self.s.categories:
            load_catalog().check_names(self.s.categories, "suite.categories")

    def categories(self) -> list[Any]:
        from smith.tasks import load_catalog

        wanted = list(self.s.categories) if self.s.categories else None
        return [c for c in load_catalog().categories
                if c.split in self.s.splits and (wanted is None or c.name in wanted)]

    def questions(self, cat: Any, n: int | None) -> list[Item]:
        from smith.tasks import items

        return items(cat, self.s.band, n if n is not None else self.s.n_items, self.s.seed, self.s.cache_dir)

    def examples(self, cat: Any, n: int) -> list[Item]:
        from smith.tasks import items

        return items(cat, "easy", n, self.s.seed, self.s.cache_dir)

    def headline(self, summary: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        from .metrics import PAPER_COLUMNS, paper_row

        return paper_row(summary), list(PAPER_COLUMNS)


@dataclass(frozen=True)
class FileCategory:
    """A category of a benchmark file (e.g. TabMWP's answer type), scored by the benchmark's own rule."""

    name: str
    group: str
    split: str
    scorer: Callable[[str, dict[str, Any]], bool]

    def score(self, answer: Any, item: Item) -> float:
        """1.0 when the benchmark's rule accepts `answer` for `item` (its `entry` holds what the rule needs)."""
        return 1.0 if isinstance(answer, str) and self.scorer(answer.strip(), item.entry) else 0.0


class FileSource:
    """Questions from the user's local benchmark files (no hub access): `suite.data` holds the held-out
    questions, `suite.train_data` the solved items tools are made from (every mode but cot needs it).
    `load(path, cfg)` turns one file into Items whose `category` names a key of `groups` (category -> group);
    every category is an `unseen` one (out of domain). Questions keep file order."""

    def __init__(self, cfg: RgEval, load: Callable[[str, RgEval], list[Item]], groups: dict[str, str],
                 scorer: Callable[[str, dict[str, Any]], bool]) -> None:
        self.cfg, self.load_file, self.scorer = cfg, load, scorer
        self.groups = groups
        self._items: dict[str, list[Item]] = {}

    def _load(self, key: str) -> list[Item]:
        if key not in self._items:
            path = getattr(self.cfg.suite, key)
            if not path:
                raise ConfigError(f"suite {self.cfg.suite.name} needs suite.{key}=PATH (see docs/evaluation.md)")
            try:
                self._items[key] = self.load_file(path, self.cfg)
            except FileNotFoundError:
                raise ConfigError(f"suite.{key}={path}: no such file") from None
            except (ValueError, KeyError, TypeError) as e:
                raise ConfigError(f"suite.{key}={path} is not in the documented format: {e}") from None
            unknown = sorted({it.category for it in self._items[key]} - set(self.groups))
            if unknown:
                raise ConfigError(f"suite.{key}={path} has items of unknown categories {unknown}")
        return self._items[key]

    def check(self, cfg: RgEval) -> None:
        held = self._load("data")
        if not held:
            raise ConfigError(f"suite.data={cfg.suite.data} holds no questions")
        if cfg.mode != "cot":
            train = {it.category for it in self._load("train_data")}
            missing = sorted({it.category for it in held} - train)
            if missing:
                raise ConfigError(f"suite.train_data={cfg.suite.train_data} has no items of {missing}; mode="
                                  f"{cfg.mode} makes each category's tools from its examples")

    def categories(self) -> list[Any]:
        present = {it.category for it in self._load("data")}
        return [FileCategory(name, group, "unseen", self.scorer) for name, group in self.groups.items()
                if name in present]

    def questions(self, cat: Any, n: int | None) -> list[Item]:
        mine = [it for it in self._load("data") if it.category == cat.name]
        return mine if n is None else mine[:n]

    def examples(self, cat: Any, n: int) -> list[Item]:
        held = {it.question for it in self._load("data")}
        return [it for it in self._load("train_data") if it.category == cat.name and it.question not in held][:n]

    def headline(self, summary: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        return ood_row(summary), list(OOD_COLUMNS)


OOD_COLUMNS = ("Accuracy", "I/O tokens")


def ood_row(summary: dict[str, Any]) -> dict[str, Any]:
    """An out-of-domain suite's row: accuracy over all its questions (percent ± bootstrap standard error) and
    mean input / output tokens per question."""
    from .metrics import paper_row

    cell = summary.get("metrics", {}).get("overall")
    value = None if not cell or cell.get("value") is None else f"{100 * cell['value']:.1f}±{100 * cell['se']:.1f}"
    return {"Accuracy": value, "I/O tokens": paper_row(summary)["I/O tokens"]}


class FileSuite:
    """An out-of-domain suite (tabmwp, gqa) as the suite interface: its files as a `FileSource`, checked and run
    by the rg runner. The benchmark module supplies only its loader, category groups and scorer."""

    def __init__(self, load: Callable[[str, RgEval], list[Item]], groups: dict[str, str],
                 scorer: Callable[[str, dict[str, Any]], bool]) -> None:
        self.load, self.groups, self.scorer = load, groups, scorer

    def source(self, cfg: RgEval) -> FileSource:
        return FileSource(cfg, self.load, self.groups, self.scorer)

    def check(self, cfg: RgEval) -> list[tuple[str, str]]:
        """rg's checks with the benchmark's files (they must load); returns the model SPECs the run loads."""
        from smith.evals import rg

        return rg.check(cfg, self.source(cfg))

    def run(self, cfg: RgEval, backends: dict[str, Any] | None = None) -> dict:
        """Run (or resume) the suite through the rg runner; returns the summary."""
        from smith.evals import rg

        return rg.run(cfg, backends, self.source(cfg))
