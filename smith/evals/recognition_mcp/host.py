"""The Recognition-MCP host: one rollout of an agent against a fresh decoy server over stdio (paper A.2).

The host lists the server's tools through the mcp client, offers them in the agent's dialect (OpenAI
tool schema and role:"tool" results, or Anthropic tool_use / tool_result blocks), and runs the
released host's protocol: in sequential mode (the default, every reported run) only the first call of
a turn runs; a nudge follows a turn without a call (four in a row end the episode); submit_answer ends
it. A single monotonic meter adds input + output tokens of every model call; each candidate call is
stamped with the meter at dispatch, which is all the counterfactual scorer needs (scoring.py). The live
budget is only a safety stop, checked after turns that called a tool, as the released host does: wins
are decided afterwards, at any budget and surcharge. A context-length overflow of the model server
ends a rollout cleanly (`context_overflow`), so long rollouts stay scorable.
"""

from __future__ import annotations

import json
import random
import string
import sys
import time
from dataclasses import dataclass

from mcp import Client, StdioServerParameters

from smith.models.base import Message, Tool
from smith.models.chat_format import ToolCall

from .agents import AnthropicAgent, ChatAgent, Turn
from .division import long_division
from .server import SUBMIT_TOOL

_SYSTEM_HEAD = ("You are a problem-solving agent with access to tools. You operate under a strict token budget, "
                "so act efficiently. ")
SYSTEM_PROMPT = (_SYSTEM_HEAD + "Call AT MOST ONE tool per turn -- wait to see the result before deciding what "
                 "to do next. Each turn, either call one tool or call submit_answer. Think briefly, then act.")
# The released runner's prompt when several calls per turn are allowed (sequential=False).
SYSTEM_PROMPT_FREE = _SYSTEM_HEAD + "Each turn, either call a tool or call submit_answer. Think briefly, then act."
NO_THINK = " /no_think"  # Qwen3 / Qwen3.5: keep the reasoning block off the tool-calling path (A.2)
NUDGE = "Respond by calling a tool: try one of the available tools, or call submit_answer with your final answer."
# The tool-prior sentence (section 6.4). The released code does not carry it; this is the wording the
# Qwen3.5-27B rollouts quote back verbatim ("Exactly one of the 4 tools can solve this problem and
# return the answer directly").
TOOL_PRIOR = "Exactly one of the {T} tools can solve this problem and return the answer directly."
CONDITIONS = ("baseline", "tool_prior")
# The released config's non-obfuscated names (candidate i -> PLAIN_NAMES[i], then tool_<i> past the list).
PLAIN_NAMES = tuple(f"tool_{w}" for w in (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
    "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"))
_OVERFLOW = ("maximum context length", "context length is", "reduce the length")


def budget(difficulty: int, tools: int, base: int = 900, per_digit: int = 90, per_tool: int = 1800) -> int:
    """budget(d, T) = (900 + 90 max(0, d - 8)) + 1800 T tokens (section 4.5): a manual solve plus T probes."""
    return base + per_digit * max(0, difficulty - 8) + per_tool * tools


def relabel(tools: int, seed: int) -> list[str]:
    """Single-letter relabeling (section 4.3), drawn as the released code draws it so that the logged label
    sets come back: the alphabet shuffled by a generator seeded with 7919 seed + 13, candidate i named
    after the i-th letter of that order."""
    if not 0 <= tools <= 26:
        raise ValueError(f"the letter scheme names 0..26 tools, got T={tools}")
    letters = list(string.ascii_lowercase)
    random.Random(seed * 7919 + 13).shuffle(letters)
    return [f"tool_{c}" for c in letters[:tools]]


def plain_names(tools: int) -> list[str]:
    """The released non-obfuscated names: tool_alpha ... tool_tango, then tool_<i> for i >= 20."""
    return [PLAIN_NAMES[i] if i < len(PLAIN_NAMES) else f"tool_{i}" for i in range(tools)]


def tool_names(tools: int, obfuscate: bool, seed: int) -> list[str]:
    """Candidate names of one episode: relabeled letters (the paper's runs) or the fixed plain names."""
    return relabel(tools, seed) if obfuscate else plain_names(tools)


def relabel_seed(tools: int, difficulty: int, rep: int) -> int:
    """The released sweep's per-episode relabel seed (T*131 + d*17 + rep), so labels pair across models."""
    return tools * 131 + difficulty * 17 + rep


def system_prompt(no_think: bool, sequential: bool = True) -> str:
    """The released system prompt: the one-call-per-turn wording in sequential mode, the free one otherwise."""
    return (SYSTEM_PROMPT if sequential else SYSTEM_PROMPT_FREE) + (NO_THINK if no_think else "")


def task_prompt(problem_text: str, tools: int, token_budget: int, condition: str) -> str:
    """The task framing of A.2; the tool-prior condition adds one sentence after the tool count. With no
    candidate tools (the pilot) the released tools-off framing, which has no prior to add."""
    if condition not in CONDITIONS:
        raise ValueError(f"condition '{condition}' not found; known: {', '.join(CONDITIONS)}")
    head = (f"Solve the following problem within a STRICT BUDGET of {token_budget} tokens (every token you read "
            f"and generate counts toward it).\n\nPROBLEM: {problem_text}\n\n")
    if tools <= 0:
        return head + ("Work the problem out and, when you have the answer, call submit_answer with it. You get "
                       "ONE submission: correct = win, wrong = lose.")
    prior = " " + TOOL_PRIOR.format(T=tools) if condition == "tool_prior" else ""
    return head + (
        f"You have {tools} tools available (plus submit_answer).{prior} You may call any of them, and you may also "
        "work the problem out yourself. When you have the answer, call submit_answer with it. You get ONE "
        "submission: correct = win, wrong = lose."
    )


def wants_no_think(model: str, setting: str | bool) -> bool:
    """`auto`: append /no_think for Qwen3 and Qwen3.5 models, as the paper did (section 4.2)."""
    if isinstance(setting, bool):
        return setting
    if setting != "auto":
        raise ValueError(f"no_think must be auto, true or false, got {setting!r}")
    return "qwen3" in model.lower()


@dataclass(frozen=True)
class SweepEpisode:
    """One rollout to play: a cell of the sweep (condition, T, d) and a repetition."""

    condition: str
    tools: int
    difficulty: int
    rep: int
    surcharge: int = 25
    budget: int | None = None  # None -> budget(d, T)
    max_turns: int = 300
    max_noop: int = 4
    obfuscate: bool = True  # False -> the released plain names tool_alpha, tool_bravo, ...
    sequential: bool = True  # False -> every call of a turn runs, under the released free system prompt
    nudge_errors: bool = False  # True -> a malformed tool call's parse error is appended to the nudge

    @property
    def token_budget(self) -> int:
        return self.budget if self.budget is not None else budget(self.difficulty, self.tools)

    def key(self, model: str) -> str:
        """Paired across models; non-default modes get their own keys so one log can hold several."""
        modes = ("" if self.obfuscate else "|plain") + ("" if self.sequential else "|parallel")
        return f"{model}|{self.condition}|T{self.tools}|d{self.difficulty}|r{self.rep}{modes}"


def is_context_overflow(error: BaseException) -> bool:
    """A model server's context-length refusal, also inside an exception group (the released test, plus
    the wording of a local vLLM engine)."""
    inner = getattr(error, "exceptions", None)
    if inner is not None:
        return any(is_context_overflow(e) for e in inner)
    text = str(error).lower()
    return any(s in text for s in _OVERFLOW) or "longer than the maximum model length" in text


class OpenAIDialect:
    """OpenAI-compatible shapes: function tools, assistant tool_calls, one role:"tool" message per result."""

    @staticmethod
    def tools(listed) -> list[Tool]:  # noqa: ANN001 -- mcp Tool objects
        return [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                                  "parameters": t.input_schema}} for t in listed]

    @staticmethod
    def assistant(text: str, calls: list[ToolCall], ids: list[str]) -> Message:
        message: Message = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = [{"id": i, "type": "function", "function": {
                "name": c.name, "arguments": json.dumps(c.arguments)}} for c, i in zip(calls, ids, strict=True)]
        return message

    @staticmethod
    def results(results: list[tuple[str, str]]) -> list[Message]:
        return [{"role": "tool", "tool_call_id": i, "content": out} for i, out in results]


class AnthropicDialect:
    """Anthropic Messages shapes: tools with input_schema, tool_use blocks, tool_result blocks in one user turn."""

    @staticmethod
    def tools(listed) -> list[Tool]:  # noqa: ANN001 -- mcp Tool objects
        return [{"name": t.name, "description": t.description or "", "input_schema": t.input_schema}
                for t in listed]

    @staticmethod
    def assistant(text: str, calls: list[ToolCall], ids: list[str]) -> Message:
        blocks: list[dict] = [{"type": "text", "text": text}] if text else []
        blocks += [{"type": "tool_use", "id": i, "name": c.name, "input": c.arguments}
                   for c, i in zip(calls, ids, strict=True)]
        return {"role": "assistant", "content": blocks}

    @staticmethod
    def results(results: list[tuple[str, str]]) -> list[Message]:
        return [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": out}
                                             for i, out in results]}]


DIALECTS = {"openai": OpenAIDialect, "anthropic": AnthropicDialect}


def _server(names: list[str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "smith.evals.recognition_mcp.server", *names])


def _call_ids(step: Turn, turn: int) -> list[str]:
    """The provider's ids, or call_<turn>[_<k>] for agents whose calls come as text."""
    if step.call_ids is not None:
        return step.call_ids
    return [f"call_{turn}" + (f"_{k}" if k else "") for k in range(len(step.calls))]


async def run_episode(agent: ChatAgent | AnthropicAgent, episode: SweepEpisode, no_think: bool = False,
                      seed_offset: int = 0) -> dict:
    """Play one all-decoy rollout; returns the record (released row fields plus key and condition)."""
    t0 = time.monotonic()
    seed = seed_offset + episode.rep
    problem = long_division(episode.difficulty, seed)
    rseed = relabel_seed(episode.tools, episode.difficulty, episode.rep)
    names = tool_names(episode.tools, episode.obfuscate, rseed)
    token_budget = episode.token_budget
    dialect = DIALECTS[agent.dialect]
    record: dict = {
        "key": episode.key(agent.name), "condition": episode.condition, "tool_calls": [], "submit": None,
        "meter_total": 0, "usage": {"input_tokens": 0, "output_tokens": 0, "calls": 0}, "turns": 0,
        "noop_total": 0, "refusals": 0, "truncated": 0, "stopped_reason": None, "agent_texts": [],
        "labels": {str(i): n for i, n in enumerate(names)}, "sequential": episode.sequential,
        "model": agent.name, "provider": "smith", "dialect": agent.dialect, "n": episode.tools,
        "difficulty": episode.difficulty, "problem_kind": "long_division", "seed": seed, "relabel_seed": rseed,
        "obfuscate": episode.obfuscate, "budget": token_budget, "surcharge": episode.surcharge,
        "problem": problem.text, "true_answer": problem.true_answer,
    }
    messages: list[Message] = [
        {"role": "system", "content": system_prompt(no_think, episode.sequential)},
        {"role": "user", "content": task_prompt(problem.text, episode.tools, token_budget, episode.condition)},
    ]
    meter, noop = 0, 0
    async with Client(_server(names)) as client:
        listed = (await client.list_tools()).tools
        tools = dialect.tools(listed)
        registered = {t.name for t in listed}

        async def run_tool(name: str) -> str:
            if name not in registered:  # a hallucinated name: say which exist, as the reference host does
                return f"unknown tool '{name}'. Available: {', '.join(sorted(registered - {SUBMIT_TOOL}))}"
            try:
                result = await client.call_tool(name, {})
            except Exception as e:  # the released host reports a failing tool to the model
                return f"tool error: {e}"
            return "".join(getattr(b, "text", "") or "" for b in result.content)

        for turn in range(episode.max_turns):
            try:
                step = await agent.act(messages, tools)
            except Exception as e:
                if is_context_overflow(e):  # a natural end of a long rollout, not a failure
                    record["stopped_reason"] = "context_overflow"
                    break
                raise
            meter += step.input_tokens + step.output_tokens
            record["usage"]["input_tokens"] += step.input_tokens
            record["usage"]["output_tokens"] += step.output_tokens
            record["usage"]["calls"] += 1
            record["truncated"] += int(step.truncated)
            record["agent_texts"].append(step.text)
            calls, ids = step.calls, _call_ids(step, turn)
            if episode.sequential:  # the first call only; the rest are dropped, also from the echoed turn
                calls, ids = calls[:1], ids[:1]
            messages.append(dialect.assistant(step.text, calls, ids))
            if not calls:
                noop += 1
                record["noop_total"] += 1
                record["refusals"] += int(step.refusal)
                if noop >= episode.max_noop:
                    record["stopped_reason"] = "noop"
                    break
                hint = f" ({step.errors[0]})" if episode.nudge_errors and step.errors else ""
                messages.append({"role": "user", "content": NUDGE + hint})
                continue  # as released: no budget check after a turn without a call
            noop = 0
            results: list[tuple[str, str]] = []
            for call, call_id in zip(calls, ids, strict=True):
                if call.name == SUBMIT_TOOL:
                    answer = str(call.arguments.get("answer", ""))
                    await client.call_tool(SUBMIT_TOOL, {"answer": answer})
                    correct = problem.check(answer)
                    record["submit"] = {"meter_raw": meter, "correct": correct, "answer": answer}
                    record["stopped_reason"] = "submitted_correct" if correct else "submitted_wrong"
                    break
                record["tool_calls"].append({"order": len(record["tool_calls"]), "tool": call.name,
                                             "meter_raw": meter, "turn": turn})
                results.append((call_id, await run_tool(call.name)))
            if record["submit"] is not None:
                break
            messages.extend(dialect.results(results))
            if meter >= token_budget:
                record["stopped_reason"] = "out_of_budget"
                break
    record["turns"] = len(record["agent_texts"])
    record["meter_total"] = meter
    record["stopped_reason"] = record["stopped_reason"] or "max_turns"
    record["elapsed_s"] = round(time.monotonic() - t0, 2)
    return record
