"""BoR metric: P_rand and the other chance baselines against exact fractions and scipy's hypergeometric, edge
cases (NaN, +inf, whole-number counts), aggregate vs per-query, and the bootstrap interval's order statistics."""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import hypergeom

from smith.evals.bor import (
    bits_over_random,
    bor_ceiling,
    bor_interval,
    collapse_lambda,
    enrichment_factor,
    log_ratio_bits,
    p_rand,
    per_query_bits,
    random_recall_baseline,
    random_success_at_least_m,
)
from smith.evals.bor.metric import percentile_indices


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


@pytest.mark.parametrize(("args", "bad"), [((10.5, 1, 2), "N"), ((10, 1.5, 2), "R"), ((10, 1, 2.25), "K"),
                                           ((10, 1, "2"), "K"), ((10, True, 2), "R"), ((float("nan"), 1, 1), "N")])
def test_counts_must_be_whole_numbers_not_truncated(args, bad):
    for fn in (p_rand, bor_ceiling, collapse_lambda):
        with pytest.raises(ValueError, match=f"{bad} must be a whole number"):
            fn(*args)
    with pytest.raises(ValueError, match="m must be a whole number"):
        random_success_at_least_m(10, 2, 3, 1.5)
    # whole numbers of any numeric type are counts: 10.0 from a JSON log, numpy integers from arrays
    assert p_rand(10.0, 1, 2) == p_rand(np.int64(10), np.int32(1), 2) == 0.2


def test_ceiling_is_minus_log2_of_chance():
    assert bor_ceiling(100, 1, 5) == pytest.approx(math.log2(20))
    # P_rand = 0 (nothing shown, or nothing relevant): a hit would be unboundedly above chance
    assert bor_ceiling(100, 1, 0) == math.inf and bor_ceiling(100, 0, 5) == math.inf


def test_bits_over_random_hand_computed():
    # P_obs = 3/4, mean P_rand = 0.15 -> log2(5)
    assert bits_over_random([1, 0, 1, 1], [0.1, 0.1, 0.2, 0.2]) == pytest.approx(math.log2(5))
    # exactly chance
    assert bits_over_random([1, 0], [0.5, 0.5]) == 0.0


def test_enrichment_and_log_ratio_edge_cases():
    assert enrichment_factor(0.5, 0.125) == 4.0 and log_ratio_bits(0.5, 0.125) == 2.0
    assert math.isnan(enrichment_factor(0.0, 0.0)) and math.isnan(log_ratio_bits(0.0, 0.0))  # 0/0: undefined
    assert enrichment_factor(0.1, 0.0) == math.inf and log_ratio_bits(0.1, 0.0) == math.inf
    assert enrichment_factor(0.0, 0.2) == 0.0 and log_ratio_bits(0.0, 0.2) == -math.inf
    with pytest.raises(ValueError, match=">= 0"):
        enrichment_factor(-0.1, 0.5)


def test_bits_over_random_edge_cases():
    assert math.isnan(bits_over_random([0, 0], [0.0, 0.0]))  # 0/0: no hits and no chance of any, undefined
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
    assert math.isnan(per_query_bits([1, 0], [0.5, 0.0]))  # one undefined query makes the mean undefined


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


def _tail(N: int, R: int, K: int, m: int) -> float:
    """P(at least m relevant among K of N): 1 - the lower tail, an exact fraction of binomials, rounded once."""
    below = sum(math.comb(R, x) * math.comb(N - R, K - x) for x in range(min(max(m, 0), min(R, K) + 1)))
    return float(1 - Fraction(below, math.comb(N, K)))


def test_at_least_m_hand_values():
    assert random_success_at_least_m(5, 2, 3, 2) == pytest.approx(3 / 10, rel=1e-14)  # C(2,2) C(3,1) / C(5,3)
    # N=10, R=6, K=8: at least 4 relevant are always drawn; P(exactly 4) = C(6,4) C(4,4) / C(10,8) = 15/45
    assert random_success_at_least_m(10, 6, 8, 4) == 1.0
    assert random_success_at_least_m(10, 6, 8, 5) == pytest.approx(2 / 3, rel=1e-14)
    assert random_success_at_least_m(10, 6, 8, 7) == 0.0  # more than min(R, K) = 6
    assert random_success_at_least_m(10, 6, 8, 0) == random_success_at_least_m(10, 6, 8, -2) == 1.0
    assert random_success_at_least_m(370, 3, 7, 1) == p_rand(370, 3, 7)
    # the reference walkthrough's example: N=600, R=6, K=40 is 34.0% for one hit and 5.5% for two
    assert random_success_at_least_m(600, 6, 40, 1) == pytest.approx(0.340, abs=5e-4)
    assert random_success_at_least_m(600, 6, 40, 2) == pytest.approx(0.0548, abs=5e-5)


@pytest.mark.parametrize("N", [2, 7, 30, 120, 600])
def test_at_least_m_matches_exact_fractions_and_scipy(N):
    for R in sorted({0, 1, 2, 5, N // 2, N - 1, N} & set(range(N + 1))):
        for K in sorted({0, 1, 3, 10, N // 3, N - 2, N} & set(range(N + 1))):
            top = min(R, K)
            for m in sorted({0, 1, 2, 3, top // 3, top // 2, top - 1, top, top + 1} - {-1}):
                got = random_success_at_least_m(N, R, K, m)
                assert got == pytest.approx(_tail(N, R, K, m), rel=1e-12, abs=1e-300), (N, R, K, m)
                assert got == pytest.approx(hypergeom(N, R, K).sf(m - 1), rel=1e-9, abs=1e-15), (N, R, K, m)


def test_at_least_m_stays_exact_where_log_gamma_drifts():
    # N = 10^7: log-gamma differences of whole factorials (the reference's form) are off by ~1e-8 here
    N, R, K = 10_000_000, 11_000, 11_000
    assert random_success_at_least_m(N, R, K, 3) == pytest.approx(_tail(N, R, K, 3), rel=1e-12)
    # a tiny tail: no 1 - CDF cancellation
    assert random_success_at_least_m(1000, 5, 10, 4) == pytest.approx(_tail(1000, 5, 10, 4), rel=1e-12)


def test_lambda_and_recall_baseline():
    assert collapse_lambda(400_000, 20_000, 100) == 5.0  # the reference's case 2: the collapse zone
    assert collapse_lambda(600, 6, 40) == pytest.approx(0.4)
    assert random_recall_baseline(100, 10) == 0.1 and random_recall_baseline(7, 0) == 0.0
    with pytest.raises(ValueError, match="0 <= K <= N"):
        random_recall_baseline(10, 11)
    with pytest.raises(ValueError, match="K must be a whole number"):
        random_recall_baseline(10, 2.5)
    with pytest.raises(ValueError, match="collapse_lambda needs"):
        collapse_lambda(10, 11, 1)


def test_reference_readme_numbers():
    # README of repantis-ai/bits-over-random: N=400k, R=20k, K=100 -> P_rand ~0.994, BoR of a perfect 1.0 ~0.0086
    p = p_rand(400_000, 20_000, 100)
    assert p == pytest.approx(0.9941, abs=5e-5) and log_ratio_bits(1.0, p) == pytest.approx(0.0086, abs=5e-5)
    assert p_rand(400_000, 20_000, 10) == pytest.approx(0.401, abs=5e-4)
    assert p_rand(10_000, 100, 300) == pytest.approx(0.953, abs=5e-4)  # lambda = 3: about 1 - e^-3


def test_percentile_positions_are_the_references():
    # the reference reads sorted resamples at floor(0.025 B) and min(floor(0.975 B), B - 1), from 0
    assert percentile_indices(2000) == (50, 1950) and percentile_indices(40) == (1, 39)
    assert percentile_indices(1) == (0, 0)
    for B in range(1, 5001):
        assert percentile_indices(B) == (int(0.025 * B), min(int(0.975 * B), B - 1)), B
    with pytest.raises(ValueError, match="at least one resample"):
        percentile_indices(0)


def test_bootstrap_interval_reads_those_order_statistics():
    # redo the resampling by hand (same generator and seed) and read the 2nd and 40th of 40 sorted statistics;
    # numpy's inverted_cdf quantile, used before, read the 1st and 39th
    hits = np.array([1, 1, 0, 1, 0, 0, 1, 1, 0, 1], dtype=float)
    prs = np.array([0.1, 0.2, 0.3, 0.1, 0.2, 0.3, 0.1, 0.2, 0.3, 0.4])
    idx = np.random.default_rng(3).integers(0, 10, size=(40, 10))
    stats = sorted(math.log2(hits[i].mean() / prs[i].mean()) for i in idx)
    ci = bor_interval(hits, prs, n_resamples=40, seed=3)
    assert (ci["lo"], ci["hi"]) == (stats[1], stats[39])
    assert ci["lo"] != stats[0]
