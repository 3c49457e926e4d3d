"""Recognition MCP end to end: the real decoy server over stdio, the host loop (stop rules, sequential and
parallel calls, plain names, the OpenAI and Anthropic dialects), scripted and LLM agents, the eval.py entry
point (sweep, pilot, import), resuming, error rows, and the export/import round trip."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from smith.entry import eval_config
from smith.evals.recognition_mcp.agents import AnthropicAgent, ChatAgent, Manual, Prober
from smith.evals.recognition_mcp.division import long_division
from smith.evals.recognition_mcp.host import (
    NUDGE,
    SYSTEM_PROMPT,
    SYSTEM_PROMPT_FREE,
    SweepEpisode,
    budget,
    plain_names,
    relabel,
    relabel_seed,
    run_episode,
)
from smith.evals.recognition_mcp.importer import export_row, import_logs
from smith.evals.recognition_mcp.report import write_report
from smith.evals.recognition_mcp.scoring import rollout_counts, score_rollout, summarize
from smith.evals.recognition_mcp.server import DECOY_DESCRIPTION, DECOY_RESULT, SUBMIT_DESCRIPTION, SUBMITTED
from smith.evals.recognition_mcp.sweep import run_sweep
from smith.models.base import Generation, SamplingParams
from smith.models.chat_format import parse_tool_calls

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
            reply = self.replies.pop(0)
            if isinstance(reply, Exception):  # a model server error
                raise reply
            out.append(Generation(text=reply, prompt_tokens=self.prompt_tokens,
                                  completion_tokens=self.completion_tokens))
        return out


def blocks(text):
    """Scripted text as Anthropic content blocks: the words, then one tool_use block per <tool_call>."""
    words = text.split("<tool_call>")[0].strip()
    calls = parse_tool_calls(text).calls
    return ([{"type": "text", "text": words}] if words else []) + [
        {"type": "tool_use", "id": f"toolu_{k}", "name": c.name, "input": c.arguments} for k, c in enumerate(calls)]


@dataclass
class ScriptedMessages:
    """An Anthropic Messages client double (`client.messages.create`) replaying scripted text, no network."""

    replies: list  # (text, stop_reason)
    seen: list = field(default_factory=list)

    @property
    def messages(self):
        return self

    def create(self, **kwargs):
        self.seen.append(json.loads(json.dumps(kwargs)))
        text, stop = self.replies.pop(0)
        usage = {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 50,
                 "cache_creation_input_tokens": 7}
        return {"content": blocks(text), "stop_reason": stop, "usage": usage}


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
    names_d8_r1 = relabel(4, relabel_seed(4, 8, 1))
    names_d8_r2 = relabel(4, relabel_seed(4, 8, 2))
    right_r1 = long_division(8, 1).true_answer
    overrun = ScriptedLLM([call(names_d8_r1[0]), "thinking", "more", call("submit_answer", answer=right_r1)],
                          prompt_tokens=3000)
    overflow = ScriptedLLM([call(names_d8_r1[1]), RuntimeError(
        "POST /v1/chat/completions -> HTTP 400: This model's maximum context length is 32768 tokens")])
    a, b, c, d = names_d8_r2
    parallel = ScriptedLLM([call(a) + call(b), call(c) + call("submit_answer", answer="1 2") + call(d)])
    claude = ScriptedMessages([("I won't do arithmetic.", "refusal"),
                               ("Trying two." + call(names_d8_r1[1]) + call(names_d8_r1[0]), "tool_use"),
                               ("Done." + call("submit_answer", answer=right_r1), "tool_use")])
    runs = {
        "prober": (ChatAgent(Prober(), PARAMS, "scripted:prober"), SweepEpisode("tool_prior", 4, 8, 0), False),
        "overrun": (ChatAgent(overrun, PARAMS, "overrun"), SweepEpisode("baseline", 4, 8, 1), False),
        "overflow": (ChatAgent(overflow, PARAMS, "overflow"), SweepEpisode("baseline", 4, 8, 1), False),
        "parallel": (ChatAgent(parallel, PARAMS, "parallel"), SweepEpisode("baseline", 4, 8, 2, sequential=False),
                     False),
        "plain": (ChatAgent(Prober(), PARAMS, "scripted:prober"), SweepEpisode("baseline", 4, 8, 0, obfuscate=False),
                  False),
        "claude": (AnthropicAgent(claude, "claude-test", PARAMS), SweepEpisode("baseline", 4, 8, 1), False),
        "manual": (ChatAgent(Manual(), PARAMS, "scripted:manual"), SweepEpisode("baseline", 4, 10, 1), False),
        "llm": (ChatAgent(llm, PARAMS, llm.name), SweepEpisode("baseline", 4, 8, 0), True),
        "silent": (ChatAgent(ScriptedLLM(["hmm"] * 4), PARAMS, "silent"), SweepEpisode("baseline", 4, 8, 1), False),
        "spender": (ChatAgent(spender, PARAMS, "Qwen/Qwen3.5-2B"), SweepEpisode("tool_prior", 4, 12, 2), False),
    }

    async def go():
        return await asyncio.gather(*(run_episode(a, ep, no_think=nt) for a, ep, nt in runs.values()))

    return dict(zip(runs, asyncio.run(go()), strict=True)) | {"llm_seen": llm.seen, "parallel_seen": parallel.seen,
                                                              "claude_seen": claude.seen, "names_d8_r2": names_d8_r2}


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
    assert listed[3].description == SUBMIT_DESCRIPTION == "Submit your final answer to end the task."  # as released
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
    assert last[7] == {"role": "tool", "tool_call_id": "call_2", "content": DECOY_RESULT}  # the released shape
    # scored by hand: first = 330 + 25*2 = 380 < manual 440 -> tool; the other three -> manual at 440
    assert [r.via for r in score_rollout(rec)] == ["tool", "manual", "manual", "manual"]


def test_four_silent_turns_end_it_and_the_budget_stops_it(played):
    a, b = played["silent"], played["spender"]
    assert (a["stopped_reason"], a["turns"], a["noop_total"], a["submit"]) == ("noop", 4, 4, None)
    assert rollout_counts(a).tolist() == [0, 0, 0, 4]
    # budget(12, 4) = 8460; four calls of 2510 tokens: the meter reaches 10040 >= 8460 on the fourth
    assert (b["stopped_reason"], b["turns"], b["meter_total"], b["noop_total"]) == ("out_of_budget", 4, 10040, 1)
    assert [c["meter_raw"] for c in b["tool_calls"]] == [2510, 7530, 10040]


def test_no_budget_check_after_a_turn_without_a_call(played):
    """As released: the safety stop is read only after tool turns, so a rollout whose silent turn crosses the
    budget plays on, and re-scoring it at a larger budget sees the rest."""
    rec = played["overrun"]  # budget(8, 4) = 8100; meters 3010 (call), 6020, 9030 (silent), 12040 (submit)
    assert (rec["stopped_reason"], rec["turns"], rec["noop_total"]) == ("submitted_correct", 4, 2)
    assert rec["submit"]["meter_raw"] == 12040 and rec["tool_calls"][0]["meter_raw"] == 3010
    assert rollout_counts(rec).tolist() == [0, 1, 1, 4]  # at the logged budget only the called tool wins
    assert rollout_counts(rec, budget=12040).tolist() == [3, 1, 4, 4]  # 3010 + 25 < 12040 for the called one


def test_context_overflow_ends_the_rollout_cleanly(played):
    rec = played["overflow"]
    assert (rec["stopped_reason"], rec["turns"], rec["submit"]) == ("context_overflow", 1, None)
    assert rec["tool_calls"][0]["meter_raw"] == 110 and rollout_counts(rec).tolist() == [0, 1, 1, 4]


def test_parallel_mode_runs_every_call_of_a_turn(played):
    rec, seen = played["parallel"], played["parallel_seen"]
    a, b, c, _ = played["names_d8_r2"]
    assert rec["sequential"] is False and rec["key"].endswith("|parallel")
    assert rec["tool_calls"] == [{"order": 0, "tool": a, "meter_raw": 110, "turn": 0},
                                 {"order": 1, "tool": b, "meter_raw": 110, "turn": 0},
                                 {"order": 2, "tool": c, "meter_raw": 220, "turn": 1}]  # d after the submit: dropped
    assert rec["submit"] == {"meter_raw": 220, "correct": False, "answer": "1 2"}
    first, second = seen[0][0], seen[1][0]
    assert first[0]["content"] == SYSTEM_PROMPT_FREE
    assert [t["id"] for t in second[2]["tool_calls"]] == ["call_0", "call_0_1"]
    assert second[3:] == [{"role": "tool", "tool_call_id": "call_0", "content": DECOY_RESULT},
                          {"role": "tool", "tool_call_id": "call_0_1", "content": DECOY_RESULT}]
    # tool a (index 0) at 110 + 25, b at 110 + 50, c at 220 + 75; d never called
    assert [r.tool_cost for r in score_rollout(rec)][:3] == [135, 160, 295]


def test_plain_names_mode(played):
    rec = played["plain"]
    assert [c["tool"] for c in rec["tool_calls"]] == plain_names(4) == ["tool_alpha", "tool_bravo", "tool_charlie",
                                                                        "tool_delta"]
    assert rec["obfuscate"] is False and rec["key"].endswith("|plain") and rollout_counts(rec).tolist()[1] == 4


def test_anthropic_dialect_with_a_scripted_client(played):
    """The released host's Anthropic loop: system apart, tool_use / tool_result blocks, only the first
    tool_use kept and echoed, refusals counted, cache tokens folded into the meter."""
    rec, seen = played["claude"], played["claude_seen"]
    names = relabel(4, relabel_seed(4, 8, 1))
    assert rec["dialect"] == "anthropic" and rec["refusals"] == 1 and rec["noop_total"] == 1
    assert rec["stopped_reason"] == "submitted_correct" and rec["turns"] == 3
    # each call: 100 input + 50 cache read + 7 cache write + 10 output = 167
    assert rec["tool_calls"] == [{"order": 0, "tool": names[1], "meter_raw": 334, "turn": 1}]
    assert rec["submit"]["meter_raw"] == rec["meter_total"] == 501 and rec["usage"]["input_tokens"] == 471
    first, last = seen[0], seen[-1]
    assert first["system"] == SYSTEM_PROMPT and first["model"] == "claude-test" and first["max_tokens"] == 2048
    assert first["tools"][0] == {"name": names[0], "description": DECOY_DESCRIPTION,
                                 "input_schema": {"properties": {}, "title": "decoyArguments", "type": "object"}}
    assert first["messages"][0]["role"] == "user" and len(first["messages"]) == 1
    assert last["messages"][1:] == [
        {"role": "assistant", "content": [{"type": "text", "text": "I won't do arithmetic."}]},
        {"role": "user", "content": NUDGE},
        {"role": "assistant", "content": [{"type": "text", "text": "Trying two."},
                                          {"type": "tool_use", "id": "toolu_0", "name": names[1], "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0", "content": DECOY_RESULT}]},
    ]
    assert rollout_counts(rec).tolist() == [3, 1, 4, 4]  # the probe at 334 + 25 beats S = 501 for its candidate


def test_failed_rollouts_are_error_rows_and_replay(tmp_path):
    """A server error other than an overflow: the rollout becomes an error row (as released), the rest play
    on, scoring counts it apart, and a rerun plays it again."""
    @dataclass
    class Flaky(Manual):
        broken: bool = True

        def chat(self, conversations, tools=None, params=None):
            if self.broken and any(long_division(8, 0).text in m["content"] for c in conversations for m in c):
                raise RuntimeError("connection reset")
            return super().chat(conversations, tools, params)

    backend = Flaky()
    agent = ChatAgent(backend, PARAMS, "flaky")
    episodes = [SweepEpisode("baseline", 4, 8, 0), SweepEpisode("baseline", 4, 8, 1)]
    first = run_sweep(agent, episodes, tmp_path / "rollouts.jsonl", concurrency=2)
    assert first[0]["error"] == "RuntimeError: connection reset" and first[0]["key"] == "flaky|baseline|T4|d8|r0"
    assert first[1]["stopped_reason"] == "submitted_correct"
    summary = write_report(first, tmp_path, "run", None, None, 10, 0)
    assert summary["error_rows"] == 1 and summary["models"]["flaky"]["baseline"]["rollouts"] == 1
    backend.broken = False
    again = run_sweep(agent, episodes, tmp_path / "rollouts.jsonl", concurrency=2)
    assert "error" not in again[0] and again[0]["stopped_reason"] == "submitted_correct" and again[1] == first[1]


def test_a_failing_conversation_does_not_fail_its_batch():
    @dataclass
    class Overflowing(ScriptedLLM):
        def chat(self, conversations, tools=None, params=None):
            if any("long" in c[0]["content"] for c in conversations):
                raise RuntimeError("maximum context length exceeded")
            return super().chat(conversations, tools, params)

    agent = ChatAgent(Overflowing([call("tool_a"), call("tool_b")]), PARAMS, "batched")
    convs = [[{"role": "user", "content": "short 0"}], [{"role": "user", "content": "long"}],
             [{"role": "user", "content": "short 2"}]]

    async def go():
        return await asyncio.gather(*(agent.act(c, []) for c in convs), return_exceptions=True)

    a, b, c = asyncio.run(go())
    assert isinstance(b, RuntimeError) and [a.calls[0].name, c.calls[0].name] == ["tool_a", "tool_b"]


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
    summary = run(eval_config(overrides))
    for condition in ("baseline", "tool_prior"):
        m = summary["details"]["conditions"][condition]
        assert [m[k]["value"] for k in ("manual_success", "oracle_discovery", "overall_success")] == [1, 0, 1]
        assert m["rollouts"] == 1 and m["manual_success"]["se"] == 0
    logged = (out / "rollouts.jsonl").read_text()
    assert len(logged.splitlines()) == 2
    assert {p.name for p in out.iterdir()} >= {"summary.json", "results.md", "three_panel.png", "scored.jsonl"}
    run(eval_config(overrides))  # resumed: nothing left to play, the log is untouched
    assert (out / "rollouts.jsonl").read_text() == logged

    imported = run(eval_config(["suite=recognition_mcp", f"import_logs={FIXTURES}",
                                f"output_dir={tmp_path / 'imp'}"]))
    models = imported["details"]["models"]
    two_b = models["Qwen/Qwen3.5-2B"]["tool_prior"]
    assert two_b["oracle_discovery"]["value"] == 10 / 16 and two_b["tool_calls_per_rollout"] == 4.0
    assert models["Qwen/Qwen2.5-32B-Instruct"]["tool_prior"]["oracle_discovery"]["value"] == 19 / 20
    assert models["Qwen/Qwen3-32B"]["tool_prior"]["oracle_discovery"]["value"] == 1.0
    assert imported["metrics"]["Qwen/Qwen3-32B/tool_prior/oracle_discovery"]["value"] == 1.0
    assert imported["model"] is None and imported["details"]["import"]["rollouts"] == 11
    assert (tmp_path / "imp" / "three_panel.png").stat().st_size > 10_000
    assert "| Qwen/Qwen3.5-27B | tool_prior | 1 | 4 |" in (tmp_path / "imp" / "results.md").read_text()


def test_check_refuses_an_unknown_mode_and_a_missing_anthropic_sdk(tmp_path, monkeypatch):
    import importlib.util

    from smith.errors import ConfigError
    from smith.evals.recognition_mcp import check

    with pytest.raises(ConfigError, match="known: sweep, pilot"):
        check(eval_config(["suite=recognition_mcp", "suite.mode=calibrate", "model=scripted:manual"]))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(ConfigError, match="needs the anthropic package"):
        check(eval_config(["suite=recognition_mcp", "model=anthropic:claude-haiku-4-5-20251001"]))


def test_eval_entry_point_pilot(tmp_path):
    """The tools-off pilot: submit_answer alone, the released tools-off prompt, the calibration table."""
    from smith.evals import run

    out = tmp_path / "pilot"
    summary = run(eval_config(["suite=recognition_mcp", "suite.mode=pilot", "model=scripted:manual", "limit=1",
                               "suite.pilot.difficulties=[8,11]", f"output_dir={out}"]))
    rows = sorted((json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()),
                  key=lambda r: r["difficulty"])
    assert [(r["n"], r["labels"], r["budget"], r["tool_calls"]) for r in rows] == [(0, {}, 200000, [])] * 2
    cells = summary["details"]["cells"]
    assert [c["d"] for c in cells] == [8, 11] and all(c["accuracy"] == 1.0 for c in cells)
    assert summary["metrics"]["scripted:manual/d8/accuracy"]["value"] == 1.0
    for cell, r in zip(cells, rows, strict=True):
        assert cell["median_S"] == r["submit"]["meter_raw"]
        assert cell["suggested_budget"] == round(0.8 * cell["median_S"])


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
        return await asyncio.gather(*(run_episode(a, SweepEpisode("tool_prior", 4, 8, 3), no_think=a is agents[0])
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


def test_three_panel_keeps_tied_series_apart_labels_inside_and_n_in_legend():
    """Two conditions with identical numbers (a scripted agent ignores the prior) must both be visible, their
    shared values labelled once, and every label -- also of a point at the right edge -- inside the figure."""
    from smith.evals.recognition_mcp.report import three_panel_figure

    from .figures import texts, texts_outside

    def stats(v: float, n: int) -> dict:
        return {**{m: {"value": v, "se": 0.02} for m in ("manual_success", "oracle_discovery", "overall_success")},
                "rollouts": n}

    same = [(2.0, "2B", stats(0.5, 180)), (27.0, "27B", stats(0.84, 180))]
    fig = three_panel_figure({"Qwen3.5 (baseline)": same, "Qwen3.5 (tool_prior)": list(same),
                              "Qwen2.5 (baseline)": [(2.0, "2B", stats(1.0, 90)), (27.0, "27B", stats(0.1, 60))]},
                             "Model size (B params)")
    for ax in fig.axes[:3]:
        data = [ln for ln in ax.get_lines() if ln.get_marker() not in ("_", "|", "None", "")]
        assert len(data) == 3
        assert len({ln.get_marker() for ln in data}) == 3 and len({ln.get_linestyle() for ln in data}) == 3
        pixels = {tuple(ln.get_transform().transform((ln.get_xdata()[0], ln.get_ydata()[0])).round(3)) for ln in data}
        assert len(pixels) == 3  # the tied series do not sit on each other
        assert texts(ax).count("0.84") == 1 and texts(ax).count("1.00") == 1  # a tie is labelled once
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["Qwen3.5 (baseline), n=180", "Qwen3.5 (tool_prior), n=180", "Qwen2.5 (baseline), n=60-90"]
    assert texts_outside(fig) == []
