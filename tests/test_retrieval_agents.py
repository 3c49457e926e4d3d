"""The depth MDP and its agents: hand-computed rewards, and the paper's adaptation claims in miniature
(section 3.2): stop at once under a perfect scorer, go deep under a random one; BoR reward goes deeper
than the F1 ablation when the scorer is weak."""

import math

import numpy as np
import pytest

from smith.pool.retrieval import DQNAgent, FixedK, QLearningAgent, Ranking, shortlist_outcome

N = 30


def _perfect(n, rng):
    """A perfect scorer: the one relevant tool scores highest, the others below it at random."""
    out = []
    for _ in range(n):
        s = rng.random(N) * 0.5
        rel = int(rng.integers(N))
        s[rel] = 1.0
        out.append(Ranking.from_scores(s, [rel]))
    return out


def _random(n, rng):
    """A scorer with no signal: the relevant tool's rank is uniform."""
    return [Ranking.from_scores(rng.random(N), [int(rng.integers(N))]) for _ in range(n)]


def test_ranking_rewards_hand_computed():
    r = Ranking.from_scores([0.1, 0.9, 0.5, 0.3, 0.2, 0.0, 0.05, 0.4, 0.6, 0.7], relevant=[8])  # 0.6 is 3rd
    assert r.N == 10 and r.R == 1 and r.first_hit == 3
    assert list(r.order[:3]) == [1, 9, 8]
    assert r.stop_reward(2) == 0.0
    assert r.stop_reward(3) == pytest.approx(math.log2(10 / 3))  # -log2 P_rand(10, 1, 3)
    assert r.stop_reward(3, "f1") == pytest.approx(2 / 4)  # F1 = 2/(K+1) at recall 1
    assert shortlist_outcome(r, 5) == {"depth": 5, "hit": 1.0, "p_rand": 0.5}
    two = Ranking.from_scores([3, 2, 1, 0], relevant=[0, 3])
    assert two.stop_reward(1, "f1") == pytest.approx(2 * 1 / (1 + 2))  # 2h/(k+R)
    assert two.stop_reward(1) == pytest.approx(-math.log2(0.5))  # P_rand(4, 2, 1) = 1/2
    with pytest.raises(ValueError, match="reward 'x' not found"):
        two.stop_reward(1, "x")


def test_features_see_only_examined_scores():
    rng = np.random.default_rng(1)
    r = Ranking.from_scores(rng.random(50), [3])
    f1 = r.features(1)
    assert f1[3] == 0.0 and f1[4] == 0.0  # nothing below the top seen yet
    assert f1[6] == pytest.approx(math.log2(50) / 10)  # BoR ceiling at depth 1
    assert r.unroll(10)[0].shape == (10, 8)
    assert len(r.unroll(500)[1]) == 50  # never past the registry


def test_fixed_k_clips_to_registry_and_cap():
    r = Ranking.from_scores([1.0, 2.0, 3.0], [0])
    assert FixedK(5).depth(r, max_depth=100) == 3
    assert FixedK(5).depth(r, max_depth=2) == 2
    with pytest.raises(ValueError, match="K >= 1"):
        FixedK(0)


def _mean_depth_and_coverage(agent, rankings):
    depths = [agent.depth(r, N) for r in rankings]
    hits = [r.hits_at(d) > 0 for r, d in zip(rankings, depths, strict=True)]
    return float(np.mean(depths)), float(np.mean(hits))


def test_q_learning_stops_early_under_a_perfect_scorer_and_goes_deeper_under_a_random_one():
    rng = np.random.default_rng(0)
    perfect_agent = QLearningAgent(max_depth=N).fit(_perfect(120, rng), epochs=8)
    depth, coverage = _mean_depth_and_coverage(perfect_agent, _perfect(100, rng))
    assert depth == 1.0 and coverage == 1.0
    random_agent = QLearningAgent(max_depth=N).fit(_random(200, rng), epochs=8)
    depth_r, coverage_r = _mean_depth_and_coverage(random_agent, _random(200, rng))
    # optimum of E[reward] = (k/N) log2(N/k) - 0.01 (k - 1) is k ~ 9 for N = 30
    assert depth_r >= 5
    assert coverage_r > 0.15
    f1_agent = QLearningAgent(reward="f1", max_depth=N).fit(_random(200, rng), epochs=8)
    depth_f1, _ = _mean_depth_and_coverage(f1_agent, _random(200, rng))
    assert depth_f1 < depth_r  # F1 pays 2/(k+1): depth awareness without chance correction stays shallow


def test_q_agent_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(2)
    agent = QLearningAgent(max_depth=N).fit(_random(60, rng), epochs=3)
    agent.save(tmp_path / "q.json")
    again = QLearningAgent.load(tmp_path / "q.json")
    probe = _random(30, rng)
    assert [agent.depth(r, N) for r in probe] == [again.depth(r, N) for r in probe]


def test_dqn_adapts_depth_to_scorer_quality(tmp_path):
    rng = np.random.default_rng(3)
    perfect = DQNAgent(max_depth=N, seed=0).fit(_perfect(60, rng), updates=300, batch_size=64)
    random_ = DQNAgent(max_depth=N, seed=0).fit(_random(60, rng), updates=300, batch_size=64)
    d_perfect, cov = _mean_depth_and_coverage(perfect, _perfect(60, rng))
    d_random, _ = _mean_depth_and_coverage(random_, _random(60, rng))
    assert d_perfect <= 1.5 and cov >= 0.95
    assert d_random > d_perfect + 2
    random_.save(tmp_path / "dqn.pt")
    probe = _random(20, rng)
    assert [random_.depth(r, N) for r in probe] == [DQNAgent.load(tmp_path / "dqn.pt").depth(r, N) for r in probe]
