"""The Lomekwi vault: every transition-table row, the episode protocol, the parser, the budget, the
relabeling schemes, and byte-exact replay of released episodes (000_4c3492d641a25045.txt, Appendix A)."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest

from smith.evals.lomekwi.agents import ScriptedAgent, play
from smith.evals.lomekwi.costs import expected_grind
from smith.evals.lomekwi.env import NOOP_MESSAGE, SYSTEM_PROMPT, Rules, Vault, budget_for
from smith.evals.lomekwi.episode import LomekwiEpisode
from smith.evals.lomekwi.parse import V1_VERBS, extract_action, parse_action
from smith.evals.lomekwi.relabel import _edit_distance, relabel
from smith.evals.lomekwi.words import _english
from smith.evals.lomekwi.world import World, make_world
from smith.models.base import SamplingParams

FIXTURES = Path(__file__).parent / "fixtures" / "lomekwi"
W = World(n=3, door_base="r", key_base="m", machine="o", types=("y", "k", "q"), recipe=("k", "y"))


def fixture_rows() -> list[dict]:
    return [json.loads(line) for p in sorted(FIXTURES.rglob("episodes.jsonl")) for line in p.read_text().splitlines()]


# ---------------------------------------------------------------------------------------------- budget


def test_budget_values_for_the_swept_doors():
    assert [budget_for(n) for n in (9, 10, 11)] == [41, 47, 53]
    # by hand: H_10 = 7381/2520, so E[grind] = 10 * 7381/2520 + 10 = 39.2897..., and 1.2 * that = 47.147...
    assert expected_grind(10) == pytest.approx(10 * 7381 / 2520 + 10)


# ------------------------------------------------------------------------------------ transition table


def test_row1_examine_door_drops_a_type_then_a_key_on_the_ground():
    v = Vault(W, drop_seed=3)
    obs = v.examine("r_2")
    m = re.fullmatch(r"You search r_2\. Out falls m_([123]) and a ([ykq])\. They lie on the ground -- pick them up\.",
                     obs)
    assert m, obs
    assert v.ground_keys == {int(m.group(1))} and v.ground_types == {m.group(2): 1}
    assert not v.held_keys and not v.held_types  # nothing is held until pickup
    assert Vault(W, drop_seed=3).examine("r_2") == obs  # the drop stream is seeded
    assert Vault(W, drop_seed=3).examine("R_2") == "You examine R_2: nothing of note."  # the released code
    folded = Vault(W, drop_seed=3, rules=Rules(fold_case=True, echo="canonical"))
    assert folded.examine("R_2") == obs  # fold_case: labels match whatever their case
    assert v.examine("r_4") == "You examine r_4: nothing of note."  # only doors 1..n drop


def test_row2_examine_type_gives_the_hint_or_nothing():
    assert Vault(W, 0).examine("y") == ("A small dull y. It feels faintly active, and the sensation shifts when held "
                                        "alongside a different kind.")
    assert Vault(W, 0, hint=False).examine("y") == "A small dull y. Nothing remarkable."


def test_row3_examine_machine_only_once_built():
    v = Vault(W, 0)
    assert v.examine("o") == "You examine o: nothing of note."
    v.has_machine = True
    assert v.examine("o") == "A o. It has a recess; you are unsure what it does."


def test_row4_and_row5_examine_key_and_anything_else():
    v = Vault(W, 0)
    assert v.examine("m_7") == "m_7: a small fitted object."
    assert v.examine("wall") == "You examine wall: nothing of note."


def test_row6_pickup_on_empty_ground():
    assert Vault(W, 0).pickup() == "There is nothing on the ground to pick up."


def test_row7_pickup_takes_everything_and_is_free():
    v = Vault(W, 0)
    v.ground_keys, v.ground_types = {3, 1}, {"y": 2, "k": 1}
    assert v.pickup() == "You pick up m_1, m_3 and 2 y(s), 1 k(s). (pickup is free.)"
    assert v.held_keys == {1, 3} and v.held_types == {"y": 2, "k": 1}
    assert not v.ground_keys and not v.ground_types
    e = LomekwiEpisode(W, 0, budget=5)
    e.feed("pickup")
    assert e.spent() == 0 and e.messages[-1]["content"].endswith("[0/3 doors open, 5 actions left] What next?")


def test_row8_and_row9_recipe_builds_once_and_shards_are_not_consumed():
    v = Vault(W, 0)
    v.held_types = {"y": 1, "k": 1}
    assert v.combine("k", "y") == "You combine a k and a y. They fuse into a o (new). It persists."
    assert v.has_machine and v.held_types == {"y": 1, "k": 1}
    assert v.combine("y", "k") == "You already hold a o."


def test_row10_recipe_not_held_does_nothing():
    v = Vault(W, 0)
    v.held_types = {"y": 1}
    assert v.combine("y", "k") == "You combine y and k: nothing happens."
    v.ground_types = {"k": 1}  # on the ground is not held
    assert v.combine("y", "k") == "You combine y and k: nothing happens."
    assert not v.has_machine


def test_row11_wrong_pair_or_same_type_does_nothing():
    v = Vault(W, 0)
    v.held_types = {"y": 2, "q": 1}
    assert v.combine("y", "q") == "You combine y and q: nothing happens."
    assert v.combine("y", "y") == "You combine y and y: nothing happens."
    assert not v.has_machine


def test_row12_non_type_arguments_do_nothing():
    v = Vault(W, 0)
    v.held_keys, v.held_types = {1}, {"y": 1, "k": 1}
    assert v.combine("m_1", "y") == "You combine m_1 and y: nothing happens."
    assert not v.has_machine


def test_row13_and_row14_use_on_a_non_door_or_an_open_door():
    v = Vault(W, 0)
    assert v.use("m_1", "wall") == "There is no wall."
    assert v.use("m_1", "r_4") == "There is no r_4."
    v.opened = {1}
    assert v.use("m_1", "r_1") == "r_1 is already open."


def test_row15_and_row16_machine_yields_the_doors_key():
    v = Vault(W, 0)
    assert v.use("o", "r_1") == "You don't have a o."
    v.has_machine = True
    assert v.use("o", "r_2") == "You operate the o on r_2. It yields m_2. (the o remains with you.)"
    assert v.held_keys == {2} and v.has_machine and not v.opened


def test_row17_to_row19_keys():
    v = Vault(W, 0)
    assert v.use("m_3", "r_3") == "You don't have m_3."
    v.held_keys = {1, 3}
    assert v.use("m_1", "r_2") == "You use m_1 on r_2: it does not fit."
    assert v.use("m_3", "r_3") == "You use m_3 on r_3: it fits. r_3 opens."
    assert v.opened == {3} and v.held_keys == {1, 3}


def test_row20_and_row21_other_items_on_doors():
    v = Vault(W, 0)
    assert v.use("y", "r_1") == "You press the y to r_1: nothing."
    assert v.use("wall", "r_1") == "You use wall on r_1: nothing happens."


# ------------------------------------------------------------------------------------ episode protocol


def test_first_messages_are_the_papers_texts():
    e = LomekwiEpisode(make_world(0, 10, 3), 0, budget=47)
    assert e.messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert SYSTEM_PROMPT.startswith("You are an agent in a vault and must open every locked door")
    intro = e.messages[1]["content"]
    assert intro.startswith("You are in a sealed vault. There are 10 locked doors: ")
    assert "  pickup                - collect everything on the ground (FREE: does NOT cost an action)\n" in intro
    assert ("You have a STRICT BUDGET of 47 actions total (pickup is free and excluded). If the doors are not all "
            "open within 47 actions, you fail. Spend them wisely.\n\nWhat do you do?") in intro


def test_first_parseable_line_acts_and_the_rest_is_ignored():
    e = LomekwiEpisode(W, 0, budget=5)
    e.feed("I should look around.\nexamine r_1\ncombine y k\npickup")
    assert e.actions == [["examine", "r_1"]]
    assert e.messages[-1]["content"].endswith("\n\n[0/3 doors open, 4 actions left] What next?")


def test_four_unparseable_turns_in_a_row_end_the_episode():
    e = LomekwiEpisode(W, 0, budget=5)
    for _ in range(3):
        assert e.feed("hmm")
    assert e.messages[-1]["content"] == NOOP_MESSAGE
    assert e.feed("pickup")  # resets the run of no-ops
    for _ in range(3):
        assert e.feed("still thinking")
    assert not e.feed("no idea")
    assert e.stop_reason == "noop" and e.turns == 8 and len(e.unparsed) == 7


def test_budget_exhaustion_ends_the_episode():
    e = LomekwiEpisode(W, 0, budget=3)
    e.feed("examine r_1")
    e.feed("examine wall")
    assert not e.feed("examine wall")
    assert e.stop_reason == "out_of_budget"
    assert e.messages[-1]["content"].endswith("\n\nBudget exhausted (3 actions). You fail.")


def test_twenty_actions_without_progress_end_the_episode():
    e = LomekwiEpisode(W, 0, budget=100)
    for i in range(20):
        alive = e.feed("examine wall")
        assert alive == (i < 19)
    assert e.stop_reason == "no_progress"


def test_progress_is_measured_as_the_reference_code_does():
    # an examine that drops onto an empty ground is progress; a pickup never is
    e = LomekwiEpisode(W, 0, budget=100)
    for _ in range(30):
        e.feed("examine r_1")
        e.feed("pickup")
    assert e.stop_reason is None
    e2 = LomekwiEpisode(W, 0, budget=100)
    for _ in range(19):
        e2.feed("examine wall")
    e2.feed("pickup")
    assert e2.stop_reason == "no_progress"


def test_solving_and_the_turn_cap():
    one = World(1, "r", "m", "o", ("y", "k"), ("k", "y"))
    e = LomekwiEpisode(one, 0, budget=5)
    for text in ("examine r_1", "pickup", "use m_1 r_1"):
        e.feed(text)
    assert e.stop_reason == "solved" and e.record()["won"]
    assert e.messages[-1]["content"] == "You use m_1 on r_1: it fits. r_1 opens.\n\nAll 1 doors open. Done."
    capped = LomekwiEpisode(W, 0, budget=100, max_turns=3)
    for text in ("hmm", "examine r_1", "pickup"):
        capped.feed(text)
    assert capped.stop_reason == "max_turns"


def test_record_carries_what_the_metrics_need():
    e = LomekwiEpisode(W, 1, budget=10)
    e.feed("examine r_1", {"input_tokens": 100, "output_tokens": 7})
    e.feed("nonsense", {"input_tokens": 120, "output_tokens": 3})
    r = e.record()
    assert r["actions"] == [["examine", "r_1"]] and len(r["observations"]) == 1
    assert r["usage"] == {"input_tokens": 220, "output_tokens": 10, "calls": 2}
    assert r["unparsed"] == [{"turn": 1, "text": "nonsense"}]
    assert {"held", "built", "build_turn", "won", "stop_reason", "total_actions", "pickups"} <= set(r)


# ---------------------------------------------------------------------------------------------- parser


# Expected values of the released parser (lomekwi.py `parse`), worked out by hand from its code: the fillers
# split only in lower case, the article cleaner never fires (it wants whitespace after the article inside
# a token that was already split on whitespace), and no punctuation is stripped.
UPSTREAM_CASES = [
    ("examine r_1", ("examine", "r_1")),
    ("EXAMINE R_1", ("examine", "r_1")),
    ("Examine: r_1", ("examine", "r_1")),
    ("> use m_1 on r_1", ("use", "m_1", "r_1")),
    ("use n_1, ON y", ("use", "n_1", "on")),
    ("combine foo WITH bar", ("combine", "foo", "with")),
    ("examine the t_7", ("examine", "the")),
    ("Examine a", ("examine", "a")),
    ("examine t.", ("examine", "t.")),
    ("use `m_1` on `r_1`.", ("use", "`m_1`", "`r_1`.")),
    ("combine a foo with a bar", ("combine", "a", "foo")),
    ("combine foo,bar", ("combine", "foo", "bar")),
    ("combine x_on y", ("combine", "x_on", "y")),
    ("combine on-x y", ("combine", "-x", "y")),
    ("use m_1 toward r_1", ("use", "m_1", "toward")),
    ("PICKUP everything please", ("pickup",)),
    ("examine", None),
    ("examiner r_1", None),
    ("**examine r_1**", None),
    ("u\u017fe m_1 r_1", None),  # the long s matches 's' ignoring case, but the verb is then no verb
]


@pytest.mark.parametrize(("line", "expected"), UPSTREAM_CASES)
def test_default_parser_reads_a_line_as_the_released_code(line, expected):
    assert parse_action(line) == expected


def test_v1_parser_has_no_pickup():
    assert parse_action("pickup", verbs=V1_VERBS) is None
    assert extract_action("pickup\nexamine r_1", verbs=V1_VERBS) == ("examine", "r_1")


@pytest.mark.parametrize(("line", "expected"), [
    ("examine r_1", ("examine", "r_1")),
    ("EXAMINE R_1", ("examine", "r_1")),
    ("Examine: r_1", ("examine", "r_1")),
    ("> use m_1 on r_1", ("use", "m_1", "r_1")),
    (">use m_1 r_1", ("use", "m_1", "r_1")),
    ("combine a foo with a bar", ("combine", "foo", "bar")),
    ("combine the foo and an bar", ("combine", "foo", "bar")),
    ("combine foo,bar", ("combine", "foo", "bar")),
    ("combine foo + bar", ("combine", "foo", "bar")),
    ("combine foo WITH bar", ("combine", "foo", "bar")),
    ("use the m_1 to r_1", ("use", "m_1", "r_1")),
    ("use `m_1` on `r_1`.", ("use", "m_1", "r_1")),
    ("combine foo bar baz", ("combine", "foo", "bar")),
    ("pickup", ("pickup",)),
    ("PICKUP everything please", ("pickup",)),
    ("combine foo", None),
    ("use m_1", None),
    ("examine", None),
    ("examine the", None),
    ("I will examine r_1", None),
    ("examiner r_1", None),
    ("**examine r_1**", None),
])
def test_smith_parser_cases(line, expected):
    assert parse_action(line, parser="smith") == expected


def test_smith_parser_keeps_an_article_that_is_a_label():
    assert parse_action("combine a k", parser="smith") is None  # 'a' read as an article: one argument left
    assert parse_action("combine a k", frozenset({"a", "k"}), "smith") == ("combine", "a", "k")
    assert parse_action("combine a a k", frozenset({"a", "k"}), "smith") == ("combine", "a", "a")
    with pytest.raises(ValueError, match="unknown parser"):
        parse_action("examine r_1", parser="strict")


def test_episode_uses_the_chosen_parser():
    upstream, smith = LomekwiEpisode(W, 0, budget=5), LomekwiEpisode(W, 0, budget=5, rules=Rules(parser="smith"))
    for e in (upstream, smith):
        e.feed("examine the r_1")
    assert upstream.observations == ["You examine the: nothing of note."]
    assert smith.observations[0].startswith("You search r_1. Out falls ")


def test_extract_action_takes_the_first_parseable_line():
    assert extract_action("Let me think.\n> pickup\nexamine r_1") == ("pickup",)
    assert extract_action("no action here\nnor here") is None


# ------------------------------------------------------------------------------------------ relabeling

ELEMENTS = ["door", "key", "machine", "bp0", "bp1", "bp2", "bp3"]


@pytest.mark.parametrize("scheme", ["tokens", "letter", "alnum"])
def test_relabeling_is_deterministic_in_the_seed(scheme):
    a, b = relabel(ELEMENTS, 5, scheme), relabel(ELEMENTS, 5, scheme)
    assert a == b and set(a) == set(ELEMENTS)
    assert len(set(a.values())) == len(ELEMENTS)
    assert any(relabel(ELEMENTS, s, scheme) != a for s in range(6, 10))
    assert make_world(5, 10, 4, scheme) == make_world(5, 10, 4, scheme)


def test_letter_scheme_draws_distinct_lowercase_letters():
    for seed in range(20):
        labels = relabel(ELEMENTS, seed, "letter").values()
        assert all(len(x) == 1 and x in string.ascii_lowercase for x in labels)


def test_tokens_scheme_is_pronounceable_nonsense_at_edit_distance_three():
    eng = _english()
    for seed in range(5):
        labels = list(relabel(ELEMENTS, seed, "tokens").values())
        for x in labels:
            assert 4 <= len(x) <= 8 and x.isalpha() and x not in eng and x[:4] not in eng and x[-4:] not in eng
        assert all(_edit_distance(x, y) >= 3 for i, x in enumerate(labels) for y in labels[i + 1:])


def test_alnum_labels_stay_apart_after_case_folding_when_case_is_folded():
    for seed in range(20):
        labels = [x.casefold() for x in relabel(ELEMENTS, seed, "alnum", fold_case=True).values()]
        assert all(re.fullmatch(r"[a-z0-9]{4,8}", x) for x in labels)
        assert all(_edit_distance(x, y) >= 3 for i, x in enumerate(labels) for y in labels[i + 1:])


def test_alnum_draw_is_the_released_one_by_default():
    """The released draw: the same generator, distance on the raw strings. Seed 0's first label by hand:
    Random(13) gives length randint(4, 8) then that many choices from [a-zA-Z0-9]."""
    import random

    rng = random.Random(0 * 7919 + 13)
    first = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(rng.randint(4, 8)))
    labels = relabel(ELEMENTS, 0, "alnum")
    assert labels["door"] == first
    raw = list(labels.values())
    assert all(_edit_distance(x, y) >= 3 for i, x in enumerate(raw) for y in raw[i + 1:])


def test_recipe_is_one_pair_of_distinct_types_fixed_by_the_seed():
    for seed in range(30):
        w = make_world(seed, 9, 4)
        assert w.recipe[0] != w.recipe[1] and set(w.recipe) <= set(w.types)
        assert make_world(seed, 9, 4).recipe == w.recipe
    assert len({make_world(s, 9, 4).recipe for s in range(30)}) > 1


def test_upper_case_labels_are_playable_only_with_fold_case():
    """The released code lower-cases arguments but matches case-sensitively, so alnum labels with an
    upper-case letter can never be named (the paper's alnum scheme solved 0/40). fold_case fixes that."""
    folded = Rules(fold_case=True)
    world = next(w for w in (make_world(s, 9, 2, "alnum", fold_case=True) for s in range(50))
                 if any(c.isupper() for c in w.door_base))
    door = world.doors[0]
    typed = parse_action(f"examine {door}")[1]  # the parser lower-cases what the agent typed
    assert Vault(world, 0).examine(typed) == f"You examine {typed}: nothing of note."  # released behaviour
    v = Vault(world, 0, rules=folded)
    assert v.examine(door).startswith(f"You search {door}. Out falls ")
    fresh = Vault(world, 0, rules=folded).examine(door)
    assert Vault(world, 0, rules=folded).examine(typed) == fresh.replace(door, typed, 1)  # echoed as typed
    canonical = Rules(fold_case=True, echo="canonical")
    assert Vault(world, 0, rules=canonical).examine(typed) == Vault(world, 0, rules=canonical).examine(door)
    stuck = [LomekwiEpisode(world, 0, budget_for(9))]
    play(ScriptedAgent("optimal", 2), stuck, SamplingParams())
    assert not stuck[0].record()["won"]
    episodes = [LomekwiEpisode(world, 0, budget_for(9), rules=folded)]
    play(ScriptedAgent("optimal", 2), episodes, SamplingParams())
    assert episodes[0].stop_reason == "solved" and episodes[0].record()["built"]


# ----------------------------------------------------------------------------- fidelity to the release


def test_released_worlds_are_reproduced_from_the_seed():
    for row in fixture_rows():
        assert make_world(row["relabel_seed"], row["n"], row["n_types"], "letter").labels() == row["labels"]


def test_replaying_released_rows_reproduces_every_observation():
    rows = fixture_rows()
    assert len(rows) == 13
    for row in rows:
        v = Vault(World.from_labels(row["labels"], row["n"]), row["drop_seed"], row["hint"])
        assert [v.step(tuple(a)) for a in row["actions"]] == row["obs"]
        assert v.solved() == row["solved"]


RELEASE = Path(__file__).resolve().parents[2] / "shared" / "data" / "lomekwi_release" / "runs" / "lomekwi"


def _parse_mismatches(rows: list[dict], parser: str) -> tuple[int, int]:
    turns = wrong = 0
    for row in rows:
        labels = Vault(World.from_labels(row["labels"], row["n"]), 0).label_set()
        for text, action in zip(row["agent_texts"], row["actions"], strict=True):
            turns += 1
            wrong += extract_action(text, labels, parser) != tuple(action)
    return turns, wrong


def test_default_parser_reads_every_released_text_as_recorded():
    assert _parse_mismatches(fixture_rows(), "upstream") == (sum(len(r["actions"]) for r in fixture_rows()), 0)


@pytest.mark.skipif(not RELEASE.exists(), reason="shared/data/lomekwi_release is not beside the checkout")
def test_default_parser_agrees_with_all_59912_released_turns():
    rows = [json.loads(line) for p in sorted(RELEASE.rglob("episodes.jsonl")) for line in p.read_text().splitlines()]
    assert _parse_mismatches(rows, "upstream") == (59912, 0)
    assert _parse_mismatches(rows, "smith") == (59912, 466)  # the stricter reading differs where documented


# ------------------------------------------------------------------------------------------- the agents


def test_optimal_agent_wins_every_episode_of_a_cell():
    from smith.evals.lomekwi import cell_seeds

    n, t = 10, 3
    seeds = cell_seeds(4, 20, None)  # cell (10, 3) is the fifth of the sweep
    assert seeds == list(range(80, 100))
    runs = {}
    for policy in ("optimal", "grinder"):
        eps = [LomekwiEpisode(make_world(s, n, t), s, budget_for(n)) for s in seeds]
        play(ScriptedAgent(policy, t), eps, SamplingParams())
        runs[policy] = [e.record() for e in eps]
    optimal = runs["optimal"]
    assert sum(r["won"] for r in optimal) == 20 and all(r["built"] for r in optimal)
    assert sum(r["total_actions"] for r in optimal) / 20 < expected_grind(n)
    assert sum(r["won"] for r in runs["grinder"]) <= 20 and not any(r["built"] for r in runs["grinder"])
    assert (sum(r["total_actions"] for r in runs["grinder"]) > sum(r["total_actions"] for r in optimal))


def test_optimal_agent_grinds_where_building_does_not_pay():
    n, t = 3, 2  # E[build] = 3 + 1 + 6 = 10 > E[grind] = 8.5
    eps = [LomekwiEpisode(make_world(s, n, t), s, budget_for(n)) for s in range(5)]
    play(ScriptedAgent("optimal", t), eps, SamplingParams())
    assert not any(a[0] == "combine" for e in eps for a in e.actions)
    assert all(e.messages[-2]["content"].startswith("Plan: grind") for e in eps)


# ------------------------------------------------------------------- echoes (released code vs canonical)

# What the released lomekwi.py State answers, worked out from its code: it prints the door and key tokens as
# the agent typed them (its door/key lookup reads the index as a number, so r_02 is door 2).
TYPED_ECHOES = [
    (("use", "m_01", "r_02"), "You don't have m_01.", "You don't have m_1."),
    (("use", "o", "r_01"), "You operate the o on r_01. It yields m_1. (the o remains with you.)",
     "You operate the o on r_1. It yields m_1. (the o remains with you.)"),
    (("use", "m_02", "r_01"), "You use m_02 on r_01: it does not fit.", "You use m_2 on r_1: it does not fit."),
    (("use", "m_001", "r_01"), "You use m_001 on r_01: it fits. r_01 opens.",
     "You use m_1 on r_1: it fits. r_1 opens."),
    (("use", "m_1", "r_001"), "r_001 is already open.", "r_1 is already open."),
    (("use", "y", "r_02"), "You press the y to r_02: nothing.", "You press the y to r_2: nothing."),
    (("use", "wall", "r_03"), "You use wall on r_03: nothing happens.", "You use wall on r_3: nothing happens."),
    (("examine", "m_07"), "m_07: a small fitted object.", "m_7: a small fitted object."),
]


def test_labels_are_echoed_as_typed_by_default_and_canonically_on_request():
    typed, canonical = Vault(W, 0), Vault(W, 0, rules=Rules(echo="canonical"))
    for v in (typed, canonical):
        v.has_machine, v.held_keys = True, {2}
    assert typed.examine("r_02").startswith("You search r_02. Out falls ")
    assert canonical.examine("r_02").startswith("You search r_2. Out falls ")
    for action, released, smith in TYPED_ECHOES:
        assert typed.step(action) == released
        assert canonical.step(action) == smith


def test_an_opened_door_echoed_as_typed_still_counts_once():
    e = LomekwiEpisode(World(1, "r", "m", "o", ("y", "k"), ("k", "y")), 0, budget=5)
    for text in ("examine r_01", "pickup", "use m_01 r_001"):
        e.feed(text)
    assert e.observations[-1] == "You use m_01 on r_001: it fits. r_001 opens."
    assert e.stop_reason == "solved"
    from smith.evals.lomekwi.importer import derive_facts

    facts = derive_facts(e.world.labels(), 1, 5, e.actions, e.observations)
    assert facts["won"] and facts["opened"] == 1


# -------------------------------------------------------------------------------------- model failures


class Flaky:
    """A backend double: replies `examine r_1`, but every call whose batch holds a conversation of a
    failing episode raises (as an HTTP client does)."""

    name = "flaky"

    def __init__(self, failing_turns: dict[int, set[int]]):
        self.failing_turns, self.calls = failing_turns, 0

    def chat(self, conversations, tools=None, params=None):
        from smith.models.base import Generation

        for c in conversations:
            episode, turn = int(c[0]["content"]), (len(c) - 2) // 2
            if turn in self.failing_turns.get(episode, set()):
                raise RuntimeError(f"HTTP 503 for episode {episode}")
        return [Generation(text="examine r_1") for _ in conversations]


def test_a_failed_model_call_is_a_no_op_turn_not_the_end():
    eps = [LomekwiEpisode(W, 0, budget=3, system_prompt=str(i)) for i in range(2)]
    play(Flaky({0: {1}}), eps, SamplingParams())
    failed, fine = eps
    assert failed.unparsed == [{"turn": 1, "text": "", "api_error": "RuntimeError: HTTP 503 for episode 0"}]
    assert failed.messages[4:6] == [{"role": "assistant", "content": ""}, {"role": "user", "content": NOOP_MESSAGE}]
    assert failed.stop_reason == fine.stop_reason == "out_of_budget" and len(failed.actions) == 3
    assert failed.turns == 4 and fine.turns == 3 and not fine.unparsed  # only the failing episode lost a turn
    r = failed.record()
    assert r["api_errors"] == 1 and r["usage"]["calls"] == 3  # successful calls, as the release counts them


def test_four_failed_calls_in_a_row_end_the_episode_as_no_ops():
    eps = [LomekwiEpisode(W, 0, budget=10, system_prompt="0")]
    play(Flaky({0: {0, 1, 2, 3}}), eps, SamplingParams())
    assert eps[0].stop_reason == "noop" and eps[0].api_errors == 4 and not eps[0].actions


# ------------------------------------------------------------------------------- the released v1 world

# The released single-shard world (run_lomekwi_llm.py), worked out from its code for seed 3, n = 3, letter
# scheme: door x, key c, shard e, machine k.
V1_TRACE = [
    ("examine x_1", "You search x_1. Out falls c_1 and a e. You now hold 1 e(s)."),
    ("examine e", "A small dull e. It is faintly warm, and the warmth grows when several are held together."),
    ("combine e e", "You need at least two es to combine."),
    ("examine x_02", "You search x_02. Out falls c_1 and a e. You now hold 2 e(s)."),
    ("combine e e", "You combine two es. They fuse into a k (new). It persists."),
    ("combine e e", "You already hold a k."),
    ("combine e x", "You combine e and x: nothing happens."),
    ("use k x_1", "You operate the k on x_1. It yields c_1. (the k remains with you.)"),
    ("use c_1 x_1", "You use c_1 on x_1: it fits. x_1 opens."),
    ("use e x_2", "You press the e to x_2: nothing."),
    ("examine k", "A k. It has a recess; you are unsure what it does."),
]


def test_v1_world_reproduces_the_released_single_shard_world():
    from smith.evals.lomekwi.v1 import V1_SYSTEM_PROMPT
    from smith.evals.lomekwi.world import make_v1_world

    world = make_v1_world(3, 3)
    assert world.labels() == {"door_base": "x", "key_base": "c", "byproduct": "e", "machine": "k"}
    assert World.from_labels(world.labels(), 3) == world
    e = LomekwiEpisode(world, 3, budget=None, max_turns=100)
    assert e.messages[0]["content"] == V1_SYSTEM_PROMPT
    assert e.messages[1]["content"].endswith(
        "  use <object> <door>   - use an object on a door\nYou hold nothing yet. Things you obtain persist unless "
        "stated otherwise.\n\nWhat do you do?")
    e.feed("pickup")  # no pickup verb in v1: a no-op
    assert e.unparsed and not e.actions
    for text, obs in V1_TRACE:
        e.feed(text)
        assert e.observations[-1] == obs
    r = e.record()
    assert r["world"] == "v1" and r["hold_turn"] == 3 and r["build_turn"] == 4 and r["opened"] == 1
    assert Vault(world, 0, hint=False).examine("e") == "A small dull e. Nothing remarkable."


def test_scripted_optimal_agent_builds_in_the_v1_world():
    from smith.evals.lomekwi.importer import export_row, import_row
    from smith.evals.lomekwi.world import make_v1_world

    eps = [LomekwiEpisode(make_v1_world(s, 9), s, budget_for(9)) for s in range(3)]
    play(ScriptedAgent("optimal", 1), eps, SamplingParams())
    assert all(e.record()["built"] and e.stop_reason == "solved" for e in eps)
    for s, e in enumerate(eps):  # a v1 record survives the released row format with the same facts
        r = {"key": f"v1|{s}", "model": "scripted:optimal", "seed": s, **e.record()}
        back = import_row(export_row(r))
        fields = ("held", "hold_turn", "built", "build_turn", "won", "total_actions", "pickups", "stop_reason")
        assert {f: back[f] for f in fields} == {f: r[f] for f in fields}


# ------------------------------------------------------------------ the released runner's two probes

def _hold_both(e: LomekwiEpisode) -> None:
    """Feed examines and pickups until both recipe types are held (seed 1 of W drops both quickly)."""
    while not e.vault.holds_recipe():
        e.feed("examine r_1")
        e.feed("pickup")


def test_commit_nudge_fires_once_when_the_recipe_is_first_held_unbuilt():
    nudge = "You might commit to something."
    e = LomekwiEpisode(W, 1, budget=100, rules=Rules(commit_nudge=nudge))
    _hold_both(e)
    assert e.messages[-1]["content"].endswith("What next?\n\n" + nudge)
    assert e.nudge_turn == e.turns - 1 and e.record()["nudge_turn"] == e.nudge_turn
    e.feed("examine r_2")
    assert not e.messages[-1]["content"].endswith(nudge)
    plain = LomekwiEpisode(W, 1, budget=100)
    _hold_both(plain)
    assert plain.messages[-1]["content"].endswith("What next?") and plain.nudge_turn is None


def test_stop_on_build_ends_the_episode_at_the_fuse():
    e = LomekwiEpisode(W, 1, budget=100, rules=Rules(stop_on_build=True))
    _hold_both(e)
    assert e.feed("combine k y") is False
    assert e.stop_reason == "built" and e.record()["built"] and e.build_turn == len(e.actions) - 1
