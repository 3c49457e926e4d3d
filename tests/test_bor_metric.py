"""BoR metric: P_rand against scipy's hypergeometric, edge cases, aggregate vs per-query, interval."""

import math

import numpy as np
import pytest
from scipy.stats import hypergeom

from smith.evals.bor import bits_over_random, bor_ceiling, bor_interval, p_rand, per_query_bits


@pytest.mark.parametrize("N", [1, 2, 7, 20, 100, 370, 3251])
def test_p_rand_matches_hypergeometric(N):
    for R in sorted({0, 1, 2, 5, N // 2, N} & set(range(N + 1))):
        for K in sorted({0, 1, 2, 5, 10, N // 3, N - 1, N} & set(range(N + 1))):
            expected = hypergeom(N, R, K).sf(0)  # P(X >= 1): population N, R successes, K draws
            assert p_rand(N, R, K) == pytest.approx(expected, rel=1e-9, abs=1e-12), (N, R, K)


def test_p_rand_single_relevant_is_k_over_n_exactly():
    assert p_rand(370, 1, 7) == 7 / 370
    assert p_rand(10, 1, 10) == 1.0


def test_p_rand_stable_for_huge_registries():
    # C(10^6, 500) overflows floats; log-gamma does not. Hand value: 1 - prod_{i<K} (N-R-i)/(N-i)
    N, R, K = 1_000_000, 3, 500
    direct = 1 - math.prod((N - R - i) / (N - i) for i in range(K))
    assert p_rand(N, R, K) == pytest.approx(direct, rel=1e-9)


@pytest.mark.parametrize("args", [(0, 0, 0), (10, 11, 1), (10, 1, 11), (10, -1, 2), (10, 1, -1)])
def test_p_rand_rejects_impossible_arguments(args):
    with pytest.raises(ValueError, match="p_rand needs"):
        p_rand(*args)


def test_ceiling_is_minus_log2_of_chance():
    assert bor_ceiling(100, 1, 5) == pytest.approx(math.log2(20))
    with pytest.raises(ValueError, match="undefined"):
        bor_ceiling(100, 1, 0)


def test_bits_over_random_hand_computed():
    # P_obs = 3/4, mean P_rand = 0.15 -> log2(5)
    assert bits_over_random([1, 0, 1, 1], [0.1, 0.1, 0.2, 0.2]) == pytest.approx(math.log2(5))
    # exactly chance
    assert bits_over_random([1, 0], [0.5, 0.5]) == 0.0


def test_bits_over_random_edge_cases():
    assert bits_over_random([0, 0], [0.0, 0.0]) == 0.0  # 0/0: no hits and no chance of any
    assert bits_over_random([0, 0], [0.1, 0.3]) == -math.inf  # 0/x: never hit
    assert bits_over_random([1, 0], [0.0, 0.0]) == math.inf  # x/0: inconsistent input, reported as +inf
    with pytest.raises(ValueError, match="zero queries"):
        bits_over_random([], [])
    with pytest.raises(ValueError, match="one length"):
        bits_over_random([1], [0.1, 0.2])
    with pytest.raises(ValueError, match="0/1"):
        bits_over_random([0.5], [0.1])


def test_aggregate_and_per_query_definitions_differ():
    hits, prs = [1, 1], [0.5, 0.125]
    # aggregate: log2(1 / 0.3125) = 1.678...; per query: (log2 2 + log2 8) / 2 = 2
    assert bits_over_random(hits, prs) == pytest.approx(math.log2(1 / 0.3125))
    assert per_query_bits(hits, prs) == pytest.approx(2.0)
    # one miss sends the per-query mean to -inf while the aggregate stays finite
    assert per_query_bits([1, 0], [0.5, 0.5]) == -math.inf
    assert bits_over_random([1, 0], [0.25, 0.25]) == pytest.approx(1.0)


def test_bootstrap_interval_brackets_the_value():
    rng = np.random.default_rng(0)
    hits = (rng.random(200) < 0.6).astype(float)
    prs = np.full(200, 0.05)
    ci = bor_interval(hits, prs, n_resamples=500)
    assert ci["value"] == pytest.approx(bits_over_random(hits, prs))
    assert ci["lo"] < ci["value"] < ci["hi"]
    # no sampling noise: all hits at a constant chance level
    flat = bor_interval([1.0] * 10, [0.25] * 10, n_resamples=200)
    assert flat["lo"] == flat["hi"] == pytest.approx(2.0)


def test_p_rand_log_gamma_branch_agrees_with_hypergeometric():
    # min(R, K) above the product cut-off takes the log-gamma path
    N, R, K = 200_000, 20_000, 12_000
    assert p_rand(N, R, K) == pytest.approx(hypergeom(N, R, K).sf(0), rel=1e-9)
    N, R, K = 10_000_000, 11_000, 11_000
    assert p_rand(N, R, K) == pytest.approx(hypergeom(N, R, K).sf(0), rel=1e-6)


def test_bootstrap_interval_with_resamples_that_never_hit():
    ci = bor_interval([1, 0, 0, 0, 0, 0], [0.1] * 6, n_resamples=300)
    assert ci["value"] == pytest.approx(math.log2((1 / 6) / 0.1))
    assert ci["lo"] == -math.inf and ci["hi"] > ci["value"]
