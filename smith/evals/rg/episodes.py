"""rg evaluation episodes: message-level episodes of the one tool loop (`smith.episodes.play`) over any
ChatBackend (local model, LoRA checkpoint, vLLM, endpoint).

Evaluation only needs text and the endpoint's token counts, so it runs on chat messages and works with
backends that expose no token ids: one `backend.chat` call per turn over every episode still running (SMITH
paper, "Task 2 Use": up to T = 5 turns; each `<tool_call>` runs in the sandbox and its output comes back as
a tool message).
"""
from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from smith.episodes import Episode, menu_executor, play
from smith.models.base import ChatBackend, SamplingParams
from smith.pool import PoolEntry
from smith.rollout.prompts import build_messages, use_messages

# Standard CoT baseline (paper's first row): reason freely, then one last `Answer:` line that
# `smith.episodes.Episode.answer` reads.
COT_SYSTEM = (
    "Solve the problem step by step. End your reply with one last line of the form `Answer: <answer>`, "
    "with the answer formatted exactly as the question asks."
)


def cot_episode(key: str, question: str) -> Episode:
    """No tools: the first reply is the answer."""
    return Episode([{"role": "system", "content": COT_SYSTEM}, {"role": "user", "content": question}], key=key)


def use_episode(key: str, question: str, menu: dict[str, PoolEntry]) -> Episode:
    """The use prompt with the tools of `menu`; with an empty menu (no tool could be built) it is a direct
    answer under the same prompt."""
    return Episode(use_messages(question), dict(menu), key=key)


def run_episodes(backend: ChatBackend, episodes: Sequence[Episode], params: SamplingParams, max_turns: int,
                 sandbox: Any = None, limits: Any = None, max_tool_chars: int = 2000) -> None:
    """Play every episode to its end on the one tool loop (`smith.episodes.play`): a reply without tool calls
    is final; after `max_turns` replies the last one is final whatever it holds."""
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="rg-tools") as pool:
        play(episodes, backend, params, max_turns, menu_executor(sandbox, limits, max_tool_chars, pool),
             last_turn="answer")


def question_row(cat: Any, item: Any, conv: Episode | None, log_chars: int) -> dict[str, Any]:
    """One question's row of episodes.jsonl: its answer scored (the category's own `score`), its turns, I/O tokens,
    offered tools and tool calls; `conv` None is a question left unanswered (scored as an empty answer)."""
    conv = conv or Episode([])
    answer = conv.answer or ""
    return {
        "key": f"{cat.name}/{item.id}", "category": cat.name, "group": cat.group, "split": cat.split,
        "item": item.id, "answer": answer, "expected": item.answer, "correct": bool(cat.score(answer, item) >= 1.0),
        "turns": conv.turns, "prompt_tokens": conv.prompt_tokens, "completion_tokens": conv.completion_tokens,
        "tools": sorted(conv.menu), "tool_calls": len(conv.calls),
        "tool_call_ok": sum(c.get("status") == "ok" for c in conv.calls), "final": (conv.final or "")[:log_chars],
    }


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
    from smith.models.chat_format import without_reasoning
    from smith.toolspec import parse_response

    cats = list(examples)
    if not cats:
        return {}
    gens = writer.chat([build_messages(examples[c]) for c in cats], None, params)
    out = {}
    for cat, gen in zip(cats, gens, strict=True):
        parsed = parse_response(without_reasoning(gen.text))
        out[cat] = BuildResult(
            cat, bool(parsed.ok), None if parsed.ok else str(parsed.reason), gen.text, gen.prompt_tokens,
            gen.completion_tokens,
            code=parsed.code if parsed.ok else None,
            schema=parsed.schema if parsed.ok else None,
            function_name=parsed.function_name if parsed.ok else None,
        )
    return out
