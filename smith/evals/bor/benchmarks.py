"""Query sets for the bor suite: a registry of tool documents, queries with their relevant tools, splits.

(a) `smith`: questions from the task catalog (hard band); the right tools are the pool's tools of the
    question's category. With `pool=PATH` the tools are a smith pool (file or run); without it,
    one tool per catalog category described by its reasoning-gym dataset's own docstring (reported as
    `pool_source: rg-docstrings`). Registries of any size are grown with distractor tools: the other
    reasoning-gym datasets (same source, near topics) and documented Python standard-library functions
    (BoR paper section 3 evaluates registries of 20 to 3,251 tools).
(b) `bfcl`: BFCL v4 `simple_python` and `multiple` function docs from the bfcl-eval package data (its own
    venv, see smith.evals.bfcl.venv); each
    question's relevant tools are the documents named by its ground-truth call.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from smith.pool.retrieval import ToolDoc

STDLIB_MODULES = (
    "math", "cmath", "statistics", "operator", "itertools", "functools", "random", "bisect", "heapq", "calendar",
    "re", "difflib", "textwrap", "unicodedata", "base64", "binascii", "zlib", "json", "collections", "shutil",
    "posixpath", "urllib.parse", "html", "string", "fractions", "decimal", "datetime",
)  # fmt: skip
BFCL_FILES = ("BFCL_v4_simple_python.json", "BFCL_v4_multiple.json")


@dataclass(frozen=True)
class Query:
    qid: str
    text: str
    relevant: tuple[int, ...]  # indices into Benchmark.documents
    group: str  # category (smith) or test file (bfcl)


@dataclass
class Benchmark:
    name: str
    documents: list[ToolDoc]
    queries: list[Query]
    core: int  # documents[:core] are the tools queries point at; the rest are distractors
    source: str
    distractors: list[ToolDoc] = field(default_factory=list)

    def registry(self, size: int, seed: int) -> Benchmark:
        """A registry of `size` tools: all core tools plus sampled distractors, or (size < core) a sample of
        core tools with only the queries they answer. Sizes above the supply raise."""
        rng = np.random.default_rng(seed)
        supply = self.core + len(self.distractors)
        if size > supply:
            raise ValueError(f"{self.name}: registry size {size} exceeds the {supply} tools available; use <= {supply}")
        if size <= self.core:
            keep = sorted(rng.choice(self.core, size=size, replace=False).tolist())
            docs = [self.documents[i] for i in keep]
            remap = {old: new for new, old in enumerate(keep)}
        else:
            extra = rng.choice(len(self.distractors), size=size - self.core, replace=False)
            docs = self.documents[: self.core] + [self.distractors[i] for i in sorted(extra.tolist())]
            remap = {i: i for i in range(self.core)}
        queries = [
            replace(q, relevant=tuple(remap[i] for i in q.relevant if i in remap))
            for q in self.queries
            if any(i in remap for i in q.relevant)
        ]
        return Benchmark(self.name, docs, queries, min(size, self.core), self.source)


def split_of(qid: str, train_fraction: float, seed: int) -> str:
    """'train' or 'eval', fixed by a hash of the query id (stable as the query set grows)."""
    h = int.from_bytes(hashlib.sha256(f"{seed}/{qid}".encode()).digest()[:8], "big") / 2**64
    return "train" if h < train_fraction else "eval"


def _first_paragraph(doc: str | None) -> str:
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def rg_dataset_doc(dataset: str) -> ToolDoc:
    """A tool document for a reasoning-gym dataset from its own words: class, module or config docstring."""
    from reasoning_gym.factory import DATASETS

    cls, cfg = DATASETS[dataset]
    own = [cls.__doc__, sys.modules[cls.__module__].__doc__, cfg.__doc__]
    text = next((_first_paragraph(d) for d in own if _first_paragraph(d) and "(" not in _first_paragraph(d)[:40]), "")
    text = re.sub(r"^(Dataset that generates|Generates|Procedurally generates)\s+", "", text or dataset)
    text = re.sub(r"\s*(exercises|tasks|problems|puzzles)? with configurable (difficulty|parameters)\.?", "", text)
    words = dataset.replace("_", " ")
    return ToolDoc(
        name=f"solve_{dataset}",
        description=f"Solve {words} questions: {text}".strip(),
        parameters={
            "type": "object",
            "properties": {"question": {"type": "string", "description": f"the full {words} question"}},
            "required": ["question"],
        },
    )


def stdlib_docs(exclude: set[str]) -> list[ToolDoc]:
    """Documented public callables of some standard-library modules, as distractor tools; names in
    `exclude` (a catalog category such as `lcm`: math.lcm would be a right answer, not a distractor) are left out."""
    out = []
    for modname in STDLIB_MODULES:
        mod = importlib.import_module(modname)
        for name in sorted(dir(mod)):
            obj = getattr(mod, name)
            if name.startswith("_") or name in exclude or not callable(obj) or inspect.ismodule(obj):
                continue
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                continue
            doc = _first_paragraph(inspect.getdoc(obj))
            if not doc:
                continue
            try:
                params = [p for p in inspect.signature(obj).parameters if p not in ("self", "args", "kwargs")]
            except (TypeError, ValueError):
                params = []
            props = {p: {"type": "string", "description": p.replace("_", " ")} for p in params}
            out.append(ToolDoc(f"{modname}.{name}", doc, {"type": "object", "properties": props}))
    return out


def smith_benchmark(
    queries_per_category: int, seed: int, pool: str | Path | None = None, categories: Sequence[str] | None = None
) -> Benchmark:
    """Benchmark (a): catalog questions against a smith pool (or its rg-docstrings stand-in) plus distractors."""
    from reasoning_gym.factory import DATASETS

    from smith.tasks import items, load_catalog

    catalog = load_catalog()
    cats = [catalog.get(c) for c in categories] if categories else catalog.categories
    if pool is not None:
        from smith.pool import ToolPool

        tool_pool = ToolPool.load(pool)
        entries = [e for e in tool_pool if e.category in {c.name for c in cats}]
        if not entries:
            raise ValueError(f"pool {pool} holds no tool of the catalog categories {[c.name for c in cats]}")
        documents = [ToolDoc(e.tool.function_name, e.tool.description, e.tool.schema.get("parameters") or {})
                     for e in entries]
        tool_cats = [e.category for e in entries]
        source = f"pool:{pool}"
    else:
        documents = [rg_dataset_doc(c.dataset) for c in cats]
        tool_cats = [c.name for c in cats]
        source = "rg-docstrings"
    taken = {c.dataset for c in cats} | {c.name for c in cats}
    distractors = [rg_dataset_doc(d) for d in sorted(DATASETS) if d not in taken and d != "composite"]
    distractors += stdlib_docs(exclude=taken)
    queries = []
    for cat in cats:
        relevant = tuple(i for i, tc in enumerate(tool_cats) if tc == cat.name)
        if not relevant:
            continue
        for it in items(cat.name, "hard", queries_per_category, seed):
            queries.append(Query(it.id, it.question, relevant, cat.name))
    return Benchmark("smith", documents, queries, len(documents), source, distractors)


def bfcl_data_dir(explicit: str | Path | None = None) -> Path:
    """The bfcl-eval package's data folder: `explicit`, else bfcl_eval importable here, else the BFCL venv
    that `python -m smith.evals.bfcl.venv` builds (bfcl-eval pins numpy 1.26, so it lives in its own venv)."""
    from smith.evals.bfcl.venv import DEFAULT_DIR

    if explicit is not None:
        candidates = [Path(explicit)]
    else:
        spec = importlib.util.find_spec("bfcl_eval")
        here = [Path(spec.origin).parent / "data"] if spec is not None and spec.origin else []
        candidates = here + sorted(DEFAULT_DIR.glob("lib/python3*/site-packages/bfcl_eval/data"))
        if not candidates:
            raise FileNotFoundError(
                f"bfcl-eval not found (not importable, no venv at {DEFAULT_DIR}); "
                "run `python -m smith.evals.bfcl.venv` or set suite.bfcl_data=DIR"
            )
    path = candidates[0]
    if not all((path / f).is_file() and (path / "possible_answer" / f).is_file() for f in BFCL_FILES):
        raise FileNotFoundError(
            f"{path} lacks {', '.join(BFCL_FILES)} (and possible_answer/); not a bfcl-eval data dir"
        )
    return path


def bfcl_benchmark(data_dir: str | Path | None = None) -> Benchmark:
    """Benchmark (b): one registry of every distinct function doc in the BFCL files (the paper's BFCL
    registry had 370 tools); a question's relevant tools are all documents named by its ground truth."""
    path = bfcl_data_dir(data_dir)
    documents: list[ToolDoc] = []
    index: dict[str, int] = {}
    raw_queries = []
    for fname in BFCL_FILES:
        answers = {}
        for line in (path / "possible_answer" / fname).read_text().splitlines():
            row = json.loads(line)
            answers[row["id"]] = [next(iter(call)) for call in row["ground_truth"]]
        for line in (path / fname).read_text().splitlines():
            row = json.loads(line)
            for fn in row["function"]:
                key = json.dumps(fn, sort_keys=True)
                if key not in index:
                    index[key] = len(documents)
                    documents.append(ToolDoc(fn["name"], fn.get("description", ""), fn.get("parameters") or {}))
            text = " ".join(m["content"] for turn in row["question"] for m in turn if m.get("role") == "user")
            raw_queries.append((row["id"], text, set(answers[row["id"]]), fname.removesuffix(".json")))
    queries = []
    for qid, text, names, group in raw_queries:
        relevant = tuple(i for i, d in enumerate(documents) if d.name in names)
        if relevant:
            queries.append(Query(qid, text, relevant, group))
    return Benchmark("bfcl", documents, queries, len(documents), f"bfcl-eval:{path}")
