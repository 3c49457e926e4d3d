"""The one interface every generation backend implements (hf, vllm, openai, scripted).

Suites, rollouts and the trainer talk only to `ChatBackend`, so a new backend or a scripted
test double drops in without touching them (docs/architecture.md, "Layout and layers", inspect-ai style).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = dict[str, Any]
Tool = dict[str, Any]

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)


@dataclass
class Generation:
    """One sampled completion; token fields are empty for backends that do not expose them."""

    text: str
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "stop"  # "stop" | "length"
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class SamplingParams:
    max_new_tokens: int = 512
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    seed: int | None = None


@runtime_checkable
class ChatBackend(Protocol):
    """Batched chat generation. `tools[i]` is the OpenAI tool list offered to conversation i."""

    name: str

    def chat(
        self,
        conversations: list[list[Message]],
        tools: list[list[Tool] | None] | None = None,
        params: SamplingParams | None = None,
    ) -> list[Generation]: ...


def tool_lists(conversations: list[list[Message]], tools: list[list[Tool] | None] | None) -> list[Any]:
    """One tool list (or None) per conversation, checking that a given list matches the batch."""
    if tools is not None and len(tools) != len(conversations):
        raise ValueError(f"got {len(tools)} tool lists for {len(conversations)} conversations; pass one per "
                         "conversation (None for no tools)")
    return list(tools) if tools is not None else [None] * len(conversations)


class TokenBackend:
    """Shared half of the backends that generate from token ids (hf, vllm, scripted, TRL's vLLM): the chat
    template renders a conversation, `continue_ids` (the subclass) generates from the ids."""

    tokenizer: Any
    chat_template_kwargs: dict[str, Any] = {}  # noqa: RUF012  (read-only default; instances may set their own)

    def render(self, conversation: list[Message], tools: list[Tool] | None = None) -> list[int]:
        """The exact prompt ids: the tokenizer's chat template with `tools`, ending in the assistant header."""
        enc = self.tokenizer.apply_chat_template(conversation, tools=tools or None, add_generation_prompt=True,
                                                 tokenize=True, return_dict=True, **self.chat_template_kwargs)
        return list(enc["input_ids"])

    def continue_ids(self, prompts: Any, params: SamplingParams | None = None, **kwargs: Any) -> list[Generation]:
        raise NotImplementedError

    def chat(
        self,
        conversations: list[list[Message]],
        tools: list[list[Tool] | None] | None = None,
        params: SamplingParams | None = None,
        **kwargs: Any,
    ) -> list[Generation]:
        prompts = [self.render(c, t) for c, t in zip(conversations, tool_lists(conversations, tools), strict=True)]
        return self.continue_ids(prompts, params, **kwargs)


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass
class ParsedToolCalls:
    calls: list[ToolCall]
    errors: list[str]


def parse_tool_calls(text: str) -> ParsedToolCalls:
    """Qwen3/Hermes-style `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks.

    A malformed block becomes an error string (fed back to the model), never an exception.
    """
    calls: list[ToolCall] = []
    errors: list[str] = []
    for body in _TOOL_CALL.findall(text):
        try:
            obj = json.loads(body)
        except json.JSONDecodeError as e:
            errors.append(f"tool call is not valid JSON: {e.msg}")
            continue
        except RecursionError:  # thousands of nested brackets exhaust the parser's stack
            errors.append("tool call is nested too deeply")
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            errors.append('tool call must be an object with a string "name"')
            continue
        args = obj.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except (json.JSONDecodeError, RecursionError):
                errors.append("tool call arguments are not a JSON object")
                continue
        if not isinstance(args, dict):
            errors.append("tool call arguments are not a JSON object")
            continue
        calls.append(ToolCall(obj["name"], args))
    return ParsedToolCalls(calls, errors)
