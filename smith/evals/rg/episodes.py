"""Message-level evaluation episodes over any ChatBackend (local model, LoRA checkpoint, vLLM, endpoint).

The training rollout (smith.rollout.episodes) works on token ids for the trainer; evaluation only needs
text and the endpoint's token counts, so it runs on chat messages and works with backends that expose no
token ids. Episodes are batched turn by turn: one `backend.chat` call per turn over every conversation
still running (SMITH paper, "Task 2 Use": up to T = 5 turns; each `<tool_call>` runs in the sandbox and
its output comes back as a tool message).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from smith.models.base import ChatBackend, SamplingParams, parse_tool_calls
from smith.pool import PoolEntry
from smith.rollout.episodes import execute_tool_calls, final_answer
from smith.rollout.prompts import build_messages, use_messages

# Standard CoT baseline (paper's first row): reason freely, then one last `Answer:` line that
# `final_answer` reads.
COT_SYSTEM = (
    "Solve the problem step by step. End your reply with one last line of the form `Answer: <answer>`, "
    "with the answer formatted exactly as the question asks."
)


@dataclass
class Conversation:
    """One question's episode: messages so far, offered tools, tokens billed, tool calls made."""

    key: str
    messages: list[dict[str, Any]]
    menu: dict[str, PoolEntry] = field(default_factory=dict)  # callable name -> tool
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: list[dict[str, Any]] = field(default_factory=list)
    final: str | None = None

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        return [e.openai_tool(name) for name, e in self.menu.items()] or None

    @property
    def answer(self) -> str:
        return final_answer(self.final or "")


def cot_conversation(key: str, question: str) -> Conversation:
    return Conversation(key, [{"role": "system", "content": COT_SYSTEM}, {"role": "user", "content": question}])


def use_conversation(key: str, question: str, menu: dict[str, PoolEntry]) -> Conversation:
    """The use prompt with the tools of `menu`; with an empty menu (no tool could be built) it is a direct
    answer under the same prompt."""
    return Conversation(key, use_messages(question), dict(menu))


def run_conversations(
    backend: ChatBackend,
    conversations: Sequence[Conversation],
    params: SamplingParams,
    max_turns: int,
    sandbox: Any = None,
    limits: Any = None,
    max_tool_chars: int = 2000,
) -> None:
    """Play every conversation to its end: a reply without tool calls is final; a reply with calls gets the
    tools' outputs back; after `max_turns` replies the last one is final whatever it holds."""
    active = list(conversations)
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="rg-tools") as pool:
        for turn in range(max_turns):
            if not active:
                break
            gens = backend.chat([c.messages for c in active], [c.tools for c in active], params)
            calls: list[tuple[Conversation, Any]] = []
            for conv, gen in zip(active, gens, strict=True):
                conv.turns += 1
                conv.prompt_tokens += gen.prompt_tokens
                conv.completion_tokens += gen.completion_tokens
                conv.messages.append({"role": "assistant", "content": gen.text})
                parsed = parse_tool_calls(gen.text)
                if not conv.menu or not (parsed.calls or parsed.errors) or turn == max_turns - 1:
                    conv.final = gen.text
                else:
                    calls.append((conv, parsed))
            futures = [pool.submit(execute_tool_calls, parsed, conv.menu, sandbox, limits, max_tool_chars)
                       for conv, parsed in calls]
            for (conv, _), fut in zip(calls, futures, strict=True):
                outputs, records = fut.result()
                conv.calls += records
                conv.messages += [{"role": "tool", "content": out} for out in outputs]
            active = [conv for conv, _ in calls]


@dataclass
class BuildResult:
    """A writer's reply to a build prompt and what `toolspec.parse_response` made of it."""

    category: str
    ok: bool
    reason: str | None
    response: str
    prompt_tokens: int
    completion_tokens: int
    code: str | None = None
    schema: dict[str, Any] | None = None
    function_name: str | None = None


def build_tools(
    writer: ChatBackend, examples: dict[str, Sequence[Any]], params: SamplingParams
) -> dict[str, BuildResult]:
    """One build prompt per category (N easy question/answer pairs), all in one batched call."""
    from smith.toolspec import parse_response

    cats = list(examples)
    if not cats:
        return {}
    gens = writer.chat([build_messages(examples[c]) for c in cats], None, params)
    out = {}
    for cat, gen in zip(cats, gens, strict=True):
        parsed = parse_response(gen.text)
        out[cat] = BuildResult(
            cat, bool(parsed.ok), None if parsed.ok else str(parsed.reason), gen.text, gen.prompt_tokens,
            gen.completion_tokens,
            code=parsed.code if parsed.ok else None,
            schema=parsed.schema if parsed.ok else None,
            function_name=parsed.function_name if parsed.ok else None,
        )
    return out
