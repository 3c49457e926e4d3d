"""LOTS applied to a smith ToolPool: real pool entries run in the real sandbox on reasoning-gym items,
a task space is fitted per category, and reported against serving the whole pool."""

from __future__ import annotations

import re

import pytest
import torch

from sandbox import Sandbox
from smith.evals.lots import pool as lots_pool
from smith.evals.lots.scoring import LikelihoodScorer
from smith.evals.lots.serving import ChatAgent
from smith.models.base import Generation
from smith.pool.pool import PoolEntry, ToolPool
from smith.tasks import items, score
from smith.toolspec import ToolSpec

LCM = '''import math, re
def lcm_of(question: str) -> str:
    nums = [int(x) for x in re.findall(r"\\d+", question)]
    out = 1
    for n in nums:
        out = out * n // math.gcd(out, n)
    return str(out)
'''
REVERSE = '''def reverse_word(question: str) -> str:
    return question.split()[-1][::-1]
'''
SUM = '''import re
def add_all(question: str) -> str:
    return str(sum(int(x) for x in re.findall(r"-?\\d+", question)))
'''


def _entry(category: str, code: str, name: str, description: str) -> PoolEntry:
    schema = {"name": name, "description": description,
              "parameters": {"type": "object", "properties": {"question": {"type": "string"}},
                             "required": ["question"]}}
    return PoolEntry(category=category, tool=ToolSpec(code, schema, name), r_eval=0.5)


class FirstLine:
    """A ChatBackend double (LLM text only): answers with the first tool output it sees."""

    name = "first-line"

    def chat(self, conversations, tools=None, params=None):
        outs = []
        for conv in conversations:
            m = re.search(r"^\w+: (.+)$", conv[-1]["content"].split("Tool outputs:\n", 1)[1], re.M)
            outs.append(Generation(m[1] if m else "unknown"))
        return outs


@pytest.fixture(scope="module")
def scorer(tiny_model_dir):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield LikelihoodScorer.from_pretrained(str(tiny_model_dir))
    torch.set_num_threads(threads)


def test_fit_a_task_space_over_a_trained_pool(scorer, tmp_path):
    pool = ToolPool()
    for e in (_entry("chain_sum", SUM, "add_all", "Adds every number in the question."),
              _entry("lcm", LCM, "lcm_of", "Least common multiple of the numbers in the question."),
              _entry("spell_backward", REVERSE, "reverse_word", "Spells the last word backward.")):
        assert pool.admit(e)
    pool.save(tmp_path)
    pool = ToolPool.load(tmp_path)
    qs = items("lcm", "hard", 6, 0)
    fit, ev = qs[:3], qs[3:]
    with Sandbox(isolation="strict", workers=1) as sb:
        registry = lots_pool.pool_registry(list(pool))
        assert list(registry) == ["add_all", "lcm_of", "reverse_word"]
        out = lots_pool.run_pool_tools(sb, registry, fit[0].question)
        assert score("lcm", out["lcm_of"], fit[0]) == 1.0  # the real tool, run in the sandbox, is right
        result = lots_pool.fit_pool_space(ChatAgent(FirstLine()), scorer, pool, "lcm", fit, ev, sb,
                                          grade=lambda answer, item: score("lcm", answer, item))
    assert set(result["scores"]) == {"add_all", "lcm_of", "reverse_word"}
    best = max(result["fit_accuracy"].values())
    assert result["k"] == min(k for k, a in result["fit_accuracy"].items() if a == best)
    assert len(result["space"]) == result["k"] and result["lots"]["tools"] == result["k"]
    assert result["whole_pool"]["tools"] == 3
    # the first-line agent reads add_all under the whole pool, so it fails there; the fitted space is
    # at least as good on the fitting requests and never costs more prompt tokens
    assert result["whole_pool"]["accuracy"] == 0.0
    assert best >= result["fit_accuracy"][3]
    assert result["lots"]["prompt_tokens"] <= result["whole_pool"]["prompt_tokens"]
    if result["space"][0] == "lcm_of":
        assert result["lots"]["accuracy"] == 1.0
