"""Task-level tool spaces: aggregation, top-K, budget choice, EMA updates, exploration, state, routing.

003 section 3.2 (Eq. 3-4), Appendix B.3 (spaces smaller than K, Eq. 9, serving cap and exploration,
stored state), Appendix C.2 (budget K), Appendix D.1 (routing by metadata or by clustering embeddings).
Everything here is pure bookkeeping over scores; the likelihoods come from `scoring`.
"""

from __future__ import annotations

import json
import os
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np


def aggregate(request_scores: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Eq. 3: the mean of I_x(s) over the requests that exposed and scored s (absent is not zero)."""
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for scores in request_scores:
        for tool, value in scores.items():
            sums[tool] += value
            counts[tool] += 1
    return {t: sums[t] / counts[t] for t in sums}


def rank(scores: Mapping[str, float]) -> list[str]:
    """Tools by descending score, ties broken by tool name so the ranking is deterministic (B.3)."""
    return sorted(scores, key=lambda t: (-scores[t], t))


def top_k(scores: Mapping[str, float], k: int) -> list[str]:
    """Eq. 4: the K best tools with evidence; fewer when fewer have evidence, |E| = min(K, |A|) (B.3)."""
    if k < 0:
        raise ValueError(f"budget K must be >= 0, got {k}")
    return rank(scores)[:k]


def select_budget(accuracy_by_k: Mapping[int, float]) -> int:
    """C.2: the smallest K whose top-K space reaches the best fitting accuracy."""
    if not accuracy_by_k:
        raise ValueError("no budgets were evaluated; pass {K: fitting accuracy}")
    best = max(accuracy_by_k.values())
    return min(k for k, acc in accuracy_by_k.items() if acc == best)


def ema_update(running: Mapping[str, float], batch_mean: Mapping[str, float], alpha: float) -> dict[str, float]:
    """Eq. 9: I~ <- alpha * batch mean + (1 - alpha) * I~; first evidence initialises; unexposed tools keep theirs."""
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"EMA weight alpha must be in (0, 1], got {alpha}")
    out = dict(running)
    for tool, value in batch_mean.items():
        out[tool] = alpha * value + (1 - alpha) * out[tool] if tool in out else value
    return out


@dataclass
class TaskSpace:
    """The persistent state of one task: running scores and the resulting tool list (B.3, 'Stored state')."""

    task: str
    k: int
    alpha: float = 0.3
    running: dict[str, float] = field(default_factory=dict)
    tools: list[str] = field(default_factory=list)
    batches: int = 0

    def update(self, request_scores: Iterable[Mapping[str, float]]) -> list[str]:
        """Fold one batch of request scores into the running scores and recompute the space."""
        self.running = ema_update(self.running, aggregate(request_scores), self.alpha)
        self.tools = top_k(self.running, self.k)
        self.batches += 1
        return self.tools

    def menu(self, registry: Sequence[str], rng: random.Random, cap: int | None = None,
             epsilon: float = 0.0) -> list[str]:
        """The menu for the next request (B.3): the registry (or a random C of it) for the first batch; later
        the current space, explored with probability epsilon by adding random registry tools up to C."""
        cap = len(registry) if cap is None else cap
        if self.batches == 0:
            return list(registry) if len(registry) <= cap else rng.sample(list(registry), cap)
        menu = list(self.tools)
        if rng.random() < epsilon:
            others = [t for t in registry if t not in menu]
            menu += rng.sample(others, max(0, min(len(others), cap - len(menu))))
        return menu

    def save(self, directory: str | os.PathLike) -> Path:
        path = Path(directory) / f"{self.task}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, directory: str | os.PathLike, task: str) -> TaskSpace:
        path = Path(directory) / f"{task}.json"
        if not path.is_file():
            raise FileNotFoundError(f"no stored space for task {task!r} at {path}; fit it first")
        return cls(**json.loads(path.read_text()))


def load_spaces(directory: str | os.PathLike) -> dict[str, TaskSpace]:
    """Every stored task space of a deployment (one JSON per task)."""
    return {p.stem: TaskSpace.load(directory, p.stem) for p in sorted(Path(directory).glob("*.json"))}


# ------------------------------------------------------------------------------------------ routing (D.1)
def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


class ThresholdRouter:
    """Online threshold clustering with running-mean centroids (D.1, R3).

    A request joins the most similar task when the cosine similarity reaches `tau`; otherwise it opens a
    new task (and thus a new space). Task ids are `task-0`, `task-1`, ... in order of opening.
    """

    def __init__(self, embed: Callable[[list[str]], np.ndarray], tau: float = 0.9) -> None:
        self.embed = embed
        self.tau = tau
        self.centroids: list[np.ndarray] = []
        self.counts: list[int] = []

    def route(self, texts: list[str]) -> list[str]:
        out = []
        for v in _unit(self.embed(texts)):
            sims = [float(_unit(c) @ v) for c in self.centroids]
            j = int(np.argmax(sims)) if sims else -1
            if j < 0 or sims[j] < self.tau:
                self.centroids.append(v.copy())
                self.counts.append(1)
                j = len(self.centroids) - 1
            else:
                self.counts[j] += 1
                self.centroids[j] = self.centroids[j] + (v - self.centroids[j]) / self.counts[j]
            out.append(f"task-{j}")
        return out


def kmeans_tasks(embeddings: np.ndarray, k: int, seed: int = 0) -> list[str]:
    """k-means on unit vectors (cosine k-means, D.1 R1): a cluster replaces a family everywhere."""
    from scipy.cluster.vq import kmeans2

    _, labels = kmeans2(_unit(embeddings), k, seed=seed, minit="++")
    return [f"task-{int(c)}" for c in labels]


def route_by_metadata(families: Iterable[str]) -> list[str]:
    """The main protocol: the task is the request's benchmark metadata (its TGB family)."""
    return list(families)
