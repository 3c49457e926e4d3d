"""Who plays a Recognition-MCP episode: any ChatBackend (an LLM), or one of the suite's scripted agents.

Scripted agents are ChatBackends too, so every agent goes through the same host path: text out,
Qwen3 `<tool_call>` blocks parsed, tokens metered. `scripted:prober` calls each candidate once in
listed order then submits (it cannot divide: all its wins are oracle wins); `scripted:manual` grinds
the long division and submits without touching a tool (all its wins are manual wins).
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass

from smith.errors import ConfigError
from smith.models.base import ChatBackend, Generation, Message, SamplingParams, Tool, ToolCall, parse_tool_calls

from .division import Division, parse_problem
from .server import SUBMIT_TOOL

_TOKEN = re.compile(r"\d|[^\W\d_]+|[^\w\s]|_")
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.S)
_CALL_BLOCK = re.compile(r"<tool_call>.*?(?:</tool_call>|$)", re.S)


def count_tokens(text: str) -> int:
    """Token estimate for agents without a tokenizer: one per digit, word or symbol (Qwen splits digits)."""
    return len(_TOKEN.findall(text))


def render_cost(messages: list[Message], tools: list[Tool]) -> int:
    """Estimated input tokens of one call: the tool schemas plus every message, 4 tokens of framing each."""
    return count_tokens(json.dumps(tools)) + sum(4 + count_tokens(json.dumps(m)) for m in messages)


def visible_text(text: str) -> str:
    """What the agent said, without reasoning blocks or tool-call blocks (those are recorded as calls)."""
    return _CALL_BLOCK.sub("", _THINK.sub("", text)).strip()


@dataclass
class Turn:
    """One model call as the host sees it; tokens feed the meter (input + output per call, A.2)."""

    text: str
    calls: list[ToolCall]
    errors: list[str]
    input_tokens: int
    output_tokens: int
    truncated: bool = False


class ChatAgent:
    """Any ChatBackend as a Recognition-MCP agent; concurrent episodes share one batched backend."""

    def __init__(self, backend: ChatBackend, params: SamplingParams, name: str) -> None:
        self.backend = backend
        self.params = params
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None  # the batch queue belongs to one event loop

    async def act(self, messages: list[Message], tools: list[Tool]) -> Turn:
        g = await self._generate(messages, tools)
        parsed = parse_tool_calls(_THINK.sub("", g.text))
        return Turn(
            text=visible_text(g.text),
            calls=parsed.calls,
            errors=parsed.errors,
            input_tokens=g.prompt_tokens or len(g.prompt_ids) or render_cost(messages, tools),
            output_tokens=g.completion_tokens or len(g.completion_ids) or count_tokens(g.text),
            truncated=g.finish_reason == "length",
        )

    async def _generate(self, messages: list[Message], tools: list[Tool]) -> Generation:
        """Dynamic batching: calls queued while a batch runs go out together in the next one."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._lock = loop, asyncio.Lock()
            self._pending: list[tuple[list[Message], list[Tool], asyncio.Future]] = []
        fut = loop.create_future()
        self._pending.append(([dict(m) for m in messages], tools, fut))
        async with self._lock:
            if not fut.done():
                batch, self._pending = self._pending, []
                try:
                    gens = await asyncio.to_thread(
                        self.backend.chat, [b[0] for b in batch], [b[1] for b in batch], self.params
                    )
                except Exception as e:  # every caller of the failed batch sees the error
                    for _, _, f in batch:
                        f.set_exception(e)
                else:
                    for (_, _, f), g in zip(batch, gens, strict=True):
                        f.set_result(g)
        return await fut


def _call(name: str, arguments: dict | None = None) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments or {}}) + "\n</tool_call>"


def _generation(text: str, messages: list[Message], tools: list[Tool]) -> Generation:
    return Generation(text=text, prompt_tokens=render_cost(messages, tools), completion_tokens=count_tokens(text))


def _candidates(tools: list[Tool] | None) -> list[str]:
    return [t["function"]["name"] for t in tools or [] if t["function"]["name"] != SUBMIT_TOOL]


@dataclass
class Prober:
    """scripted:prober -- calls each candidate once, in listed order, then submits (it never divides)."""

    name: str = "scripted:prober"
    give_up: str = "none of the tools returned an answer"

    def chat(self, conversations: list[list[Message]], tools: list[list[Tool] | None] | None = None,
             params: SamplingParams | None = None) -> list[Generation]:
        tools = tools or [None] * len(conversations)
        out = []
        for messages, menu in zip(conversations, tools, strict=True):
            names = _candidates(menu)
            done = sum(1 for m in messages if m["role"] == "tool")
            if done < len(names):
                text = f"Trying {names[done]}.\n" + _call(names[done])
            else:
                text = "No tool returned an answer.\n" + _call(SUBMIT_TOOL, {"answer": self.give_up})
            out.append(_generation(text, messages, menu or []))
        return out


def long_division_work(problem: Division) -> str:
    """The grind written out: one subtract-and-bring-down step per dividend digit, then a check."""
    lines = [f"Long division of {problem.dividend} by {problem.divisor}."]
    rest = 0
    for digit in str(problem.dividend):
        rest = rest * 10 + int(digit)
        q = rest // problem.divisor
        lines.append(f"Bring down {digit}: {rest} / {problem.divisor} = {q}, subtract {q * problem.divisor}, "
                     f"leaves {rest - q * problem.divisor}.")
        rest -= q * problem.divisor
    lines.append(f"Check: {problem.quotient} x {problem.divisor} + {problem.remainder} = {problem.dividend}.")
    return "\n".join(lines)


@dataclass
class Manual:
    """scripted:manual -- works the division by hand in its reply and submits, never calling a candidate."""

    name: str = "scripted:manual"

    def chat(self, conversations: list[list[Message]], tools: list[list[Tool] | None] | None = None,
             params: SamplingParams | None = None) -> list[Generation]:
        tools = tools or [None] * len(conversations)
        out = []
        for messages, menu in zip(conversations, tools, strict=True):
            task = next(m["content"] for m in messages if m["role"] == "user")
            problem = parse_problem(task)
            text = long_division_work(problem) + "\n" + _call(SUBMIT_TOOL, {"answer": problem.true_answer})
            out.append(_generation(text, messages, menu or []))
        return out


SCRIPTED = {"prober": Prober, "manual": Manual}


def scripted_kind(spec: str) -> str:
    """The kind of a `scripted:<kind>` SPEC, refused when unknown."""
    kind = spec.split(":", 1)[1]
    if kind not in SCRIPTED:
        raise ConfigError(f"scripted agent '{kind}' not found; known: {', '.join(sorted(SCRIPTED))}")
    return kind


def load_agent(spec: str, cfg: object, params: SamplingParams) -> ChatAgent:
    """`scripted:<prober|manual>` or any model SPEC that `smith.models.load_backend` understands."""
    if spec.startswith("scripted:"):
        return ChatAgent(SCRIPTED[scripted_kind(spec)](), params, spec)
    try:
        from smith.models import load_backend
    except ImportError as e:
        raise RuntimeError(f"model '{spec}' needs smith.models.load_backend, which is not available: {e}") from None
    return ChatAgent(load_backend(spec, cfg), params, spec)
