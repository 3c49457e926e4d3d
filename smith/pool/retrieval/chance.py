"""The chance baseline of a shortlist: how often K tools drawn at random hold a relevant one.

BoR paper (../shared/seeds/001_b84c5ac8cb1b902c.txt), section 2.1: P_rand is hypergeometric,
P_rand(N, R, K) = 1 - C(N-R, K) / C(N, K), which is K/N for a single relevant tool (R = 1). Its
negative log is the BoR ceiling: the most bits a depth-K shortlist can earn over chance. The depth
agent needs both as state and reward, so they live here in the pool; smith.evals.bor re-exports them.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

_PRODUCT_TERMS = 10_000


def p_rand(N: int, R: int, K: int) -> float:
    """P(at least one of R relevant tools among K drawn without replacement from N).

    Computed in log space, so registries of any size do not overflow: a sum of log1p terms over
    min(R, K) factors (accurate to rounding even when P_rand is tiny), or log-gamma differences when
    that product would be long; exact K/N for R = 1. Returns 0 for K = 0 or R = 0 and 1 when
    K > N - R (a miss is impossible).
    """
    N, R, K = int(N), int(R), int(K)
    if N < 1 or not 0 <= R <= N or not 0 <= K <= N:
        raise ValueError(f"p_rand needs N >= 1, 0 <= R <= N, 0 <= K <= N; got N={N}, R={R}, K={K}")
    if K == 0 or R == 0:
        return 0.0
    if R == 1:
        return K / N
    if K > N - R:
        return 1.0
    # C(N-R, K) / C(N, K) = prod_{i<m} (1 - b / (N - i)) with (m, b) = (R, K) or (K, R), whichever m is smaller
    m, b = min(R, K), max(R, K)
    if m <= _PRODUCT_TERMS:
        log_miss = float(np.log1p(-b / (N - np.arange(m))).sum())
    else:
        log_miss = gammaln(N - R + 1) - gammaln(N - R - K + 1) - gammaln(N + 1) + gammaln(N - K + 1)
    return float(-np.expm1(log_miss))


def bor_ceiling(N: int, R: int, K: int) -> float:
    """-log2 P_rand: the bits a depth-K shortlist earns when it holds a relevant tool (section 2.2 reward)."""
    p = p_rand(N, R, K)
    if p == 0.0:
        raise ValueError(f"the BoR ceiling is undefined when P_rand = 0 (N={N}, R={R}, K={K}); use K >= 1 and R >= 1")
    return float(-np.log2(p))
