"""Appendix B costs, the C/R/E/S/G decomposition, the importer on real released rows (metric values
computed by hand below), and the export/import round trip."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from smith.evals.lomekwi import costs
from smith.evals.lomekwi.agents import ScriptedAgent, play
from smith.evals.lomekwi.env import budget_for
from smith.evals.lomekwi.episode import LomekwiEpisode
from smith.evals.lomekwi.importer import derive_facts, episode_key, export_row, import_row, read_log
from smith.evals.lomekwi.metrics import count, decompose, identity_residual, summarize
from smith.evals.lomekwi.world import make_world
from smith.models.base import Generation, SamplingParams

FIXTURES = Path(__file__).parent / "fixtures" / "lomekwi"
RELEASE = Path(__file__).resolve().parents[2] / "shared" / "data" / "lomekwi_release" / "runs" / "lomekwi"

# ------------------------------------------------------------------------------------------ Appendix B


def test_expected_costs_by_hand():
    assert costs.harmonic(4) == pytest.approx(25 / 12)
    assert costs.expected_grind(9) == pytest.approx(9 * 7129 / 2520 + 9)
    # (T, n) = (4, 10): collect 4 * 25/12, combine (C(4,2) + 1) / 2 = 3.5, open 2n = 20
    assert costs.expected_build(10, 4) == pytest.approx(25 / 3 + 3.5 + 20)
    assert costs.expected_combine(2) == 1.0 and costs.expected_combine(3) == 2.0


def test_appendix_b_success_probabilities():
    assert costs.p_collect_all(10, 37) == pytest.approx(0.809, abs=5e-4)  # 10 keys within B - n = 37 draws
    # 4 shards within 21 draws: the paper prints ~99.1%; the sum is 0.99049 (it rounds to 99.0%)
    assert costs.p_collect_all(4, 21) == pytest.approx(0.9905, abs=5e-5)
    assert costs.p_collect_all(3, 2) == 0.0 and costs.p_collect_all(1, 1) == 1.0


def test_threshold_map_builds_in_the_swept_region_only_where_cheaper():
    grid = costs.threshold_map([9, 10, 11], [2, 3, 4])
    assert grid.shape == (3, 3) and grid.all()  # the paper sweeps where building is optimal
    assert not costs.build_preferred(3, 2)  # E[build] = 3 + 1 + 6 = 10 > E[grind] = 3 H_3 + 3 = 8.5
    assert costs.build_preferred(4, 2)  # 10 + 2 > ... : E[build] = 12 < E[grind] = 4 H_4 + 4 = 12.33


def test_threshold_map_plot(tmp_path):
    path = costs.plot_threshold_map(tmp_path / "map.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -------------------------------------------------------------------------------------------- metrics


def _rec(held, built, won):
    return {"held": held, "built": built, "won": won, "dropped_both": held}


def test_decomposition_by_hand():
    rows = [_rec(1, 1, 1), _rec(1, 1, 0), _rec(1, 0, 1), _rec(1, 0, 0), _rec(0, 0, 1), _rec(0, 0, 0)]
    c = count(rows)
    d = decompose(c)
    assert (d["N"], d["C"], d["R"], d["E"], d["S"], d["G"]) == (6, 4 / 6, 2 / 4, 1 / 2, 3 / 6, 2 / 6)
    assert d["build_rate"] == pytest.approx(d["C"] * d["R"])
    assert identity_residual(c) == 0
    assert Fraction(c.win, c.n) == Fraction(1, 2) == Fraction(4, 6) * Fraction(2, 4) * Fraction(1, 2) + Fraction(2, 6)


def test_undefined_ratios_are_nan_not_errors():
    d = decompose(count([_rec(0, 0, 0), _rec(0, 0, 1)]))
    assert math.isnan(d["R"]) and math.isnan(d["E"]) and d["S"] == 0.5 and d["G"] == 0.5
    assert all(math.isnan(x) for x in d["R_ci"])


def test_building_without_holding_is_rejected():
    with pytest.raises(ValueError, match="without holding"):
        count([{"key": "k", "held": False, "built": True, "won": True}])


@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), max_size=60))
def test_identity_holds_exactly_on_any_consistent_episodes(flags):
    rows = [_rec(h or b, b, w) for h, b, w in flags]  # build implies hold
    assert identity_residual(count(rows)) == 0


# ------------------------------------------------------------------------------- importer on real rows

# Per row, read off its observations by hand: the index of the pickup that completed the recipe, the
# index of the "fuse into" observation, the doors opened, the stop rule that fired.
EXPECTED_ROWS = {
    ("Qwen/Qwen3.5-27B", 128): dict(held=True, hold_turn=3, built=True, build_turn=34, won=True, total_actions=30,
                                    pickups=11, stop_reason="solved"),
    ("Qwen/Qwen3.5-27B", 9): dict(held=False, hold_turn=None, built=False, build_turn=None, won=True, total_actions=32,
                                  pickups=11, stop_reason="solved"),
    ("Qwen/Qwen3.5-27B", 18): dict(held=True, hold_turn=5, built=True, build_turn=8, won=False, total_actions=41,
                                   pickups=10, stop_reason="out_of_budget"),
    ("Qwen/Qwen3.5-27B", 6): dict(held=True, hold_turn=3, built=False, build_turn=None, won=False, total_actions=28,
                                  pickups=9, stop_reason="no_progress"),
    ("Qwen/Qwen3.5-2B", 5): dict(held=False, hold_turn=None, built=False, build_turn=None, won=False, total_actions=0,
                                 pickups=0, stop_reason="noop"),
    ("Qwen/Qwen3.5-2B", 167): dict(held=True, hold_turn=7, built=False, build_turn=None, won=False, total_actions=10,
                                   pickups=5, stop_reason="noop"),
    ("Qwen/Qwen3.5-4B", 40): dict(held=False, hold_turn=None, built=False, build_turn=None, won=False,
                                  total_actions=34, pickups=1, stop_reason="no_progress"),
    ("claude-haiku-4-5-20251001", 155): dict(held=True, hold_turn=4, built=True, build_turn=24, won=False,
                                             total_actions=25, pickups=12, stop_reason="noop"),
    ("claude-haiku-4-5-20251001", 49): dict(held=True, hold_turn=10, built=True, build_turn=20, won=False,
                                            total_actions=31, pickups=10, stop_reason="no_progress"),
    ("claude-opus-4-8", 84): dict(held=True, hold_turn=8, built=True, build_turn=9, won=True, total_actions=27,
                                  pickups=2, stop_reason="solved"),
    ("claude-opus-4-8", 52): dict(held=True, hold_turn=12, built=False, build_turn=None, won=True, total_actions=29,
                                  pickups=13, stop_reason="solved"),
    ("claude-sonnet-4-6", 67): dict(held=True, hold_turn=6, built=True, build_turn=27, won=True, total_actions=29,
                                    pickups=9, stop_reason="solved"),
    ("claude-sonnet-4-6", 74): dict(held=True, hold_turn=28, built=True, build_turn=41, won=False, total_actions=47,
                                    pickups=6, stop_reason="out_of_budget"),
}


def fixture_records() -> list[dict]:
    recs = []
    for path in sorted(FIXTURES.rglob("episodes.jsonl")):
        r, errors = read_log(path)
        assert errors == 0
        recs += r
    return recs


def test_importer_derives_each_rows_facts_from_its_observations():
    recs = {(r["model"], r["seed"]): r for r in fixture_records()}
    assert set(recs) == set(EXPECTED_ROWS)
    for k, expected in EXPECTED_ROWS.items():
        r = recs[k]
        assert {f: r[f] for f in expected} == expected, k
        if r["built"]:
            assert "fuse into" in r["observations"][r["build_turn"]]
            assert not any("fuse into" in o for o in r["observations"][: r["build_turn"]])
        if r["held"]:
            assert r["observations"][r["hold_turn"]].startswith("You pick up ")
    # the 4B row: both recipe types dropped, j never picked up, so "combine a j" did nothing
    row = recs[("Qwen/Qwen3.5-4B", 40)]
    assert row["dropped_both"] and not row["held"]
    assert "You combine a and j: nothing happens." in row["observations"]


def test_importer_metric_values_by_hand():
    s = summarize(fixture_records())["models"]
    # Qwen3.5-27B rows 128, 9, 18, 6: held {128, 18, 6}; built {128, 18}; won {128, 9}
    q27 = s["Qwen/Qwen3.5-27B"]
    assert (q27["N"], q27["C"], q27["R"], q27["E"], q27["S"], q27["G"], q27["build_rate"]) == (
        4, 3 / 4, 2 / 3, 1 / 2, 2 / 4, 1 / 4, 2 / 4)
    # Opus rows 84 (built, won), 52 (held, won by grinding)
    opus = s["claude-opus-4-8"]
    assert (opus["C"], opus["R"], opus["E"], opus["S"], opus["G"]) == (1.0, 1 / 2, 1.0, 1.0, 1 / 2)
    # Sonnet 67 (built, won), 74 (built, lost); Haiku 155, 49 (built, lost)
    assert [s["claude-sonnet-4-6"][m] for m in ("C", "R", "E", "S", "G")] == [1.0, 1.0, 1 / 2, 1 / 2, 0.0]
    assert [s["claude-haiku-4-5-20251001"][m] for m in ("C", "R", "E", "S", "G")] == [1.0, 1.0, 0.0, 0.0, 0.0]
    # Qwen3.5-2B: only 167 held, nothing built or won; Qwen3.5-4B: nothing held (by pickup), but dropped
    q2 = s["Qwen/Qwen3.5-2B"]
    assert (q2["C"], q2["R"], q2["S"], q2["G"]) == (1 / 2, 0.0, 0.0, 0.0) and math.isnan(q2["E"])
    q4 = s["Qwen/Qwen3.5-4B"]
    assert q4["C"] == 0.0 and math.isnan(q4["R"]) and (q4["C_dropped"], q4["R_dropped"]) == (1.0, 0.0)
    # Wilson 95% for C = 3/4 by the closed form
    z, n, p = 1.959963984540054, 4, 0.75
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert q27["C_ci"] == pytest.approx([(centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)])
    for m in s.values():
        assert m["identity_residual"] == 0.0


def test_failed_rows_are_counted_not_scored(tmp_path):
    row = json.loads((next(FIXTURES.rglob("episodes.jsonl"))).read_text().splitlines()[0])
    bad = {k: row[k] for k in ("model", "n", "n_types", "hint", "variant", "budget", "relabel_seed", "drop_seed")}
    bad["error"] = "APIError: overloaded"
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps(bad) + "\n")
    recs, errors = read_log(path)
    assert len(recs) == 1 and errors == 1


def test_inconsistent_rows_are_refused():
    row = json.loads((next(FIXTURES.rglob("episodes.jsonl"))).read_text().splitlines()[0])
    row["solved"] = not row["solved"]
    with pytest.raises(ValueError, match="inconsistent"):
        import_row(row)


# ------------------------------------------------------------------------------------------ round trip


class NoisyText:
    """A test double for an LLM's text: chatty replies around one action, some unparseable."""

    name = "noisy-double"

    def __init__(self) -> None:
        self.calls = 0

    def chat(self, conversations, tools=None, params=None):
        out = []
        for conv in conversations:
            self.calls += 1
            doors = conv[1]["content"].split("locked doors: ")[1].split(".")[0].split(", ")
            turn = len(conv) // 2
            text = ["Let me think about the vault.\n> Examine the " + doors[turn % len(doors)],
                    "I hold something now.\nPICKUP", "Hmm, not sure what to do."][turn % 3]
            if turn >= 12:
                text = "I give up on this vault."
            out.append(Generation(text=text, prompt_tokens=50 + 10 * turn, completion_tokens=12))
        return out


def _smith_records() -> list[dict]:
    recs = []
    for agent, t in ((ScriptedAgent("optimal", 3), 3), (ScriptedAgent("random", 2, seed=1), 2), (NoisyText(), 4)):
        eps = [LomekwiEpisode(make_world(s, 9, t), s, budget_for(9)) for s in range(3)]
        play(agent, eps, SamplingParams())
        for s, e in enumerate(eps):
            recs.append({"key": episode_key(agent.name, 9, t, s), "model": agent.name, "seed": s, "scheme": "letter",
                         **e.record()})
    return recs


def test_round_trip_through_the_released_format_scores_identically():
    recs = _smith_records()
    assert {r["stop_reason"] for r in recs} >= {"solved", "noop"}
    released_keys = set(json.loads(next(FIXTURES.rglob("episodes.jsonl")).read_text().splitlines()[0]))
    back = []
    for r in recs:
        row = json.loads(json.dumps(export_row(r)))
        assert set(row) == released_keys
        back.append(import_row(row))
    fields = ("key", "held", "hold_turn", "built", "build_turn", "dropped_both", "won", "opened", "total_actions",
              "pickups", "stop_reason", "actions", "observations", "agent_texts", "labels")
    for a, b in zip(recs, back, strict=True):
        assert {f: a[f] for f in fields} == {f: b[f] for f in fields}
    # compared as JSON text so that NaN (E of a model that never built) equals NaN
    assert json.dumps(summarize(recs), sort_keys=True) == json.dumps(summarize(back), sort_keys=True)


def test_env_facts_equal_facts_derived_from_its_observations():
    for r in _smith_records():
        derived = derive_facts(r["labels"], r["n"], r["budget"], r["actions"], r["observations"],
                               calls=r["usage"]["calls"])
        assert {k: r[k] for k in derived} == derived


def test_a_turn_cap_reached_through_unparseable_turns_imports_as_max_turns():
    """The released rows list only parsed turns; their `usage.calls` counts every turn, so a turn-cap stop
    after unparseable replies is read as max_turns, not noop."""
    e = LomekwiEpisode(make_world(0, 9, 4), 0, budget_for(9), max_turns=8)
    play(NoisyText(), [e], SamplingParams())
    r = {"key": episode_key("noisy-double", 9, 4, 0), "model": "noisy-double", "seed": 0, **e.record()}
    assert r["stop_reason"] == "max_turns" and r["unparsed"] and len(r["actions"]) < 8 == r["turns"]
    row = export_row(r)
    assert row["usage"]["calls"] == 8
    assert derive_facts(row["labels"], 9, row["budget"], row["actions"], row["obs"], max_turns=8,
                        calls=row["usage"]["calls"])["stop_reason"] == "max_turns"
    assert derive_facts(row["labels"], 9, row["budget"], row["actions"], row["obs"],
                        max_turns=8)["stop_reason"] == "noop"  # without the calls the row cannot tell


# -------------------------------------------------------------------------------------- the full release


@pytest.mark.skipif(not RELEASE.exists(), reason="shared/data/lomekwi_release is not beside the checkout")
def test_release_shows_recognition_inverse_scaling_across_claude():
    recs = []
    for path in sorted(RELEASE.rglob("episodes.jsonl")):
        recs += read_log(path)[0]
    s = summarize(recs)["models"]
    assert len(recs) == 1260 and all(m["N"] == 180 for m in s.values())
    haiku, sonnet, opus = (s[m]["R"] for m in ("claude-haiku-4-5-20251001", "claude-sonnet-4-6", "claude-opus-4-8"))
    assert haiku > sonnet and haiku > opus
    assert (s["claude-haiku-4-5-20251001"]["counts"]["hold_build"], s["claude-haiku-4-5-20251001"]["counts"]["hold"]) \
        == (137, 165)
    assert all(m["identity_residual"] == 0.0 for m in s.values())
