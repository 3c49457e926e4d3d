"""Bits-over-Random (BoR paper, ../shared/seeds/001_b84c5ac8cb1b902c.txt, section 2.1).

BoR = log2(P_obs / P_rand), aggregated over queries first: P_obs is the fraction of queries whose
shortlist holds a relevant tool and P_rand the mean chance baseline, then one log ratio (docs/architecture.md,
"Facts from released code") — not the mean of per-query log ratios, which is -inf as soon as one query misses and
otherwise overweights deep, cheap-to-hit queries. Edge cases of the ratio, as in the reference code
(repantis-ai/bits-over-random, `enrichment_factor`):

- 0/0 (no hits, and no chance to hit: every shortlist empty or no relevant tools) -> NaN, undefined: the
  comparison with chance carries no information either way;
- x/0, x > 0 (hits where chance is zero; impossible for consistent inputs) -> +inf;
- 0/x, x > 0 (never hit although chance could have) -> -inf bits (enrichment 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from smith.pool.retrieval.chance import bor_ceiling, p_rand

__all__ = [
    "bits_over_random",
    "bor_ceiling",
    "bor_interval",
    "enrichment_factor",
    "log_ratio_bits",
    "p_rand",
    "per_query_bits",
]


def enrichment_factor(observed: float, random_baseline: float) -> float:
    """observed / random_baseline, how many times better than chance, with the edge cases of the module docstring."""
    if observed < 0 or random_baseline < 0:
        raise ValueError(f"rates must be >= 0; got P_obs={observed}, P_rand={random_baseline}")
    if random_baseline == 0:
        return math.nan if observed == 0 else math.inf
    return observed / random_baseline


def log_ratio_bits(p_obs: float, p_chance: float) -> float:
    """log2(p_obs / p_chance): one bit per doubling over chance (the reference's `bits_over_random(observed, p)`)."""
    ratio = enrichment_factor(p_obs, p_chance)
    if ratio == 0:
        return -math.inf
    return ratio if not math.isfinite(ratio) else math.log2(ratio)


def _check(hits: Sequence[float], p_rands: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    h, p = np.asarray(hits, dtype=float), np.asarray(p_rands, dtype=float)
    if h.shape != p.shape or h.ndim != 1:
        raise ValueError(f"hits and p_rands must be 1-D and of one length; got shapes {h.shape} and {p.shape}")
    if len(h) == 0:
        raise ValueError("BoR of zero queries is undefined; pass at least one query")
    if not np.isin(h, (0.0, 1.0)).all() or ((p < 0) | (p > 1)).any():
        raise ValueError("hits must be 0/1 per query and p_rands probabilities in [0, 1]")
    return h, p


def bits_over_random(hits: Sequence[float], p_rands: Sequence[float]) -> float:
    """Aggregate BoR: log2(mean hit / mean P_rand) over queries (hits 0/1; p_rands per-query chance baselines)."""
    h, p = _check(hits, p_rands)
    return log_ratio_bits(float(h.mean()), float(p.mean()))


def per_query_bits(hits: Sequence[float], p_rands: Sequence[float]) -> float:
    """Mean of per-query log2(hit / P_rand): the definition BoR does *not* use, kept to show how they differ."""
    h, p = _check(hits, p_rands)
    return float(np.mean([log_ratio_bits(hq, pq) for hq, pq in zip(h, p, strict=True)]))


def percentile_indices(n_resamples: int) -> tuple[int, int]:
    """0-based positions of the 2.5th and 97.5th percentiles in `n_resamples` sorted bootstrap statistics.

    The reference's audit reads positions floor(0.025 B) and min(floor(0.975 B), B - 1): with B = 2000 the
    51st and 1951st smallest of the 2000. Integer arithmetic gives the same positions without float rounding.
    """
    if n_resamples < 1:
        raise ValueError(f"the bootstrap needs at least one resample; got {n_resamples}")
    return n_resamples * 25 // 1000, min(n_resamples * 975 // 1000, n_resamples - 1)


def bor_interval(
    hits: Sequence[float], p_rands: Sequence[float], n_resamples: int = 2000, seed: int = 0
) -> dict[str, float]:
    """Aggregate BoR with a 95% percentile bootstrap interval over queries (value, se, lo, hi).

    The ends are order statistics of the sorted resamples, at the positions the reference reads
    (`percentile_indices`; numpy's "inverted_cdf" quantile sat one position lower at both ends when 0.025 B
    is whole). A resample without hits is -inf bits and sorts first; an undefined one (0/0) is NaN and sorts
    last. se is taken over the finite resamples.
    """
    h, p = _check(hits, p_rands)
    lo_at, hi_at = percentile_indices(n_resamples)
    idx = np.random.default_rng(seed).integers(0, len(h), size=(n_resamples, len(h)))
    stats = np.sort(
        [log_ratio_bits(float(hm), float(pm)) for hm, pm in zip(h[idx].mean(1), p[idx].mean(1), strict=True)]
    )
    finite = stats[np.isfinite(stats)]
    return {
        "value": bits_over_random(h, p),
        "se": float(np.std(finite, ddof=1)) if len(finite) > 1 else float("nan"),
        "lo": float(stats[lo_at]),
        "hi": float(stats[hi_at]),
    }
