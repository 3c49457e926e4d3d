"""TGB (003, Appendix B.1/B.2): the gold chain answers through the real tools, no-tools answers only the
controls, and no distractor ever shows the gold answer, checked over all 4,000 requests."""

from __future__ import annotations

from collections import Counter

import pytest

from smith.evals.lots import tgb
from smith.evals.lots.serving import GoldAgent, Served, build_messages

REG = tgb.make_registry(15)


@pytest.fixture(scope="module")
def requests() -> list[tgb.Request]:
    return tgb.generate()


@pytest.fixture(scope="module")
def full_outputs(requests) -> list[dict[str, str]]:
    return [tgb.execute(r, REG.names, REG) for r in requests]


def _answer(req: tgb.Request, menu: list[str], outputs: dict[str, str] | None = None) -> bool:
    outputs = tgb.execute(req, menu, REG) if outputs is None else outputs
    served = Served(req, menu, outputs, build_messages(req, REG, menu, outputs))
    return tgb.grade(GoldAgent().answer([served])[0][0], req.gold)


def test_benchmark_shape_and_determinism(requests):
    assert len(requests) == 4000
    assert Counter(r.family for r in requests) == dict.fromkeys(tgb.FAMILIES, 400)
    assert Counter((r.family, r.split) for r in requests)[("fx_settle", "fit")] == 80
    assert Counter(r.split for r in requests) == {"fit": 800, "eval": 3200}
    assert len({r.id for r in requests}) == 4000
    again = tgb.make_request("fx_settle", 17)
    assert (again.question, again.gold) == (requests[7 * 400 + 17].question, requests[7 * 400 + 17].gold)
    other = tgb.make_request("fx_settle", 17, seed=1)
    assert (other.question, other.gold) != (again.question, again.gold)
    # the family name never appears in the request text (routing must not read it, D.1)
    assert not any(r.family in r.question for r in requests)


def test_gold_chain_answers_every_request_through_the_real_tools(requests, full_outputs):
    for r, out in zip(requests, full_outputs, strict=True):
        assert _answer(r, list(tgb.CHAINS[r.family])), r.id  # the chain alone
        assert _answer(r, REG.names, out), r.id  # the chain among all fifteen tools


def test_no_tools_answers_only_the_control_families(requests):
    solved = Counter(r.family for r in requests if _answer(r, []))
    assert solved == {"compute_only": 400, "no_tool": 400}


def test_distractors_never_show_the_gold_answer(requests, full_outputs):
    for r, out in zip(requests, full_outputs, strict=True):
        for tool, text in out.items():
            if tool not in tgb.CHAINS[r.family] and tool not in tgb.RECORD_TOOLS:
                assert not tgb.exposes_gold(tgb.tool_lines({tool: text})[0], r.gold), (r.id, tool, text)
        # every upstream line of a chain lacks the answer too: only the chain's last step computes it
        for tool in tgb.CHAINS[r.family][:-1]:
            assert tool in tgb.RECORD_TOOLS or not tgb.exposes_gold(out[tool], r.gold), (r.id, tool)


def test_synthetic_distractors_are_seeded_and_never_show_the_gold(requests):
    big = tgb.make_registry(240)
    assert len(big) == 240 and len(set(big.names)) == 240
    assert big.names[:15] == REG.names and big.names == tgb.make_registry(240).names
    assert big.names[15:] != tgb.make_registry(240, seed=1).names[15:]
    synthetic = big.names[15:]
    for r in requests[::40]:  # 100 requests x 225 synthetic tools
        out = tgb.execute(r, synthetic, big)
        assert not any(tgb.exposes_gold(text, r.gold) for text in out.values()), r.id


def test_removing_a_chain_tool_reexecutes_and_breaks_its_dependents(requests):
    for family in tgb.FAMILIES[:8]:
        r = next(x for x in requests if x.family == family)
        chain = tgb.CHAINS[family]
        for tool in chain:
            removed = tgb.intervene(r, REG.names, REG, tool, "reexecute")
            assert tool not in removed and not _answer(r, [t for t in REG.names if t != tool], removed)
            for dependent in chain[chain.index(tool) + 1:]:
                if family == "fx_settle" and {tool, dependent} == {"DocRetrieve", "ExchangeRate"}:
                    continue  # parallel producers: ExchangeRate does not read DocRetrieve
                assert removed[dependent].startswith("NameError: name '"), (family, tool, removed[dependent])
            # outputs unrelated to the removed tool stay unchanged (B.2)
            full = tgb.execute(r, REG.names, REG)
            assert all(removed[t] == full[t] for t in removed if t not in chain)
        evidence = tgb.intervene(r, REG.names, REG, chain[0], "evidence")
        assert evidence[chain[-1]] == tgb.execute(r, REG.names, REG)[chain[-1]]  # downstream output kept


def test_lines_are_canonical_and_capped(requests):
    r = requests[0]
    out = tgb.execute(r, list(reversed(REG.names)), REG)
    assert list(out) == REG.names
    lines = tgb.tool_lines({"TableQuery": "x" * 5000})
    assert lines == ["TableQuery: " + "x" * (1500 - len("TableQuery: "))]


def test_calculator_and_grading():
    assert tgb.calculate("3*12.50 + 2*(4 - 1)") == 43.5
    with pytest.raises(NameError, match="ExchangeRate_output"):
        tgb.calculate("4 * 2.5 * ExchangeRate_output")
    assert tgb.grade("The total is 1,234.50 USD.", 1234.5)
    assert tgb.grade("roughly 12 then 1234.49", 1234.5)
    assert not tgb.grade("1234.5 is not it, 12 is", 1234.5)  # the last number counts
    assert not tgb.grade("no number", 3.0)
