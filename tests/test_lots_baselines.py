"""Baselines of Table 1 (003, B.1): description rankers and the label-using searches on hand-made accuracy."""

from __future__ import annotations

from smith.evals.lots import baselines, tgb

SCHEMAS = [t.schema() for t in tgb.make_registry(15).tools]
NAMES = [s["function"]["name"] for s in SCHEMAS]


def test_random_space_is_seeded_and_budget_matched():
    a = baselines.random_space(NAMES, 3, "0:fx_settle")
    assert len(a) == 3 and a == baselines.random_space(NAMES, 3, "0:fx_settle")
    assert baselines.random_space(NAMES, 99, 1) == sorted(NAMES)
    assert baselines.keep_all(NAMES) == NAMES and baselines.no_tools() == []


def test_bm25_ranks_tools_by_their_documentation():
    scores = baselines.bm25_scores(SCHEMAS, ["what is the exchange rate between two currencies"])
    assert max(scores, key=scores.get) == "ExchangeRate"
    scores = baselines.bm25_scores(SCHEMAS, ["Convert the temperature from Celsius to Fahrenheit"])
    assert max(scores, key=scores.get) == "TempConvert"


def test_dense_ranks_tools_with_the_offline_minilm():
    embed = baselines.load_encoder()
    scores = baselines.dense_scores(embed, SCHEMAS, ["How many minutes pass between two meetings on the calendar?"])
    assert max(scores, key=scores.get) in {"CalendarAPI", "DurationCalc"}
    assert embed(["a"]).shape == (1, 384)


def _chain_accuracy(menu: list[str]) -> float:
    """A chain family: only {A, B} together answers; C is a helpful extra on its own."""
    acc = 1.0 if {"A", "B"} <= set(menu) else 0.0
    return acc + (0.1 if "C" in menu and acc == 0 else 0.0)


def test_tto_adds_the_best_tool_while_accuracy_strictly_increases():
    # TTO starts from the best single tool (003 section 4.1): a pure chain still reaches its pair
    assert baselines.tto(["A", "B", "D"], lambda m: float({"A", "B"} <= set(m))) == (["A", "B"], 1.0)
    assert baselines.tto(["A", "B", "C"], _chain_accuracy) == (["C"], 0.1)
    assert baselines.tto(["A", "B"], lambda m: 0.5 * len(m)) == (["A", "B"], 1.0)
    assert baselines.tto([], lambda m: 0.25) == ([], 0.25)  # an empty registry has only the empty space


def test_tto_from_the_best_single_tool_reaches_a_chain_whose_single_tools_score_zero():
    # table_total's chain {TableQuery, Calculator} in the 15-tool TGB registry: every single tool scores 0,
    # the pair (and any space holding it) 1. The all-zero tie goes to the first tool in registry order,
    # TableQuery, and adding Calculator is the only strict gain.
    assert NAMES[0] == "TableQuery" and tgb.CHAINS["table_total"] == ("TableQuery", "Calculator")
    calls: list[list[str]] = []

    def acc(menu: list[str]) -> float:
        calls.append(menu)
        return float({"TableQuery", "Calculator"} <= set(menu))

    assert baselines.tto(NAMES, acc) == (["Calculator", "TableQuery"], 1.0)
    # 15 single tools, 14 pairs with TableQuery, 13 triples that do not improve: the empty space is never run
    assert [] not in calls and len(calls) == 15 + 14 + 13
    # in either order of the two-tool universe the result is the pair
    for names in (["TableQuery", "Calculator"], ["Calculator", "TableQuery"]):
        assert baselines.tto(names, acc) == (["Calculator", "TableQuery"], 1.0)


def test_tto_breaks_ties_by_registry_order_and_stops_after_one_failed_expansion():
    calls: list[list[str]] = []

    def acc(menu: list[str]) -> float:
        calls.append(menu)
        return {("B",): 0.5, ("D",): 0.5}.get(tuple(menu), 0.25)

    # B and D tie as single tools; B is listed first. No pair beats 0.5, so TTO keeps B after 7 singles and
    # 6 pairs: the 13 candidate spaces of the paper's Table 20 caption for a 7-tool universe (from the empty
    # space it would be 14)
    assert baselines.tto(list("CBAEFGD"), acc) == (["B"], 0.5)
    assert len(calls) == 7 + 6
    assert baselines.tto(list("DCBAEFG"), acc) == (["D"], 0.5)


def test_beam_search_keeps_five_candidates_and_stops_without_strict_gain():
    assert baselines.beam_search(["A", "B", "D"], lambda m: float({"A", "B"} <= set(m))) == ([], 0.0)
    calls: list[tuple[str, ...]] = []

    def acc(menu: list[str]) -> float:
        calls.append(tuple(menu))
        return {("A",): 0.2, ("B",): 0.1, ("A", "B"): 0.9}.get(tuple(menu), 0.0)

    assert baselines.beam_search(list("ABCDEFG"), acc, width=5) == (["A", "B"], 0.9)
    # the second expansion grows the 5 best one-tool spaces, not all 7
    assert not any(len(c) == 2 and not ({c[0], c[1]} & {"A", "B", "C", "D", "E"}) for c in calls)
