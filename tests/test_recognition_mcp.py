"""Recognition MCP end to end: the real decoy server over stdio, the host loop, scripted and LLM agents,
the eval.py entry point, resuming, and the export/import round trip."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from smith.config import compose
from smith.evals.recognition_mcp.agents import ChatAgent, Manual, Prober
from smith.evals.recognition_mcp.host import NUDGE, Episode, budget, relabel, relabel_seed, run_episode
from smith.evals.recognition_mcp.importer import export_row, import_logs
from smith.evals.recognition_mcp.scoring import rollout_counts, score_rollout, summarize
from smith.evals.recognition_mcp.server import DECOY_DESCRIPTION, DECOY_RESULT, SUBMITTED
from smith.models.base import Generation, SamplingParams

FIXTURES = Path(__file__).parent / "fixtures" / "recognition_mcp"
PARAMS = SamplingParams(max_new_tokens=2048)


@dataclass
class ScriptedLLM:
    """A ChatBackend test double: fixed replies, fixed token counts, and a record of what it was shown."""

    replies: list[str]
    prompt_tokens: int = 100
    completion_tokens: int = 10
    name: str = "Qwen/Qwen3-double"
    seen: list = field(default_factory=list)

    def chat(self, conversations, tools=None, params=None):
        out = []
        for conv, menu in zip(conversations, tools, strict=True):
            self.seen.append(([dict(m) for m in conv], menu))
            out.append(Generation(text=self.replies.pop(0), prompt_tokens=self.prompt_tokens,
                                  completion_tokens=self.completion_tokens))
        return out


def call(name, **arguments):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


FIRST, SECOND = relabel(4, relabel_seed(4, 8, 0))[:2]
LAST_D12 = relabel(4, relabel_seed(4, 12, 2))[3]
LLM_SCRIPT = [
    "Let me think about this first.",  # no call -> nudge
    call("tool_zz"),  # a hallucinated name: costs a turn, counts in the order
    f"<think>hidden</think>Trying two at once.{call(FIRST)}{call(SECOND)}",  # only the first runs
    "Work: 61706749 / 7890 = 7820 r 6949." + call("submit_answer", answer="7820 remainder 6949"),
]


@pytest.fixture(scope="module")
def played():
    """Every host rollout of this module, played concurrently (each starts its own stdio server)."""
    llm = ScriptedLLM(list(LLM_SCRIPT))
    spender = ScriptedLLM([call("tool_zz"), "thinking", call(LAST_D12), call("tool_zz")], prompt_tokens=2500)
    runs = {
        "prober": (ChatAgent(Prober(), PARAMS, "scripted:prober"), Episode("tool_prior", 4, 8, 0), False),
        "manual": (ChatAgent(Manual(), PARAMS, "scripted:manual"), Episode("baseline", 4, 10, 1), False),
        "llm": (ChatAgent(llm, PARAMS, llm.name), Episode("baseline", 4, 8, 0), True),
        "silent": (ChatAgent(ScriptedLLM(["hmm"] * 4), PARAMS, "silent"), Episode("baseline", 4, 8, 1), False),
        "spender": (ChatAgent(spender, PARAMS, "Qwen/Qwen3.5-2B"), Episode("tool_prior", 4, 12, 2), False),
    }

    async def go():
        return await asyncio.gather(*(run_episode(a, ep, no_think=nt) for a, ep, nt in runs.values()))

    return dict(zip(runs, asyncio.run(go()), strict=True)) | {"llm_seen": llm.seen}


def test_server_lists_and_calls_through_the_real_client():
    names = ["tool_q", "tool_c", "tool_x"]

    async def go():
        server = StdioServerParameters(command=sys.executable,
                                       args=["-m", "smith.evals.recognition_mcp.server", *names])
        async with Client(server) as client:
            listed = (await client.list_tools()).tools
            decoy = await client.call_tool("tool_c", {})
            submitted = await client.call_tool("submit_answer", {"answer": "12 remainder 3"})
            return listed, decoy, submitted

    listed, decoy, submitted = asyncio.run(go())
    assert [t.name for t in listed] == [*names, "submit_answer"]
    for t in listed[:3]:  # identical decoys: same description, no arguments
        assert t.description == DECOY_DESCRIPTION and t.input_schema.get("properties") == {}
    assert listed[3].input_schema["required"] == ["answer"]
    assert decoy.content[0].text == DECOY_RESULT and not decoy.is_error
    assert submitted.content[0].text == SUBMITTED


def test_scripted_agents_end_to_end(played):
    probe, manual = played["prober"], played["manual"]
    names = relabel(4, relabel_seed(4, 8, 0))
    assert [c["tool"] for c in probe["tool_calls"]] == names  # each candidate once, in listed order
    assert probe["labels"] == {str(i): n for i, n in enumerate(names)}
    assert probe["stopped_reason"] == "submitted_wrong" and probe["turns"] == 5
    meters = [c["meter_raw"] for c in probe["tool_calls"]] + [probe["submit"]["meter_raw"]]
    assert meters == sorted(set(meters)) and meters[-1] == probe["meter_total"]  # the meter only grows
    assert probe["meter_total"] == probe["usage"]["input_tokens"] + probe["usage"]["output_tokens"]
    assert probe["budget"] == budget(8, 4) and probe["condition"] == "tool_prior"
    assert rollout_counts(probe).tolist() == [0, 4, 4, 4]  # every candidate found within budget

    assert manual["tool_calls"] == [] and manual["stopped_reason"] == "submitted_correct" and manual["turns"] == 1
    assert manual["submit"]["answer"] == manual["true_answer"] and manual["submit"]["meter_raw"] < manual["budget"]
    assert rollout_counts(manual).tolist() == [4, 0, 4, 4]


def test_llm_agent_nudges_sequential_calls_unknown_names_and_meter(played):
    rec, seen, first = played["llm"], played["llm_seen"], FIRST

    assert rec["stopped_reason"] == "submitted_correct" and rec["noop_total"] == 1 and rec["turns"] == 4
    assert rec["tool_calls"] == [{"order": 0, "tool": "tool_zz", "meter_raw": 220, "turn": 1},
                                 {"order": 1, "tool": first, "meter_raw": 330, "turn": 2}]
    assert rec["submit"] == {"meter_raw": 440, "correct": True, "answer": "7820 remainder 6949"}
    assert rec["agent_texts"][2] == "Trying two at once."  # reasoning and call blocks are not text
    system, user = seen[0][0][:2]
    assert system["content"].endswith(" /no_think") and "STRICT BUDGET of 8100 tokens" in user["content"]
    assert "Exactly one" not in user["content"]
    assert [t["function"]["name"] for t in seen[0][1]][-1] == "submit_answer"
    last = seen[-1][0]  # what the model saw before submitting
    assert last[3] == {"role": "user", "content": NUDGE}
    assert last[5]["role"] == "tool" and last[5]["content"].startswith("unknown tool 'tool_zz'. Available:")
    assert last[6]["tool_calls"][0]["function"]["name"] == first and len(last[6]["tool_calls"]) == 1
    assert last[7] == {"role": "tool", "tool_call_id": "call_2", "name": first, "content": DECOY_RESULT}
    # scored by hand: first = 330 + 25*2 = 380 < manual 440 -> tool; the other three -> manual at 440
    assert [r.via for r in score_rollout(rec)] == ["tool", "manual", "manual", "manual"]


def test_four_silent_turns_end_it_and_the_budget_stops_it(played):
    a, b = played["silent"], played["spender"]
    assert (a["stopped_reason"], a["turns"], a["noop_total"], a["submit"]) == ("noop", 4, 4, None)
    assert rollout_counts(a).tolist() == [0, 0, 0, 4]
    # budget(12, 4) = 8460; four calls of 2510 tokens: the meter reaches 10040 >= 8460 on the fourth
    assert (b["stopped_reason"], b["turns"], b["meter_total"], b["noop_total"]) == ("out_of_budget", 4, 10040, 1)
    assert [c["meter_raw"] for c in b["tool_calls"]] == [2510, 7530, 10040]


def test_export_import_round_trip_scores_identically(played, tmp_path):
    rec = played["spender"]
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "episodes.jsonl").write_text(json.dumps(export_row(rec)) + "\n")
    (back,), stats = import_logs(tmp_path, "tool_prior")
    assert stats["checker_disagreements"] == 0 and back["key"] == rec["key"]
    assert score_rollout(back) == score_rollout(rec)
    assert summarize([back], n_boot=50) == summarize([rec], n_boot=50)
    # by hand: the last candidate's first call is order 1 at 7530: 7530 + 50 = 7580 <= 8460
    assert rollout_counts(back).tolist() == [0, 1, 1, 4]


def test_eval_entry_point_runs_resumes_and_imports(tmp_path):
    from smith.evals import run

    out = tmp_path / "manual"
    overrides = ["suite=recognition_mcp", "model=scripted:manual", "limit=1", "suite.tools=[4]", "suite.reps=[3]",
                 "suite.difficulties=[8]", "suite.bootstrap=200", f"output_dir={out}"]
    summary = run(compose("eval", overrides, ("suite",)))
    for condition in ("baseline", "tool_prior"):
        m = summary["conditions"][condition]
        assert [m[k]["value"] for k in ("manual_success", "oracle_discovery", "overall_success")] == [1, 0, 1]
        assert m["rollouts"] == 1 and m["manual_success"]["se"] == 0
    logged = (out / "rollouts.jsonl").read_text()
    assert len(logged.splitlines()) == 2
    assert {p.name for p in out.iterdir()} >= {"summary.json", "summary.md", "three_panel.png", "scored.jsonl"}
    run(compose("eval", overrides, ("suite",)))  # resumed: nothing left to play, the log is untouched
    assert (out / "rollouts.jsonl").read_text() == logged

    imported = run(compose("eval", ["suite=recognition_mcp", f"import_logs={FIXTURES}",
                                    f"output_dir={tmp_path / 'imp'}"], ("suite",)))
    two_b = imported["models"]["Qwen/Qwen3.5-2B"]["tool_prior"]
    assert two_b["oracle_discovery"]["value"] == 10 / 16 and two_b["tool_calls_per_rollout"] == 4.0
    assert imported["import"]["rollouts"] == 7 and (tmp_path / "imp" / "three_panel.png").stat().st_size > 10_000
    assert "| Qwen/Qwen3.5-27B | tool_prior | 1 | 4 |" in (tmp_path / "imp" / "summary.md").read_text()


def test_concurrent_calls_share_one_batched_backend():
    @dataclass
    class Counting(ScriptedLLM):
        batches: list = field(default_factory=list)

        def chat(self, conversations, tools=None, params=None):
            self.batches.append(len(conversations))
            return super().chat(conversations, tools, params)

    llm = Counting([call("tool_a"), "hmm", call("submit_answer", answer="3"), "again"])
    agent = ChatAgent(llm, PARAMS, "batched")
    convs = [[{"role": "user", "content": f"problem {i}"}] for i in range(3)]

    async def go():
        return await asyncio.gather(*(agent.act(c, []) for c in convs))

    turns = asyncio.run(go())
    assert llm.batches == [1, 2]  # the first call runs alone; the two queued behind it go out together
    assert [t.calls[0].name if t.calls else None for t in turns] == ["tool_a", None, "submit_answer"]
    assert [c[0]["content"] for c, _ in llm.seen] == ["problem 0", "problem 1", "problem 2"]
    assert asyncio.run(agent.act(convs[0], [])).input_tokens == 100  # a new event loop gets a new queue


def test_real_chat_template_and_the_tiny_model(tiny_model_dir):
    """Messages the host builds render through the real Qwen3 template; real token counts feed the meter."""
    from transformers import AutoTokenizer

    from smith.models import load_backend
    from smith.models.scripted import ScriptedBackend

    names = relabel(4, relabel_seed(4, 8, 3))

    def script(context: str) -> str:
        return call(names[2]) if "<tool_response>" not in context else call("submit_answer", answer="1 2")

    gens = []

    class Recording(ScriptedBackend):
        def chat(self, conversations, tools=None, params=None, **kw):
            out = super().chat(conversations, tools, params, **kw)
            gens.extend(out)
            return out

    scripted = Recording(AutoTokenizer.from_pretrained(tiny_model_dir), script, name="Qwen3-scripted")
    tiny = load_backend(str(tiny_model_dir), {"device": "cpu"})  # random weights: replies without a tool call
    agents = [ChatAgent(scripted, SamplingParams(max_new_tokens=64), scripted.name),
              ChatAgent(tiny, SamplingParams(max_new_tokens=8, temperature=0.0), "tiny")]

    async def go():
        return await asyncio.gather(*(run_episode(a, Episode("tool_prior", 4, 8, 3), no_think=a is agents[0])
                                      for a in agents))

    used, silent = asyncio.run(go())
    first, second = scripted.calls
    assert first.rstrip().endswith("<|im_start|>assistant") and "/no_think" in first
    assert "Exactly one of the 4 tools" in first and f'"name": "{names[2]}"' in first  # tools in the template
    assert f'<tool_call>\n{{"name": "{names[2]}", "arguments": {{}}}}\n</tool_call>' in second
    assert "<tool_response>\nno result\n</tool_response>" in second
    assert used["tool_calls"][0]["tool"] == names[2] and used["submit"]["answer"] == "1 2"
    g1, g2 = gens  # the meter is the template's real token counts, input + output per call
    assert used["tool_calls"][0]["meter_raw"] == len(g1.prompt_ids) + len(g1.completion_ids)
    assert used["submit"]["meter_raw"] == used["meter_total"] == sum(g.prompt_tokens + g.completion_tokens
                                                                      for g in (g1, g2))
    assert (silent["stopped_reason"], silent["turns"], silent["tool_calls"]) == ("noop", 4, [])
    assert silent["meter_total"] == silent["usage"]["input_tokens"] + silent["usage"]["output_tokens"]
    assert silent["usage"]["output_tokens"] <= 4 * 8 and silent["usage"]["input_tokens"] > 4 * 300
