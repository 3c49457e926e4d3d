"""Task spaces on hand-made scores (003, Eq. 3-4 and 9, B.3, C.2, D.1)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from smith.evals.lots import spaces


def test_aggregate_is_the_mean_over_requests_that_expose_the_tool():
    scores = [{"A": 1.0, "B": 2.0}, {"A": 3.0}, {"A": -1.0, "C": 0.5}]
    assert spaces.aggregate(scores) == {"A": 1.0, "B": 2.0, "C": 0.5}  # B's absences are not zeros


def test_rank_breaks_ties_by_name_and_top_k_keeps_only_tools_with_evidence():
    agg = {"Solver": 0.2, "Calculator": 0.5, "Barcode": 0.2, "TableQuery": 0.5}
    assert spaces.rank(agg) == ["Calculator", "TableQuery", "Barcode", "Solver"]
    assert spaces.top_k(agg, 3) == ["Calculator", "TableQuery", "Barcode"]
    assert spaces.top_k({"A": 0.1}, 4) == ["A"]  # |E| = min(K, |A|)
    assert spaces.top_k(agg, 0) == []


def test_budget_is_the_smallest_k_with_the_best_fitting_accuracy():
    assert spaces.select_budget({1: 0.01, 2: 0.0, 3: 0.72, 4: 0.53, 15: 0.72}) == 3  # fx_settle-like (Table 7)
    assert spaces.select_budget({1: 0.99, 2: 0.99, 15: 0.99}) == 1
    with pytest.raises(ValueError):
        spaces.select_budget({})


def test_ema_initialises_updates_and_leaves_unexposed_tools_alone():
    running = {"A": 1.0, "C": -0.4}
    new = spaces.ema_update(running, {"A": 0.0, "B": 2.0}, alpha=0.3)
    assert new == pytest.approx({"A": 0.7, "B": 2.0, "C": -0.4})  # 0.3*0 + 0.7*1; B initialised; C unchanged
    assert running == {"A": 1.0, "C": -0.4}
    with pytest.raises(ValueError):
        spaces.ema_update(running, {}, alpha=0.0)


def test_task_space_updates_persist_and_reload(tmp_path):
    space = spaces.TaskSpace("fx_settle", k=2, alpha=0.3)
    space.update([{"DocRetrieve": 1.2, "Calculator": 0.4, "Barcode": 0.1}, {"DocRetrieve": 0.8}])
    assert space.tools == ["DocRetrieve", "Calculator"] and space.running["DocRetrieve"] == pytest.approx(1.0)
    space.update([{"ExchangeRate": 2.0, "Calculator": 0.0}])
    assert space.running["Calculator"] == pytest.approx(0.7 * 0.4)
    assert space.tools == ["ExchangeRate", "DocRetrieve"]  # a tool outside the space can enter
    space.save(tmp_path)
    again = spaces.TaskSpace.load(tmp_path, "fx_settle")
    assert again == space
    assert spaces.load_spaces(tmp_path) == {"fx_settle": space}
    with pytest.raises(FileNotFoundError, match="fit it first"):
        spaces.TaskSpace.load(tmp_path, "no_tool")


def test_menus_under_a_serving_cap_explore_with_probability_epsilon():
    registry = [f"T{i:02d}" for i in range(20)]
    space = spaces.TaskSpace("t", k=3)
    rng = random.Random(0)
    first = space.menu(registry, rng, cap=5)
    assert len(first) == 5 and set(first) <= set(registry)
    assert space.menu(registry, rng) == registry  # no cap: the first batch sees the registry
    space.update([{"T03": 1.0, "T07": 0.5, "T11": 0.2, "T12": 0.1}])
    assert space.menu(registry, rng, cap=5, epsilon=0.0) == ["T03", "T07", "T11"]
    explored = space.menu(registry, rng, cap=5, epsilon=1.0)
    assert explored[:3] == ["T03", "T07", "T11"] and len(explored) == 5 and len(set(explored)) == 5
    n = sum(len(space.menu(registry, rng, cap=5, epsilon=0.25)) > 3 for _ in range(2000))
    assert 400 < n < 600  # explored with probability 0.25


def _bag(texts: list[str]) -> np.ndarray:
    return np.array([[t.count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts], dtype=float)


def test_routing_opens_a_new_task_for_an_unmatched_request():
    router = spaces.ThresholdRouter(_bag, tau=0.9)
    tasks = router.route(["aaaa bbb", "aaab bbb", "zzzz yyy", "aaaa bbbb", "zzz yyyy"])
    assert tasks == ["task-0", "task-0", "task-1", "task-0", "task-1"]
    assert spaces.route_by_metadata(["fx_settle", "no_tool"]) == ["fx_settle", "no_tool"]


def test_kmeans_recovers_separated_tasks():
    rng = np.random.default_rng(0)
    centres = np.eye(3) * 10
    points = np.concatenate([c + rng.normal(0, 0.1, (8, 3)) for c in centres])
    labels = spaces.kmeans_tasks(points, 3, seed=0)
    groups = [set(labels[i * 8:(i + 1) * 8]) for i in range(3)]
    assert all(len(g) == 1 for g in groups) and len(set.union(*groups)) == 3
