"""The nonsense-token generator of the tokens relabeling scheme (Appendix A.1): pronounceable tokens that are
not English words nor begin or end with one, so a label leaks no meaning (relabel.py draws from this pool)."""

from __future__ import annotations

import importlib.util
import random
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def _english() -> frozenset[str]:
    """The dictionary that filters nonsense tokens: reasoning-gym's word list (a pinned dependency), so
    the tokens pool is the same on every machine (the released code read /usr/share/dict/words)."""
    spec = importlib.util.find_spec("reasoning_gym")  # locate, don't import: the package imports every task
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("the tokens scheme needs reasoning-gym's word list; install reasoning-gym")
    text = (Path(spec.origin).parent / "data" / "words3to10.txt").read_text()
    return frozenset(w.strip().lower() for w in text.split())


_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "fl", "gl", "gr",
           "kr", "pl", "pr", "sk", "sl", "sn", "sp", "st", "tr", "vr", "thr", "shp"]
_VOWELS = ["a", "e", "i", "o", "u"]
_CODAS = ["", "", "b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "x", "ld", "lk", "lt", "mp", "nd",
          "nk", "nt", "rd", "rk", "rn", "sk", "st"]
_CONFUSABLE = ("rn", "cl", "vv", "ii", "uu")


def _pronounceable_ok(tok: str) -> bool:
    eng = _english()
    return (4 <= len(tok) <= 8 and not any(b in tok for b in _CONFUSABLE) and tok not in eng
            and tok[:4] not in eng and tok[-4:] not in eng)


@lru_cache(maxsize=4)
def token_pool(size: int = 300, seed: int = 0) -> tuple[str, ...]:
    """Pronounceable nonsense tokens, rejected when a real word is the token or its length-4 prefix or
    suffix (sub-word leakage, Appendix A.1). Seed-independent of the episode: episodes shuffle it."""
    rng = random.Random(seed)
    pool: list[str] = []
    seen: set[str] = set()
    for _ in range(size * 200):
        if len(pool) == size:
            break
        tok = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                      for _ in range(rng.choice([1, 2, 2])))
        if tok not in seen and _pronounceable_ok(tok):
            seen.add(tok)
            pool.append(tok)
    return tuple(pool)
