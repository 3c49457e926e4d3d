"""LOTS request scores on the tiny model (003, Eq. 1-2, B.2): I_x(s) is the difference of two mean
log-likelihoods of the same frozen answer, and the shared-prefix path equals independent passes."""

from __future__ import annotations

import pytest
import torch

from smith.evals.lots import scoring, tgb
from smith.evals.lots.serving import ChatAgent, Served, build_messages
from smith.models.base import Generation

REG = tgb.make_registry(15)


@pytest.fixture(scope="module")
def scorer(tiny_model_dir):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model is faster single-threaded on a shared 2-core box
    yield scoring.LikelihoodScorer.from_pretrained(str(tiny_model_dir), batch_size=4)
    torch.set_num_threads(threads)


def _contexts(req: tgb.Request, menu: list[str], mode: str = "reexecute"):
    full = build_messages(req, REG, menu, tgb.execute(req, menu, REG))
    removed = {t: build_messages(req, REG, menu, tgb.intervene(req, menu, REG, t, mode)) for t in menu}
    return full, removed


def test_answer_tokens_are_located_inside_the_full_sequence(scorer):
    req = tgb.make_request("table_total", 0)
    full, _ = _contexts(req, ["TableQuery", "Calculator"])
    answer = "3445.09"
    ids, start = scorer.encode(full, answer)
    ctx_ids = scorer.tokenizer(scorer.render(full), add_special_tokens=False)["input_ids"]
    assert start == scoring.common_prefix_len(ctx_ids, ids)  # the paper's longest-common-prefix boundary
    assert scorer.tokenizer.decode(ids[start:]) == answer
    with pytest.raises(ValueError, match="empty"):
        scorer.encode(full, "")


def test_loo_score_is_the_difference_of_two_independent_mean_logliks(scorer):
    req = tgb.make_request("fx_settle", 3)
    menu = REG.names
    full, removed = _contexts(req, menu)
    answer = "The total is 2836.74"
    scores = scoring.loo_scores(scorer, full, removed, answer)
    assert set(scores) == set(menu)
    base = scorer.mean_loglik(full, answer)
    for tool in ("DocRetrieve", "ExchangeRate", "Calculator", "Barcode"):
        assert scores[tool] == pytest.approx(base - scorer.mean_loglik(removed[tool], answer), abs=1e-5)
    naive = scoring.loo_scores(scorer, full, removed, answer, shared_prefix=False)
    assert max(abs(scores[t] - naive[t]) for t in menu) < 1e-5
    # Eq. 2 by hand: mean log-probability of the answer tokens from the model's logits
    ids, start = scorer.encode(full, answer)
    with torch.no_grad():
        logits = scorer.model(input_ids=torch.tensor([ids])).logits[0]
    logp = torch.log_softmax(logits.double(), -1)
    by_hand = sum(float(logp[j - 1, ids[j]]) for j in range(start, len(ids))) / (len(ids) - start)
    assert base == pytest.approx(by_hand, abs=1e-5)


def test_evidence_only_deletion_changes_one_line(scorer):
    req = tgb.make_request("sensor_convert", 1)
    menu = ["SensorAPI", "Calculator", "UnitConvert"]
    full, re_exec = _contexts(req, menu, "reexecute")
    _, evidence = _contexts(req, menu, "evidence")
    # re-execution propagates the removal downstream (Calculator errors), evidence-only does not
    assert "NameError" in re_exec["SensorAPI"][1]["content"]
    assert "NameError" not in evidence["SensorAPI"][1]["content"]
    a = scoring.loo_scores(scorer, full, re_exec, "21.5")
    b = scoring.loo_scores(scorer, full, evidence, "21.5")
    assert a["UnitConvert"] == pytest.approx(b["UnitConvert"], abs=1e-6)  # off-chain: same intervention
    assert a["SensorAPI"] != pytest.approx(b["SensorAPI"], abs=1e-7)


class Thinking:
    """A chat backend double whose replies reason about one tool, then name another."""

    name = "thinking"

    def __init__(self, reasoned: str, said: str) -> None:
        self.reply = f"<think>\nPerhaps {reasoned} would do.\n</think>\n\n{said}"

    def chat(self, conversations, tools=None, params=None):
        return [Generation(self.reply, prompt_tokens=1) for _ in conversations]


def test_serving_reads_replies_through_the_chat_format_layer():
    """Issue 44, item 7: a tool named only in the reasoning is not routed, and an answer leaves its reasoning out."""
    reasoned, said = REG.names[0], REG.names[1]
    agent = ChatAgent(Thinking(reasoned, said))
    req = tgb.make_request("table_total", 0)
    assert agent.route([req], REG) == [([said], 1)]
    ((answer, _),) = ChatAgent(Thinking(reasoned, "42")).answer([Served(req, REG.names[:2], {}, [])])
    assert answer == "42"
