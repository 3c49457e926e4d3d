"""Scorers, the adaptive retriever and the pool's search tool, on real tool documents and a real ToolPool."""

import numpy as np
import pytest

from smith.pool import PoolEntry, ToolPool
from smith.pool.retrieval import (
    AdaptiveRetriever,
    BM25Scorer,
    DenseScorer,
    FixedK,
    QLearningAgent,
    RandomScorer,
    ToolDoc,
    as_text,
    make_scorer,
    pool_search,
)
from smith.toolspec import ToolSpec


def _schema(name, description, **params):
    props = {p: {"type": "string", "description": d} for p, d in params.items()}
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": {"type": "object", "properties": props}}}


TOOLS = [
    _schema("gcd_of_list", "Compute the greatest common divisor of a list of integers.", numbers="integers"),
    _schema("reverse_word", "Spell a word backward by reversing its letters.", word="the word to reverse"),
    _schema("hanoi_moves", "List the moves that solve a Tower of Hanoi puzzle with n disks.", disks="count"),
    _schema("caesar_decrypt", "Decrypt a Caesar cipher by trying every shift of the alphabet.", text="cipher text"),
    _schema("convert_base", "Convert a number from one base (radix) to another, e.g. binary to hex.", number="n"),
]
DOCS = [ToolDoc.from_openai(t) for t in TOOLS]


def test_tool_doc_text_carries_name_description_and_parameters():
    text = DOCS[1].text()
    assert text.splitlines()[0] == "reverse word"
    assert "reversing its letters" in text and "word (string): the word to reverse" in text
    assert as_text(TOOLS[1]) == text and as_text("plain") == "plain"
    with pytest.raises(ValueError, match="no 'name'"):
        ToolDoc.from_openai({"description": "nameless"})


@pytest.mark.parametrize("scorer", [BM25Scorer(), DenseScorer()], ids=["bm25", "minilm"])
def test_scorers_rank_the_obvious_tool_first(scorer):
    queries = [
        "Spell this word backward (example: sun -> nus): banana",
        "Decrypt this Caesar cipher text: KHOOR ZRUOG",
        "Convert the binary number 101101 to base 16 (hexadecimal).",
    ]
    scores = scorer.score(queries, [d.text() for d in DOCS])
    assert scores.shape == (3, 5)
    assert list(scores.argmax(axis=1)) == [1, 3, 4]
    assert scorer.score([], [d.text() for d in DOCS]).shape == (0, 5)


def test_dense_scorer_matches_meaning_without_shared_words():
    scores = DenseScorer().score(["What is the GCD of 12 and 18?"], [d.text() for d in DOCS])
    assert scores[0].argmax() == 0  # "GCD" never appears in the doc; "greatest common divisor" does


def test_random_scorer_is_deterministic_and_uniform():
    s = RandomScorer(seed=1)
    a = s.score(["q1", "q2"], ["d1", "d2", "d3"])
    assert np.array_equal(a, s.score(["q1", "q2"], ["d1", "d2", "d3"]))
    assert ((a >= 0) & (a < 1)).all()
    assert not np.array_equal(a, RandomScorer(seed=2).score(["q1", "q2"], ["d1", "d2", "d3"]))
    with pytest.raises(ValueError, match="known: bm25, minilm, random"):
        make_scorer("bge")


def test_retriever_shortlists_top_k_until_trained_then_adapts(tmp_path):
    retriever = AdaptiveRetriever("bm25")
    query = "Spell this word backward: apple"
    assert retriever.shortlist(query, TOOLS, max_k=3)[0] == 1
    assert len(retriever.shortlist(query, TOOLS, max_k=3)) == 3  # untrained: fixed-K at max_k
    with pytest.raises(ValueError, match="max_k must be >= 1"):
        retriever.shortlist(query, TOOLS, max_k=0)
    with pytest.raises(ValueError, match="empty tool list"):
        retriever.shortlist(query, [], max_k=3)
    words = ["apple", "river", "stone", "cloud", "lemon", "tiger", "piano", "glass"]
    queries = [f"Spell this word backward: {w}" for w in words]
    queries += [f"Decrypt this Caesar cipher: {w.upper()}" for w in words]
    relevant = [[1]] * len(words) + [[3]] * len(words)
    retriever.fit(queries, DOCS, relevant, agent="q", max_depth=5)
    assert isinstance(retriever.policy, QLearningAgent)
    # a lexical scorer that is right every time: the BoR agent learns to show one tool
    assert retriever.shortlist("Spell this word backward: mango", DOCS, max_k=5) == [1]
    saved = retriever.save(tmp_path / "retriever")
    again = AdaptiveRetriever.load(saved)
    assert again.scorer.name == "bm25"
    assert again.shortlist("Decrypt this Caesar cipher: XYZ", DOCS, max_k=5) == [3]
    with pytest.raises(ValueError, match="agent 'ppo' not found"):
        retriever.fit(queries, DOCS, relevant, agent="ppo")
    with pytest.raises(ValueError, match="only a trained policy"):
        AdaptiveRetriever("bm25", FixedK(2)).save(tmp_path / "x")


def _pool():
    pool = ToolPool(cap_per_category=5)
    for i, (cat, t) in enumerate(zip(["gcd", "spell_backward", "tower_of_hanoi", "caesar_cipher", "base_conversion"],
                                     TOOLS, strict=True)):
        fn = t["function"]
        code = f"def solve(question: str) -> str:\n    return {i!r}\n"
        entry = PoolEntry(category=cat, tool=ToolSpec(code, {**fn, "name": "solve"}, "solve"), r_eval=0.5)
        assert pool.admit(entry)
    return pool


def test_pool_search_returns_entries_best_first():
    search = pool_search(_pool(), AdaptiveRetriever("bm25"), max_k=4)
    hits = search("Spell this word backward: apple", 2)
    assert [e.category for e in hits][:1] == ["spell_backward"] and len(hits) == 2
    assert len(search("Decrypt this Caesar cipher text")) == 4  # k omitted, untrained: up to max_k
    spec = search.spec["function"]
    assert spec["name"] == "search_tools" and spec["parameters"]["required"] == ["query"]
    assert spec["parameters"]["properties"]["k"]["maximum"] == 4
    with pytest.raises(ValueError, match="between 1 and 4"):
        search("anything", 9)
