"""The chance baselines of a shortlist: what K tools drawn at random from N, R of them relevant, achieve.

BoR paper (../shared/seeds/001_b84c5ac8cb1b902c.txt), section 2.1: P_rand is hypergeometric,
P_rand(N, R, K) = 1 - C(N-R, K) / C(N, K), which is K/N for a single relevant tool (R = 1). Its
negative log is the BoR ceiling: the most bits a depth-K shortlist can earn over chance. The depth
agent needs both as state and reward, so they live here in the pool; smith.evals.bor re-exports them
with the other baselines of the reference code (repantis-ai/bits-over-random, `bor/metrics.py`): at
least m hits, the expected number of hits (lambda) and the expected recall.

The probabilities come from ratios of counts in log space rather than from log-gamma differences of
whole factorials (the reference's form), which lose about 1e-16 * log N! in the log: a relative error
near 1e-8 at N = 10^7 (p_rand falls back to log-gamma only past 10,000 product terms).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from scipy.special import gammaln, logsumexp

_PRODUCT_TERMS = 10_000


def as_count(value: object, name: str) -> int:
    """`value` as an int if it is a whole number (an int, or a float such as 600.0 read from a log).

    Counts are never truncated: 10.5 tools is a bad input, not 10 tools.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a whole number; got {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if not float(value).is_integer():
        raise ValueError(f"{name} must be a whole number; got {value!r}")
    return int(value)


def _counts(N: object, R: object, K: object, who: str) -> tuple[int, int, int]:
    N, R, K = as_count(N, "N"), as_count(R, "R"), as_count(K, "K")
    if N < 1 or not 0 <= R <= N or not 0 <= K <= N:
        raise ValueError(f"{who} needs N >= 1, 0 <= R <= N, 0 <= K <= N; got N={N}, R={R}, K={K}")
    return N, R, K


def p_rand(N: int, R: int, K: int) -> float:
    """P(at least one of R relevant tools among K drawn without replacement from N).

    Computed in log space, so registries of any size do not overflow: a sum of log1p terms over
    min(R, K) factors (accurate to rounding even when P_rand is tiny), or log-gamma differences when
    that product would be long; exact K/N for R = 1. Returns 0 for K = 0 or R = 0 and 1 when
    K > N - R (a miss is impossible). Non-integer counts raise ValueError.
    """
    N, R, K = _counts(N, R, K, "p_rand")
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


def random_success_at_least_m(N: int, R: int, K: int, m: int) -> float:
    """P(at least m of the R relevant tools among K drawn at random): the baseline when success needs m hits.

    The hypergeometric's upper tail over its whole mass, both in log space: the log probability of each
    possible count x (from max(0, K + R - N) to min(R, K)) up to one shared constant, by the exact ratio
    P(x+1)/P(x) = (R-x)(K-x) / ((x+1)(N-R-K+x+1)); the constant cancels, so no factorial is ever formed
    and no 1 - CDF cancels. m <= 0 is certain (1.0), as in the reference; m = 1 is `p_rand`.
    """
    N, R, K = _counts(N, R, K, "random_success_at_least_m")
    m = as_count(m, "m")
    if m <= 0:
        return 1.0
    if m == 1:
        return p_rand(N, R, K)
    lo, hi = max(0, K + R - N), min(R, K)
    if m > hi:
        return 0.0
    if m <= lo:
        return 1.0
    x = np.arange(lo, hi, dtype=float)
    steps = np.log(R - x) + np.log(K - x) - np.log(x + 1) - np.log(N - R - K + x + 1)
    log_mass = np.concatenate(([0.0], np.cumsum(steps)))  # counts lo..hi, up to a constant
    return float(min(1.0, np.exp(logsumexp(log_mass[m - lo :]) - logsumexp(log_mass))))


def collapse_lambda(N: int, R: int, K: int) -> float:
    """K R / N, the expected number of relevant tools in a random draw of K: 3 or more is the collapse zone,
    where P_rand is about 1 - e^-3 = 0.95 and a hit says little."""
    N, R, K = _counts(N, R, K, "collapse_lambda")
    return K * R / N


def random_recall_baseline(N: int, K: int) -> float:
    """K / N, the expected recall of a random draw of K (whatever R is): the chance floor of Recall@K."""
    N, K = as_count(N, "N"), as_count(K, "K")
    if N < 1 or not 0 <= K <= N:
        raise ValueError(f"random_recall_baseline needs N >= 1, 0 <= K <= N; got N={N}, K={K}")
    return K / N


def bor_ceiling(N: int, R: int, K: int) -> float:
    """-log2 P_rand: the bits a depth-K shortlist earns when it holds a relevant tool (section 2.2 reward).

    +inf where P_rand = 0 (K = 0 or R = 0): a hit there would be unboundedly above chance, the
    reference's reading of observed / 0.
    """
    p = p_rand(N, R, K)
    return math.inf if p == 0.0 else float(-np.log2(p))
