"""Relabeling (section 4.3, Appendix A.1 Table 2, Appendix C): one random label per latent element, and the
recipe draw, both deterministic in the repetition seed, so seed i names the world of released row i."""

from __future__ import annotations

import random
import string

from smith.evals.lomekwi.parse import ARTICLES, FILLERS
from smith.evals.lomekwi.words import token_pool

SCHEMES = ("tokens", "letter", "alnum")


def _edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


_ALNUM = string.ascii_letters + string.digits


def relabel(elements: list[str], seed: int, scheme: str = "letter", min_dist: int = 3,
            fold_case: bool = False, pool_size: int = 300) -> dict[str, str]:
    """One uniformly random label per latent element, deterministic in `seed` (the repetition index).

    letter: distinct lowercase letters; alnum: [a-zA-Z0-9]{4,8} at pairwise edit distance >= min_dist (the
    released draw); with `fold_case` (labels matched ignoring case, `Rules.fold_case`) the distance is taken
    after case folding and article/filler words are skipped, so no two labels collide once case is ignored;
    tokens: the pronounceable pool of `pool_size` tokens (the released Lomekwi world uses 300, Deep Lomekwi
    600), shuffled, greedy at edit distance >= min_dist. The letter scheme reproduces the released logs' labels
    exactly.
    """
    rng = random.Random(seed * 7919 + 13)
    if scheme == "letter":
        if len(elements) > 26:
            raise ValueError(f"the letter scheme labels at most 26 elements, got {len(elements)}; use scheme=tokens")
        letters = list(string.ascii_lowercase)
        rng.shuffle(letters)
        return dict(zip(elements, letters, strict=False))
    chosen: list[str] = []
    if scheme == "alnum":
        for _ in range(len(elements) * 5000):
            if len(chosen) == len(elements):
                break
            tok = "".join(rng.choice(_ALNUM) for _ in range(rng.randint(4, 8)))
            if not fold_case:
                if all(_edit_distance(tok, c) >= min_dist for c in chosen):
                    chosen.append(tok)
                continue
            folded = tok.casefold()
            if folded in ARTICLES | FILLERS:
                continue
            if all(_edit_distance(folded, c.casefold()) >= min_dist for c in chosen):
                chosen.append(tok)
    elif scheme == "tokens":
        pool = list(token_pool(pool_size))
        rng.shuffle(pool)
        for tok in pool:
            if all(_edit_distance(tok, c) >= min_dist for c in chosen):
                chosen.append(tok)
            if len(chosen) == len(elements):
                break
    else:
        raise ValueError(f"unknown relabeling scheme {scheme!r}; known: {', '.join(SCHEMES)}")
    if len(chosen) < len(elements):
        raise ValueError(f"could not draw {len(elements)} {scheme} labels at edit distance {min_dist}; lower min_dist")
    return dict(zip(elements, chosen, strict=True))


def recipe_indices(seed: int, n_types: int) -> tuple[int, int]:
    """The recipe: one unordered pair of distinct shard types, deterministic in the relabel seed."""
    if n_types < 2:
        raise ValueError(f"a recipe needs at least 2 shard types, got n_types={n_types}")
    a, b = random.Random(seed * 2654435761 + 7).sample(range(n_types), 2)
    return (min(a, b), max(a, b))
