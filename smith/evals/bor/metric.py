"""Bits-over-Random (BoR paper, ../shared/seeds/001_b84c5ac8cb1b902c.txt, section 2.1).

BoR = log2(P_obs / P_rand), aggregated over queries first: P_obs is the fraction of queries whose
shortlist holds a relevant tool and P_rand the mean chance baseline, then one log ratio (docs/architecture.md,
"Facts from released code") — not the mean of per-query log ratios, which is -inf as soon as one query misses and
otherwise overweights deep, cheap-to-hit queries. Edge cases of the ratio:

- 0/0 (no hits, and no chance to hit: every shortlist empty or no relevant tools) -> 0 bits, as good as chance;
- x/0, x > 0 (hits where chance is zero; impossible for consistent inputs) -> +inf;
- 0/x, x > 0 (never hit although chance could have) -> -inf.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from smith.pool.retrieval.chance import bor_ceiling, p_rand

__all__ = ["bits_over_random", "bor_ceiling", "bor_interval", "log_ratio_bits", "p_rand", "per_query_bits"]


def log_ratio_bits(p_obs: float, p_chance: float) -> float:
    """log2(p_obs / p_chance) with the edge cases of the module docstring."""
    if p_obs < 0 or p_chance < 0:
        raise ValueError(f"rates must be >= 0; got P_obs={p_obs}, P_rand={p_chance}")
    if p_chance == 0:
        return 0.0 if p_obs == 0 else float("inf")
    if p_obs == 0:
        return float("-inf")
    return float(np.log2(p_obs / p_chance))


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


def bor_interval(
    hits: Sequence[float], p_rands: Sequence[float], n_resamples: int = 2000, seed: int = 0
) -> dict[str, float]:
    """Aggregate BoR with a 95% percentile bootstrap interval over queries (value, se, lo, hi).

    A resample with no hits is -inf bits, so the percentiles are read off the sorted resamples without
    interpolation (numpy's "inverted_cdf"), and se is taken over the finite resamples.
    """
    h, p = _check(hits, p_rands)
    idx = np.random.default_rng(seed).integers(0, len(h), size=(n_resamples, len(h)))
    stats = np.array(
        [log_ratio_bits(float(hm), float(pm)) for hm, pm in zip(h[idx].mean(1), p[idx].mean(1), strict=True)]
    )
    finite = stats[np.isfinite(stats)]
    lo, hi = np.quantile(stats, [0.025, 0.975], method="inverted_cdf")
    return {
        "value": bits_over_random(h, p),
        "se": float(np.std(finite, ddof=1)) if len(finite) > 1 else float("nan"),
        "lo": float(lo),
        "hi": float(hi),
    }
