"""Who plays a Recognition-MCP episode: any ChatBackend (an LLM), an Anthropic Messages client, or one
of the suite's scripted agents.

Scripted agents are ChatBackends too, so they go through the same host path as an LLM: text out, tool calls
read in the backend's chat format (`smith.models.chat_format`: its family's syntax, reasoning left out; Hermes
`<tool_call>` blocks for endpoints and scripted agents), tokens metered, messages in the OpenAI dialect.
`scripted:prober` calls each candidate once in listed order then submits (it cannot divide: all its wins are oracle
wins); `scripted:manual` grinds the long division and submits without touching a tool (all its wins
are manual wins). `anthropic:<model>` speaks the Anthropic dialect (tool_use / tool_result blocks),
as the released host does for Claude models.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
from dataclasses import dataclass
from typing import Any

from smith.errors import ConfigError
from smith.models.base import ChatBackend, Generation, Message, SamplingParams, Tool
from smith.models.chat_format import ToolCall, format_of

from .division import Division, parse_problem
from .server import SUBMIT_TOOL

_TOKEN = re.compile(r"\d|[^\W\d_]+|[^\w\s]|_")


def count_tokens(text: str) -> int:
    """Token estimate for agents without a tokenizer: one per digit, word or symbol (Qwen splits digits)."""
    return len(_TOKEN.findall(text))


def render_cost(messages: list[Message], tools: list[Tool]) -> int:
    """Estimated input tokens of one call: the tool schemas plus every message, 4 tokens of framing each."""
    return count_tokens(json.dumps(tools)) + sum(4 + count_tokens(json.dumps(m)) for m in messages)


@dataclass
class Turn:
    """One model call as the host sees it; tokens feed the meter (input + output per call, A.2)."""

    text: str
    calls: list[ToolCall]
    errors: list[str]
    input_tokens: int
    output_tokens: int
    truncated: bool = False
    refusal: bool = False  # the provider's stop reason says the model refused (Anthropic only)
    call_ids: list[str] | None = None  # the provider's call ids (Anthropic); None -> the host numbers calls


class ChatAgent:
    """Any ChatBackend as a Recognition-MCP agent; concurrent episodes share one batched backend."""

    dialect = "openai"

    def __init__(self, backend: ChatBackend, params: SamplingParams, name: str) -> None:
        self.backend = backend
        self.params = params
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None  # the batch queue belongs to one event loop

    async def act(self, messages: list[Message], tools: list[Tool]) -> Turn:
        g = await self._generate(messages, tools)
        reply = format_of(self.backend).parse(g.text)  # what it said: no reasoning, calls recorded as calls
        return Turn(
            text=reply.content,
            calls=reply.calls,
            errors=reply.errors,
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
                except Exception as e:
                    if len(batch) == 1:
                        batch[0][2].set_exception(e)
                    else:  # one conversation's failure (say, a context overflow) must not end the others
                        await self._one_by_one(batch)
                else:
                    for (_, _, f), g in zip(batch, gens, strict=True):
                        f.set_result(g)
        return await fut

    async def _one_by_one(self, batch: list[tuple[list[Message], list[Tool], asyncio.Future]]) -> None:
        for messages, tools, f in batch:
            try:
                (g,) = await asyncio.to_thread(self.backend.chat, [messages], [tools], self.params)
            except Exception as e:
                f.set_exception(e)
            else:
                f.set_result(g)


def _field(obj: Any, name: str, default: Any = None) -> Any:
    """An attribute of an SDK object or a key of a plain dict (test doubles, JSON replays)."""
    value = obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)
    return default if value is None else value


class AnthropicAgent:
    """An Anthropic Messages client (`client.messages.create`) as an agent, in the Anthropic dialect.

    The host keeps the conversation as Anthropic messages (system first, then user / assistant turns
    with tool_use and tool_result blocks); this agent moves the system message to `system=`. As in the
    released host, only max_tokens is set (provider default sampling) and cache-read and cache-write
    tokens fold into the input count, so the meter does not depend on prompt caching (A.2).
    """

    dialect = "anthropic"

    def __init__(self, client: Any, model: str, params: SamplingParams, name: str | None = None) -> None:
        self.client = client
        self.model = model
        self.params = params
        self.name = name or model

    async def act(self, messages: list[Message], tools: list[Tool]) -> Turn:
        system, rest = messages[0]["content"], messages[1:]
        resp = await asyncio.to_thread(self.client.messages.create, model=self.model, system=system,
                                       messages=rest, tools=tools, max_tokens=self.params.max_new_tokens)
        texts, calls, ids = [], [], []
        for block in _field(resp, "content", []):
            kind = _field(block, "type")
            if kind == "text":
                texts.append(_field(block, "text", ""))
            elif kind == "tool_use":
                calls.append(ToolCall(_field(block, "name", ""), dict(_field(block, "input", {}))))
                ids.append(_field(block, "id", ""))
        usage = _field(resp, "usage", {})
        prompt = sum(int(_field(usage, k, 0)) for k in
                     ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
        stop = _field(resp, "stop_reason")
        return Turn(text="\n".join(texts), calls=calls, errors=[], input_tokens=prompt,
                    output_tokens=int(_field(usage, "output_tokens", 0)), truncated=stop == "max_tokens",
                    refusal=stop == "refusal", call_ids=ids)


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


def require_anthropic() -> None:
    """Refuse `anthropic:<model>` before anything runs when the SDK is not installed (smith does not ship it)."""
    if importlib.util.find_spec("anthropic") is None:
        raise ConfigError("model=anthropic:<model> needs the anthropic package (pip install anthropic)")


def anthropic_client() -> Any:
    """The Anthropic SDK's client; it reads its API key from the environment."""
    require_anthropic()
    import anthropic

    return anthropic.Anthropic()


def load_agent(spec: str, cfg: object, params: SamplingParams) -> ChatAgent | AnthropicAgent:
    """`scripted:<prober|manual>`, `anthropic:<model>`, or any model SPEC that `smith.models.load_backend`
    understands."""
    if spec.startswith("scripted:"):
        return ChatAgent(SCRIPTED[scripted_kind(spec)](), params, spec)
    if spec.startswith("anthropic:"):
        return AnthropicAgent(anthropic_client(), spec.split(":", 1)[1], params)
    try:
        from smith.models import load_backend
    except ImportError as e:
        raise RuntimeError(f"model '{spec}' needs smith.models.load_backend, which is not available: {e}") from None
    return ChatAgent(load_backend(spec, cfg), params, spec)
