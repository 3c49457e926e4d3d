"""The Recognition-MCP host: one rollout of an agent against a fresh decoy server over stdio (paper A.2).

The host lists the server's tools through the mcp client, offers them in the OpenAI tool schema, and
runs the sequential protocol: at most one tool call per turn (extra calls in a turn are dropped), a
nudge after a turn without a call (four in a row end the episode), submit_answer ends it. A single
monotonic meter adds input + output tokens of every model call; each candidate call is stamped with
the meter at dispatch, which is all the counterfactual scorer needs (scoring.py). The live budget is
only a safety stop: wins are decided afterwards, at any budget and surcharge.
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

from .agents import ChatAgent
from .division import long_division
from .server import SUBMIT_TOOL

SYSTEM_PROMPT = (
    "You are a problem-solving agent with access to tools. You operate under a strict token budget, so act "
    "efficiently. Call AT MOST ONE tool per turn -- wait to see the result before deciding what to do next. "
    "Each turn, either call one tool or call submit_answer. Think briefly, then act."
)
NO_THINK = " /no_think"  # Qwen3 / Qwen3.5: keep the reasoning block off the tool-calling path (A.2)
NUDGE = "Respond by calling a tool: try one of the available tools, or call submit_answer with your final answer."
# The tool-prior sentence (section 6.4). The released code does not carry it; this is the wording the
# Qwen3.5-27B rollouts quote back verbatim ("Exactly one of the 4 tools can solve this problem and
# return the answer directly").
TOOL_PRIOR = "Exactly one of the {T} tools can solve this problem and return the answer directly."
CONDITIONS = ("baseline", "tool_prior")


def budget(difficulty: int, tools: int, base: int = 900, per_digit: int = 90, per_tool: int = 1800) -> int:
    """budget(d, T) = (900 + 90 max(0, d - 8)) + 1800 T tokens (section 4.5): a manual solve plus T probes."""
    return base + per_digit * max(0, difficulty - 8) + per_tool * tools


def relabel(tools: int, seed: int) -> list[str]:
    """Single-letter relabeling (section 4.3): T distinct tool_<letter> names, uniform per episode."""
    if not 1 <= tools <= 26:
        raise ValueError(f"the letter scheme names 1..26 tools, got T={tools}")
    return [f"tool_{c}" for c in random.Random(seed).sample(string.ascii_lowercase, tools)]


def relabel_seed(tools: int, difficulty: int, rep: int) -> int:
    """The released sweep's per-episode relabel seed (T*131 + d*17 + rep), so labels pair across models."""
    return tools * 131 + difficulty * 17 + rep


def system_prompt(no_think: bool) -> str:
    return SYSTEM_PROMPT + (NO_THINK if no_think else "")


def task_prompt(problem_text: str, tools: int, token_budget: int, condition: str) -> str:
    """The task framing of A.2; the tool-prior condition adds one sentence after the tool count."""
    if condition not in CONDITIONS:
        raise ValueError(f"condition '{condition}' not found; known: {', '.join(CONDITIONS)}")
    prior = " " + TOOL_PRIOR.format(T=tools) if condition == "tool_prior" else ""
    return (
        f"Solve the following problem within a STRICT BUDGET of {token_budget} tokens (every token you read and "
        f"generate counts toward it).\n\nPROBLEM: {problem_text}\n\n"
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
class Episode:
    """One rollout to play: a cell of the sweep (condition, T, d) and a repetition."""

    condition: str
    tools: int
    difficulty: int
    rep: int
    surcharge: int = 25
    budget: int | None = None  # None -> budget(d, T)
    max_turns: int = 300
    max_noop: int = 4

    @property
    def token_budget(self) -> int:
        return self.budget if self.budget is not None else budget(self.difficulty, self.tools)

    def key(self, model: str) -> str:
        return f"{model}|{self.condition}|T{self.tools}|d{self.difficulty}|r{self.rep}"


def _openai_tools(listed) -> list[Tool]:  # noqa: ANN001 -- mcp Tool objects
    return [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                              "parameters": t.input_schema}} for t in listed]


def _server(names: list[str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "smith.evals.recognition_mcp.server", *names])


async def run_episode(agent: ChatAgent, episode: Episode, no_think: bool = False, seed_offset: int = 0) -> dict:
    """Play one all-decoy rollout; returns the record (released row fields plus key and condition)."""
    t0 = time.monotonic()
    seed = seed_offset + episode.rep
    problem = long_division(episode.difficulty, seed)
    rseed = relabel_seed(episode.tools, episode.difficulty, episode.rep)
    names = relabel(episode.tools, rseed)
    token_budget = episode.token_budget
    record: dict = {
        "key": episode.key(agent.name), "condition": episode.condition, "tool_calls": [], "submit": None,
        "meter_total": 0, "usage": {"input_tokens": 0, "output_tokens": 0, "calls": 0}, "turns": 0,
        "noop_total": 0, "truncated": 0, "stopped_reason": None, "agent_texts": [],
        "labels": {str(i): n for i, n in enumerate(names)}, "sequential": True, "model": agent.name,
        "provider": "smith", "n": episode.tools, "difficulty": episode.difficulty, "problem_kind": "long_division",
        "seed": seed, "relabel_seed": rseed, "obfuscate": True, "budget": token_budget,
        "surcharge": episode.surcharge, "problem": problem.text, "true_answer": problem.true_answer,
    }
    messages: list[Message] = [
        {"role": "system", "content": system_prompt(no_think)},
        {"role": "user", "content": task_prompt(problem.text, episode.tools, token_budget, episode.condition)},
    ]
    meter, noop = 0, 0
    async with Client(_server(names)) as client:
        listed = (await client.list_tools()).tools
        tools = _openai_tools(listed)
        registered = {t.name for t in listed}
        for turn in range(episode.max_turns):
            step = await agent.act(messages, tools)
            meter += step.input_tokens + step.output_tokens
            record["usage"]["input_tokens"] += step.input_tokens
            record["usage"]["output_tokens"] += step.output_tokens
            record["usage"]["calls"] += 1
            record["truncated"] += int(step.truncated)
            record["agent_texts"].append(step.text)
            call = step.calls[0] if step.calls else None  # sequential protocol: the first call only
            assistant: Message = {"role": "assistant", "content": step.text}
            if call is None:
                messages.append(assistant)
                noop += 1
                record["noop_total"] += 1
                if noop >= episode.max_noop:
                    record["stopped_reason"] = "noop"
                    break
                hint = f" ({step.errors[0]})" if step.errors else ""
                messages.append({"role": "user", "content": NUDGE + hint})
            else:
                noop = 0
                call_id = f"call_{turn}"
                assistant["tool_calls"] = [{"id": call_id, "type": "function", "function": {
                    "name": call.name, "arguments": json.dumps(call.arguments)}}]
                messages.append(assistant)
                if call.name == SUBMIT_TOOL:
                    answer = str(call.arguments.get("answer", ""))
                    await client.call_tool(SUBMIT_TOOL, {"answer": answer})
                    correct = problem.check(answer)
                    record["submit"] = {"meter_raw": meter, "correct": correct, "answer": answer}
                    record["stopped_reason"] = "submitted_correct" if correct else "submitted_wrong"
                    break
                record["tool_calls"].append({"order": len(record["tool_calls"]), "tool": call.name,
                                             "meter_raw": meter, "turn": turn})
                if call.name in registered:
                    result = await client.call_tool(call.name, {})
                    out = "".join(getattr(b, "text", "") for b in result.content)
                else:  # a hallucinated name: say which exist, as the reference host does
                    out = f"unknown tool '{call.name}'. Available: {', '.join(sorted(registered - {SUBMIT_TOOL}))}"
                messages.append({"role": "tool", "tool_call_id": call_id, "name": call.name, "content": out})
            if meter >= token_budget:
                record["stopped_reason"] = "out_of_budget"
                break
    record["turns"] = len(record["agent_texts"])
    record["meter_total"] = meter
    record["stopped_reason"] = record["stopped_reason"] or "max_turns"
    record["elapsed_s"] = round(time.monotonic() - t0, 2)
    return record
