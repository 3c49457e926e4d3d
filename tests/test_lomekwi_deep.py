"""Deep Lomekwi (suite=lomekwi suite.world=deep): the world's rules on hand-written traces read off the released
deep_lomekwi.py, replay of released rows, the episode loop's texts, R1/R2 by hand, the cost bound, the scripted
sweep end to end with its figure, and import of the released rows against the released plotter's arithmetic."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from smith.entry import ConfigError, eval_config
from smith.evals import lomekwi
from smith.evals.lomekwi.deep import costs as deep_costs
from smith.evals.lomekwi.deep import env as deep_env
from smith.evals.lomekwi.deep import importer as deep_importer
from smith.evals.lomekwi.deep import metrics as deep_metrics
from smith.evals.lomekwi.env import Rules
from smith.evals.lomekwi.episode import LomekwiEpisode

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "lomekwi_deep"
LOMEKWI_FIXTURES = Path(__file__).parent / "fixtures" / "lomekwi"
PNG = b"\x89PNG\r\n\x1a\n"

# A hand-made world: 3 containers "cab", keys "kel", axe "hatch", part "pim", woods, resources q2 (r0), q1 (r1),
# q3 (inert): the family numbers are not in latent order, as in the released worlds.
LABELS = {"container": "cab", "key": "kel", "axe": "hatch", "part": "pim", "w0": "oak", "w1": "ash", "w2": "elm",
          "r0": "q2", "r1": "q1", "r2": "q3"}


def workshop(drop_seed: int = 0, rules: Rules | None = None) -> deep_env.Workshop:
    w = deep_env.world_from_labels(LABELS, 3, 3)
    return w.vault_class()(w, drop_seed, False, rules or Rules())


def fixture_rows() -> list[dict]:
    return [json.loads(line) for p in sorted(FIXTURES.rglob("episodes.jsonl")) for line in p.read_text().splitlines()]


def cfg_for(out: Path, *overrides: str):
    return eval_config(["suite=lomekwi", "suite.world=deep", f"output_dir={out}", *overrides])


# --------------------------------------------------------------------------------------------------
# The world


def test_world_labels_the_structure_and_a_look_alike_family():
    w = deep_env.make_deep_world(3, 12, 5)
    labels = w.labels()
    assert set(labels) == {"container", "key", "axe", "part", *(f"w{i}" for i in range(12)),
                           *(f"r{i}" for i in range(5))}
    assert len(set(labels.values())) == len(labels)
    family = [labels[f"r{i}"] for i in range(5)]
    stem = family[0][0]
    assert stem not in "lo" and sorted(family) == [f"{stem}{i}" for i in range(1, 6)]
    assert w.recipe == (labels["r0"], labels["r1"]) and w.doors[0] == f"{labels['container']}_1"
    assert deep_env.make_deep_world(3, 12, 5) == w and deep_env.make_deep_world(4, 12, 5) != w
    assert deep_env.make_deep_world(3, 10, 5).labels()["container"] == labels["container"]  # same seed, same draw order
    with pytest.raises(ValueError, match="at least 2"):
        deep_env.make_deep_world(0, 10, 1)


def test_family_labels_reproduce_the_released_rows():
    """The family (stem and numbering) is independent of the dictionary, so it matches every released row;
    the token labels need the release machine's dictionary (docs/lomekwi.md) and are taken from the rows."""
    for row in fixture_rows():
        ours = deep_env.make_deep_world(row["relabel_seed"], row["n"], row["n_types"]).labels()
        assert all(ours[f"r{i}"] == row["labels"][f"r{i}"] for i in range(row["n_types"]))


def test_search_draws_a_key_then_a_resource_into_the_inventory():
    v = workshop(drop_seed=7)
    rng = random.Random(7 * 6151 + 1)  # the released drop stream: a key index, then a resource
    for i in (1, 2, 2):
        key, res = rng.randint(1, 3), rng.choice(["q2", "q1", "q3"])
        count = v.inv.get(res, 0) + 1
        assert v.step(("examine", f"cab_{i}")) == (f"You search cab_{i}. Out falls kel_{key} and 1 {res}. "
                                                   f"You now hold {count} {res}.")
        assert key in v.held_keys and v.inv[res] == count
    assert v.step(("examine", "cab_02")).startswith("You search cab_02. Out falls")  # echoed as typed
    v.opened.add(1)
    assert v.step(("examine", "cab_1")).startswith("You search cab_1 (already open). Out falls")
    assert v.step(("examine", "cab_4")) == "You examine cab_4: nothing of note."  # out of range: not a container


def test_building_layer_one_then_layer_two():
    v = workshop()
    v.inv = {"q2": 2, "q1": 1, "q3": 1}
    assert v.step(("combine", "q1", "q3")) == "You try to combine q1 and q3: nothing happens."  # look-alike, inert
    assert v.step(("combine", "q2", "q2")) == "You try to combine q2 and q2: nothing happens."
    assert v.step(("combine", "pim", "pim")) == "You try to combine pim and pim: nothing happens."  # no part yet
    assert v.inv == {"q2": 2, "q1": 1, "q3": 1}  # failed crafts consume nothing
    # layer 1: the pair in either order, named r0 first; both consumed
    assert v.step(("combine", "q1", "q2")) == "You combine 1 q2, 1 q1 into 1 pim (new). It persists."
    assert v.inv == {"q2": 1, "q3": 1, "pim": 1} and v.built_part and v.part_turn == 3 and not v.holds_recipe()
    assert v.step(("combine", "q2", "q1")) == "You try to combine q2 and q1: nothing happens."  # q1 used up
    assert v.step(("combine", "pim", "pim")) == "You try to combine pim and pim: nothing happens."  # one part only
    v.inv["q1"] = 1
    assert v.holds_recipe()
    assert v.step(("combine", "q2", "q1")) == "You combine 1 q2, 1 q1 into 1 pim (another). It persists."
    assert v.inv == {"q3": 1, "pim": 2} and v.held_two_parts and not v.has_machine
    # layer 2: two parts make the axe
    assert v.step(("combine", "pim", "pim")) == "You combine 2 pim into 1 hatch (new). It persists."
    assert v.inv == {"q3": 1, "hatch": 1} and v.has_machine and v.part_turn == 3
    assert v.facts() == {"built_part": True, "part_turn": 3, "held_two_parts": True}


def test_examine_texts():
    v = workshop()
    assert v.step(("examine", "q3")) == "A small q3. Nothing remarkable."  # every resource alike, held or not
    assert v.step(("examine", "q2")) == "A small q2. Nothing remarkable."
    assert v.step(("examine", "pim")) == "You examine pim: nothing of note."  # not made yet
    assert v.step(("examine", "hatch")) == "You examine hatch: nothing of note."
    assert v.step(("examine", "kel_7")) == "kel_7: a small fitted key."  # any index, held or not
    assert v.step(("examine", "oak")) == "You examine oak: nothing of note."
    v.inv = {"q2": 2, "q1": 2}
    v.step(("combine", "q2", "q1"))
    v.step(("combine", "q2", "q1"))
    assert v.step(("examine", "pim")) == "A pim. It looks like a fabricated component."
    v.step(("combine", "pim", "pim"))
    assert v.step(("examine", "pim")) == "A pim. It looks like a fabricated component."  # made once is enough
    assert v.step(("examine", "hatch")) == "A hatch. It has a working edge; you sense it could force a container."


def test_use_texts_and_opening():
    v = workshop()
    assert v.step(("use", "hatch", "cab_1")) == "You don't have a hatch."
    assert v.step(("use", "hatch", "cab_9")) == "There is no cab_9."
    assert v.step(("use", "kel_2", "cab_2")) == "You don't have kel_2."
    assert v.step(("use", "q1", "cab_2")) == "You use q1 on cab_2: nothing happens."
    v.inv = {"hatch": 1}
    assert v.step(("use", "hatch", "cab_02")) == ("You use the hatch on cab_02. It yields kel_2. (the hatch remains "
                                                  "with you.)")
    assert v.step(("use", "kel_2", "cab_1")) == "You use kel_2 on cab_1: it does not fit."
    assert v.step(("use", "kel_02", "cab_2")) == ("You use kel_02 on cab_2: it fits. cab_2 opens, revealing 1 ash "
                                                  "(a kind of wood). You now hold it.")
    assert v.inv == {"hatch": 1, "ash": 1} and v.opened == {2}
    assert v.step(("use", "hatch", "cab_2")) == "cab_2 is already open."
    assert v.step(("use", "kel_2", "cab_2")) == "cab_2 is already open."
    canon = workshop(rules=Rules(echo="canonical"))
    canon.inv = {"hatch": 1}
    assert canon.step(("use", "hatch", "cab_02")) == ("You use the hatch on cab_2. It yields kel_2. (the hatch "
                                                      "remains with you.)")


def test_released_rows_replay_byte_for_byte():
    """Every fixture row: its labels and draw seed through `Workshop` reproduce every observation, and the
    state's facts are the row's flags."""
    for row in fixture_rows():
        w = deep_env.world_from_labels(row["labels"], row["n"], row["n_types"])
        v = w.vault_class()(w, row["draw_seed"], False, Rules())
        assert [v.step(tuple(a)) for a in row["actions"]] == row["obs"]
        assert (v.built_part, v.part_turn, v.held_two_parts, v.has_machine, v.solved()) == (
            row["built_part"], row["part_turn"], row["held_two_parts"], row["built_axe"], row["solved"])


# --------------------------------------------------------------------------------------------------
# The episode loop


def test_episode_texts_budget_and_turn_cap():
    w = deep_env.world_from_labels(LABELS, 3, 3)
    e = LomekwiEpisode(w, 0, budget=2, hint=False, no_progress_window=None)
    assert e.messages[0]["content"] == deep_env.SYSTEM_PROMPT and e.max_turns == 400
    first = e.messages[1]["content"]
    assert first.startswith("You are in a sealed workshop. There are 3 locked containers: cab_1, cab_2, cab_3.\n\n")
    assert "  use <object> <container> - use an item on a container\n" in first
    assert first.endswith("If you do not hold all 3 kinds within 2 actions, you fail. Spend them wisely.\n\n"
                          "What do you do?")
    assert e.feed("pickup")  # no pickup verb in this world
    assert e.messages[-1]["content"] == deep_env.NOOP_MESSAGE
    assert e.feed("examine cab_1")
    assert e.messages[-1]["content"].endswith("\n\n[0/3 kinds, 1 actions left] What next?")
    assert not e.feed("examine cab_2")
    assert e.stop_reason == "out_of_budget" and e.messages[-1]["content"].endswith(
        "\n\nBudget exhausted (2 actions). You fail.")
    assert LomekwiEpisode(w, 0, budget=100).max_turns == 400 and LomekwiEpisode(w, 0, budget=300).max_turns == 450


def test_episode_solved_text_and_record():
    w = deep_env.world_from_labels({**LABELS}, 1, 2)
    e = LomekwiEpisode(w, 0, budget=10, hint=False, no_progress_window=None)
    e.vault.inv = {"q2": 2, "q1": 2}
    for text in ("combine q2 q1", "combine q2 q1", "combine pim pim", "use hatch cab_1"):
        assert e.feed(text)
    assert not e.feed("use kel_1 cab_1")
    assert e.messages[-1]["content"].endswith("You now hold it.\n\nYou hold all 1 kinds. Done.")
    r = e.record()
    facts = ("world", "held", "hold_turn", "built_part", "part_turn", "built", "build_turn", "held_two_parts", "won",
             "stop_reason")
    assert [r[k] for k in facts] == ["deep", True, 0, True, 0, True, 2, True, True, "solved"]


# --------------------------------------------------------------------------------------------------
# R1, R2 and the cost bound


def rec(held: bool, part: bool, axe: bool, won: bool) -> dict:
    return {"held": held, "built_part": part, "built": axe, "won": won}


def test_r1_r2_by_hand():
    # 6 episodes: 5 held, 4 made a part, 2 made the axe, 1 of them won; one grinder won without holding.
    records = [rec(1, 1, 1, 1), rec(1, 1, 1, 0), rec(1, 1, 0, 0), rec(1, 1, 0, 0), rec(1, 0, 0, 0), rec(0, 0, 0, 1)]
    out = deep_metrics.steps(records)
    assert out["step_counts"] == {"R1": [4, 5], "R2": [2, 4]}
    assert out["R1"] == 4 / 5 and out["R2"] == 2 / 4 and out["step_residual"] == 0.0  # R = 2/5 = 4/5 * 2/4
    lo, hi = out["R1_ci"]
    assert lo < 0.8 < hi
    empty = deep_metrics.steps([rec(0, 0, 0, 0)])
    assert empty["step_counts"] == {"R1": [0, 0], "R2": [0, 0]} and empty["R1"] != empty["R1"]  # nan
    with pytest.raises(ValueError, match="skipped a build step"):
        deep_metrics.steps([rec(1, 0, 1, 0)])


def test_double_collect_and_build_bound():
    assert deep_costs.expected_double_collect(1) == 2.0  # two draws of the only kind
    assert deep_costs.expected_double_collect(2) == 5.5  # 2 * (4 - 5/4)
    assert deep_costs.expected_double_collect(3) == pytest.approx(float(Fraction(347, 36)))
    assert deep_costs.expected_build(10, 2) == 5.5 + 1.0 + 2 + 20
    assert deep_costs.build_preferred(10, 2) and not deep_costs.build_preferred(10, 6)
    assert deep_costs.build_preferred(30, 6)


# --------------------------------------------------------------------------------------------------
# The sweep end to end, import, and configuration


def test_scripted_agents_play_the_deep_sweep_and_draw_the_figure(tmp_path):
    for agent in ("grinder", "random", "optimal"):  # the last one draws
        summary = lomekwi.run(cfg_for(tmp_path, f"model=scripted:{agent}", "suite.deep.n_values=[10,16]",
                                      "suite.deep.t_values=[2,6]", f"suite.plots={agent == 'optimal'}"))
    details, sweep = summary["details"], summary["details"]["sweep"]
    assert sweep["cells"] == [[10, 2], [10, 6], [16, 2], [16, 6]] and details["world"] == "deep"
    assert sweep["no_progress_window"] is None and sweep["scheme"] == "tokens"
    assert summary["metrics"]["scripted:optimal/R2"]["value"] == 1.0  # the deep steps are metrics too
    models = details["models"]
    assert {m["N"] for m in models.values()} == {4}
    log = [json.loads(x) for x in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert {r["seed"] for r in log} == {0} and {r["world"] for r in log} == {"deep"}
    optimal = {(r["n"], r["n_types"]): r for r in log if r["model"] == "scripted:optimal"}
    for (n, t), r in optimal.items():  # builds exactly where the bound says building is cheaper, and then wins
        assert r["built"] == deep_costs.build_preferred(n, t) and r["built_part"] == r["built"]
        assert r["won"] or not r["built"]
    assert models["scripted:grinder"]["counts"]["build"] == 0
    assert models["scripted:optimal"]["R2"] == 1.0 and models["scripted:optimal"]["step_residual"] == 0.0
    assert summary["details"]["threshold"]["n10_T6"]["build_preferred"] is False
    assert "| scripted:optimal | 4 |" in (tmp_path / "results.md").read_text()
    assert details["plots"] == ["deep_lomekwi.png"] and (tmp_path / "deep_lomekwi.png").read_bytes()[:8] == PNG
    assert not (tmp_path / "threshold_map.png").exists()


def test_the_full_deep_grid_with_limit(tmp_path):
    """The released grid (T 2..6 x n 10..30, one episode each) with the optimal agent, quickly."""
    summary = lomekwi.run(cfg_for(tmp_path, "model=scripted:optimal", "limit=1", "suite.plots=false"))
    m = summary["details"]["models"]["scripted:optimal"]
    assert m["N"] == 105 and len(summary["details"]["cells"]["scripted:optimal"]) == 105
    assert summary["details"]["sweep"]["budgets"]["30"] == 180 and m["S"] > 0.9


def test_grinder_wins_exactly_when_the_keys_come_in_time(tmp_path):
    """Without the axe, all n keys must drop within B - n examines: the coupon collector on the episode's own
    drop stream (a key index, then a resource, per examine) decides every grinder episode."""
    summary = lomekwi.run(cfg_for(tmp_path, "model=scripted:grinder", "suite.deep.n_values=[10,13]",
                                  "suite.deep.t_values=[2,5]", "suite.deep.reps=3", "suite.plots=false"))
    log = [json.loads(x) for x in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert summary["details"]["models"]["scripted:grinder"]["N"] == len(log) == 12
    for r in log:
        rng, keys, draws = random.Random(r["drop_seed"] * 6151 + 1), set(), 0
        while len(keys) < r["n"]:
            keys.add(rng.randint(1, r["n"]))
            rng.randrange(r["n_types"])
            draws += 1
        assert r["won"] == (draws <= r["budget"] - r["n"]) and not r["built"]


def test_stop_on_build_ends_a_deep_episode_at_the_axe(tmp_path):
    summary = lomekwi.run(cfg_for(tmp_path, "model=scripted:optimal", "suite.deep.n_values=[16]",
                                  "suite.deep.t_values=[2]", "suite.stop_on_build=true", "suite.plots=false"))
    (r,) = [json.loads(x) for x in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert r["stop_reason"] == "built" and r["build_turn"] == len(r["actions"]) - 1
    assert summary["details"]["sweep"]["rules"]["stop_on_build"] is True


def plotter_numbers(rows: list[dict]) -> dict[str, tuple[int, int]]:
    """The released plotter's arithmetic on the released flags (held_base, built_part, built_axe, solved)."""
    base = [r for r in rows if r["held_base"]]
    part = [r for r in rows if r["built_part"]]
    axe = [r for r in rows if r["built_axe"]]
    return {"C": (len(base), len(rows)), "R1": (sum(r["built_part"] for r in base), len(base)),
            "R2": (sum(r["built_axe"] for r in part), len(part)), "E": (sum(r["solved"] for r in axe), len(axe)),
            "S": (sum(r["solved"] for r in rows), len(rows))}


def test_import_reproduces_the_released_plotter_on_the_fixture_rows(tmp_path):
    summary = lomekwi.run(cfg_for(tmp_path, f"import_logs={FIXTURES}"))
    models = summary["details"]["models"]
    by_model = Counter(r["model"] for r in fixture_rows())
    assert {m: models[m]["N"] for m in models} == dict(by_model)
    for model in by_model:
        expected = plotter_numbers([r for r in fixture_rows() if r["model"] == model])
        for metric, (k, n) in expected.items():
            assert models[model][metric] == pytest.approx(k / n), (model, metric)
    # by hand: Haiku held 6/7, made a part 5/6, the axe 3/5, won 1/3; Sonnet 3/4, 2/3, 1/2, 1/1
    haiku, sonnet = models["claude-haiku-4-5-20251001"], models["claude-sonnet-4-6"]
    assert (haiku["C"], haiku["R1"], haiku["R2"], haiku["E"], haiku["S"]) == (6 / 7, 5 / 6, 3 / 5, 1 / 3, 1 / 7)
    assert (sonnet["C"], sonnet["R1"], sonnet["R2"], sonnet["E"], sonnet["S"]) == (3 / 4, 2 / 3, 1 / 2, 1.0, 2 / 4)
    assert haiku["stop_reasons"] == {"solved": 1, "noop": 1, "out_of_budget": 5}
    imported = [json.loads(x) for x in (tmp_path / "imported.jsonl").read_text().splitlines()]
    assert len(imported) == 11 and all("part_turn" in r for r in imported)
    checks = {c["claim"]: c["agrees"] for c in summary["details"]["paper_checks"]}
    assert checks["the inversion shows in step 1: R1(Haiku) > R1(Sonnet)"] is True
    assert checks["Claude Haiku is the paper's figure (C, R1, R2, E, S)"] is False  # 7 of its 105 rows only
    assert (tmp_path / "deep_lomekwi.png").read_bytes()[:8] == PNG


def test_round_trip_through_the_released_row_format(tmp_path):
    lomekwi.run(cfg_for(tmp_path, "model=scripted:optimal", "suite.deep.n_values=[10,12]",
                        "suite.deep.t_values=[2,3,5]", "suite.plots=false"))
    for r in (json.loads(x) for x in (tmp_path / "episodes.jsonl").read_text().splitlines()):
        back = deep_importer.import_row(deep_importer.export_row(r))
        for k in ("held", "hold_turn", "built_part", "part_turn", "built", "build_turn", "held_two_parts",
                  "dropped_both", "won", "opened", "total_actions", "stop_reason", "key"):
            assert back[k] == r[k], k


def test_logs_of_the_other_world_and_inconsistent_rows_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"Deep Lomekwi row; import it with suite\.world=deep"):
        lomekwi.run(eval_config(["suite=lomekwi", f"output_dir={tmp_path / 'a'}", f"import_logs={FIXTURES}"]))
    with pytest.raises(ValueError, match="recipe_mode=None"):
        lomekwi.run(cfg_for(tmp_path / "b", f"import_logs={LOMEKWI_FIXTURES}"))
    row = fixture_rows()[0]
    with pytest.raises(ValueError, match="the row says held_two_parts=False"):
        deep_importer.import_row({**row, "held_two_parts": False})


def test_a_real_model_plays_the_deep_world(tmp_path, tiny_model_dir):
    """model=SPEC through load_backend: the tiny random model babbles; four unparseable replies end it."""
    summary = lomekwi.run(cfg_for(tmp_path, "model=tiny", f"tiny_dir={tiny_model_dir}", "suite.deep.n_values=[10]",
                                  "suite.deep.t_values=[2]", "suite.max_new_tokens=8", "suite.plots=false"))
    (r,) = [json.loads(x) for x in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert r["model"] == "tiny" and r["world"] == "deep" and r["turns"] >= 4 and r["usage"]["output_tokens"] > 0
    assert summary["details"]["models"]["tiny"]["N"] == 1


def test_eval_py_imports_the_fixture_rows(tmp_path):
    """The documented import command, through eval.py."""
    proc = subprocess.run([sys.executable, "eval.py", "suite=lomekwi", "suite.world=deep",
                           f"import_logs={FIXTURES}", f"output_dir={tmp_path}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["details"]["world"] == "deep" and summary["details"]["plots"] == ["deep_lomekwi.png"]
    assert sum(m["N"] for m in summary["details"]["models"].values()) == 11


def test_commit_nudge_is_refused_in_the_deep_world(tmp_path):
    with pytest.raises(ConfigError, match="no Deep Lomekwi counterpart"):
        lomekwi.check(cfg_for(tmp_path, "model=scripted:optimal", "suite.commit_nudge=commit"))
