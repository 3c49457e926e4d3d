"""Issue 15: the one multi-turn tool loop (`smith.episodes.play`). Its token-level use (the training rollout,
per-episode budgets) is tested in tests/test_rollout.py, the evaluator's in tests/test_rewards_evaluation.py,
the rg evaluation's in tests/test_eval_rg.py; here: the turn rules every caller relies on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sandbox import Limits
from smith.episodes import Episode, menu_executor, play
from smith.models.base import Generation, SamplingParams
from smith.pool import PoolEntry
from smith.toolspec import ToolSpec

ROOT = Path(__file__).resolve().parent.parent
DOUBLE = PoolEntry("lcm", ToolSpec("def double(question: str) -> str:\n    return str(2 * int(question))\n",
                                   {"name": "double", "description": "Twice the number.",
                                    "parameters": {"type": "object", "properties": {"question": {"type": "string"}},
                                                   "required": ["question"]}}, "double"), 1.0)


class Chat:
    """A ChatBackend double: `reply(messages) -> text`; records the batch size of every turn."""

    def __init__(self, reply):
        self.reply, self.batches = reply, []

    def chat(self, conversations, tools=None, params=None):
        self.batches.append(len(conversations))
        return [Generation(self.reply(c)) for c in conversations]


def call(n: int) -> str:
    return "<tool_call>\n" + json.dumps({"name": "double", "arguments": {"question": str(n)}}) + "\n</tool_call>"


def episode(question: str) -> Episode:
    return Episode([{"role": "user", "content": question}], {"double": DOUBLE})


def test_calls_run_outputs_come_back_and_a_plain_reply_answers(sandbox):
    def reply(messages):  # call the tool once, then answer with its output
        tool = [m for m in messages if m["role"] == "tool"]
        return f"Answer: {tool[-1]['content']}" if tool else call(int(messages[0]["content"]))

    episodes = [episode("3"), episode("20")]
    backend = Chat(reply)
    play(episodes, backend, SamplingParams(), 5, menu_executor(sandbox, Limits(timeout_s=2.0, memory_mb=256)))
    assert [e.answer for e in episodes] == ["6", "40"] and backend.batches == [2, 2]
    assert all(e.end == "answer" and e.turns == 2 and e.calls[0]["status"] == "ok" for e in episodes)
    assistant, tool = episodes[0].transcript[1:3]
    assert tool == {"role": "tool", "tool_call_id": assistant["tool_calls"][0]["id"], "content": "6"}


@pytest.mark.parametrize("last_turn, final, ran", [("end", None, 1), ("answer", call(2), 1), ("run", None, 2)])
def test_the_turn_limit(last_turn, final, ran, sandbox):
    """A model that never stops calling: after max_turns the episode ends; what happens to its last reply is the
    caller's rule (training: nothing; rg: it is the answer; the evaluator: its calls still run)."""
    e = episode("1")
    play([e], Chat(lambda m: call(2)), SamplingParams(), 2, menu_executor(sandbox, Limits(timeout_s=2.0)),
         last_turn=last_turn)
    assert (e.end, e.turns, e.final, len(e.calls)) == ("turns", 2, final, ran)


def test_no_tools_means_the_first_reply_answers():
    e = Episode([{"role": "user", "content": "q"}])
    play([e], Chat(lambda m: call(2)), SamplingParams(), 5, lambda batch: pytest.fail("nothing to run"))
    assert e.end == "answer" and e.turns == 1


def test_one_loop_implementation():
    """Every multi-turn tool loop in smith is `play`, except the Recognition-MCP host, which replays the
    reference harness over an MCP client (one call per turn, a token meter, nudges; docs/recognition_mcp.md)."""
    loops = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "smith").rglob("*.py")
                   if re.search(r"for turn in range\(", p.read_text()))
    assert loops == ["smith/episodes/__init__.py", "smith/evals/recognition_mcp/host.py"]
