"""The one multi-turn tool loop: every episode smith plays with tools goes through `play`.

The training rollout (use episodes), the model-based evaluator and the rg evaluation all run the same state
machine: generate a reply for every open episode in one batch -> read its tool calls -> run them (sandbox) ->
feed the outputs back -> ... until a reply without calls (the answer), the turn limit or the episode's own
token budget. Replies are read, and outputs fed back, in the backend's chat format (`smith.models.chat_format`:
the model family's tool-call syntax, reasoning left out). Two renderings of the same episode:

- token level (training): the episode's transcript holds prompt ids, completion ids, the sampled tokens'
  log-probs and the loss mask (tool outputs are appended with mask 0); the policy continues the ids. Each
  episode has its own budget: each row of a turn's batch stops at its own limit (`turn_limit`, the backend's
  `limits`); a long neighbour never truncates it. A reply generated before `play` (`Episode.ahead`: the
  rollout's first use turn, decoded beside the step's builds) is taken as the episode's next turn.
- message level (evaluation, the evaluator): the transcript holds chat messages; assistant turns carry
  structured `tool_calls` with ids and each output goes back as the matching `tool` message, as
  OpenAI-compatible servers and chat templates expect.

Who runs the calls is the caller's choice (`Executor`): the menu executor here runs each episode's calls
against its menu of pool tools; the evaluator checks calls against one tool's schema and runs a whole turn in
one sandbox batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from sandbox import FAULT, run_pure
from smith.models.base import Generation, SamplingParams, clip_generation, derive_seed
from smith.models.chat_format import ParsedToolCalls, Reply, ReplyFormat, format_of
from smith.toolspec import ToolSpec

# What a turn-limited episode does with its last reply when that reply calls tools:
#   "end": stop there (training: nothing would read the outputs);
#   "answer": take the reply as the final answer anyway (rg evaluation);
#   "run": still run the calls and record their outputs, then stop (the evaluator grades the last output).
LastTurn = Literal["end", "answer", "run"]
# (episode, parsed calls) pairs of one turn -> per episode, the text fed back for each of its parse errors then
# each of its calls, in that order; the executor appends what happened to `episode.calls`.
Executor = Callable[[list[tuple["Episode", ParsedToolCalls]]], list[list[str]]]


@dataclass(frozen=True)
class MenuTool:
    """A tool on an episode's menu: its spec and the category it serves (a pool entry has both fields too)."""

    tool: ToolSpec
    category: str = ""


@dataclass
class Episode:
    """One episode's state. `menu`: callable name -> a MenuTool or a pool entry (a `tool` ToolSpec and a
    `category`); an episode
    without tools ends at its first reply. `transcript`: a message list (message level), or, token level, an
    object with `prompt_ids`, `completion_ids` and `extend(ids, logprobs, trained)` (the rollout's `Sample`)."""

    transcript: Any
    menu: dict[str, Any] = field(default_factory=dict)
    budget: int | None = None  # completion tokens this episode may hold (token level); None: no own limit
    key: Any = None  # the caller's handle (a task, a question id)
    turns: int = 0
    calls: list[dict[str, Any]] = field(default_factory=list)
    final: str | None = None  # the reply that answered (no tool call)
    reply: Reply | None = None  # that reply as its chat format reads it
    end: str | None = None  # None while open; then "answer", "turns", "budget", or a caller's reason
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ahead: Generation | None = None  # its next reply, generated before `play` in a batch shared with other rows
    stream: int | None = None  # its random stream in a seeded batch (`row_streams`); None: its row's index
    limit: int | None = None  # each reply's own token limit, below the turn's (a judge's verdict beside calls)

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        return [entry.tool.openai_tool(name) for name, entry in self.menu.items()] or None

    @property
    def room(self) -> int | None:
        if self.budget is None or self.message_level:
            return None
        return self.budget - len(self.transcript.completion_ids)

    @property
    def message_level(self) -> bool:
        return isinstance(self.transcript, list)

    @property
    def truncated(self) -> bool:
        return self.end == "budget"

    @property
    def answer(self) -> str | None:
        """The final reply's answer (reasoning and tool calls removed, `Answer:` honoured)."""
        return None if self.reply is None else self.reply.answer


def execute_tool_calls(
    parsed: ParsedToolCalls, menu: dict[str, Any], sandbox: Any, limits: Any, max_chars: int = 2000
) -> tuple[list[str], list[dict[str, Any]]]:
    """Run one turn's parsed tool calls against `menu` (name -> entry with `tool`, a ToolSpec, and
    `category`) in the sandbox. Every failure (malformed call, unknown tool, bad arguments, a raising tool)
    becomes text fed back to the model, never an exception; a sandbox fault is retried once (`run_pure`)."""
    outs = [f"error: {e}" for e in parsed.errors]
    records: list[dict[str, Any]] = [{"status": "malformed", "error": e} for e in parsed.errors]
    for call in parsed.calls:
        entry = menu.get(call.name)
        record: dict[str, Any] = {"name": call.name, "arguments": call.arguments}
        if entry is None:
            name = call.name.encode("utf-8", "backslashreplace").decode()  # a lone surrogate no tokenizer takes
            outs.append(f"error: unknown tool '{name}'; available: {', '.join(menu)}")
            record["status"] = "unknown_tool"
        else:
            r = run_pure(sandbox, entry.tool.code, entry.tool.function_name, [call.arguments], limits)[0]
            record.update(status=r.status, category=entry.category)
            if r.status == "ok":
                out = r.value if isinstance(r.value, str) else json.dumps(r.value)
                record["output"] = out
            elif r.status == FAULT:  # twice: the machine's failure, told as such
                out = f"error: the sandbox failed while running the tool, not the tool: {r.error or ''}".strip()
            else:
                out = f"error: {r.status}: {r.error or ''}".strip()
            outs.append(out[:max_chars])
        records.append(record)
    return outs, records


def menu_executor(sandbox: Any, limits: Any, max_chars: int = 2000, pool: ThreadPoolExecutor | None = None
                  ) -> Executor:
    """Runs each episode's calls against its own menu, episodes in parallel on `pool` (or one by one)."""

    def run(batch: list[tuple[Episode, ParsedToolCalls]]) -> list[list[str]]:
        def one(item: tuple[Episode, ParsedToolCalls]) -> list[str]:
            episode, parsed = item
            outs, records = execute_tool_calls(parsed, episode.menu, sandbox, limits, max_chars)
            episode.calls += records
            return outs

        return list(pool.map(one, batch)) if pool is not None else [one(item) for item in batch]

    return run


def play(
    episodes: Sequence[Episode],
    backend: Any,
    params: SamplingParams,
    max_turns: int,
    execute: Executor,
    *,
    last_turn: LastTurn = "end",
) -> None:
    """Play every open episode (`end is None`) to its end, all open ones batched per turn; the episodes of one
    call are all token level (the backend needs `continue_ids` and `tokenizer`) or all message level (it
    needs `chat`). With `params.seed`, turn t is seeded `derive_seed(seed, t)`, each row on its episode's
    `stream` when every one has one."""
    if max_turns < 1:
        raise ValueError(f"max_turns must be >= 1, got {max_turns}")
    fmt = format_of(backend)
    for turn in range(max_turns):
        for e in episodes:
            if e.end is None and e.room is not None and e.room <= 0:  # e.g. an inner build used the budget
                e.end = "budget"
        active = [e for e in episodes if e.end is None]
        if not active:
            return
        gens = _generate(active, backend, params if params.seed is None else
                         replace(params, seed=derive_seed(params.seed, turn)))
        pending: list[tuple[Episode, ParsedToolCalls]] = []
        for e, g in zip(active, gens, strict=True):
            reply = _take_reply(e, g, turn, fmt)
            parsed = reply.tool_calls
            if e.room is not None and g.finish_reason == "length":
                e.end = "budget"
            elif not e.menu or not (parsed.calls or parsed.errors):
                e.final, e.reply, e.end = g.text, reply, "answer"
            elif turn == max_turns - 1 and last_turn != "run":
                e.end = "turns"
                if last_turn == "answer":
                    e.final, e.reply = g.text, reply
            else:
                pending.append((e, parsed))
        for (e, parsed), outs in zip(pending, execute(pending) if pending else [], strict=True):
            _feed_back(e, parsed, outs, fmt, turn)
            if e.room is not None and e.room <= 0:
                e.end = "budget"
            elif turn == max_turns - 1:
                e.end = "turns"


def turn_limit(e: Episode, params: SamplingParams) -> int:
    """The tokens an open episode's next reply may take: the turn's limit, within its own limit and budget."""
    return max(1, min([params.max_new_tokens, *(n for n in (e.limit, e.room) if n is not None)]))


def _generate(active: list[Episode], backend: Any, params: SamplingParams) -> list[Generation]:
    """One reply per open episode; token level, an episode's `ahead` reply (cut at the turn's limit) is taken and the
    others are generated in one batch, each row to its own `turn_limit` (a long neighbour never cuts a short one)."""
    if active[0].message_level:
        own = {"limits": [turn_limit(e, params) for e in active]} if any(e.limit for e in active) else {}
        return backend.chat([e.transcript for e in active], [e.tools for e in active], params, **own)
    limits = [turn_limit(e, params) for e in active]
    todo = [(e, n) for e, n in zip(active, limits, strict=True) if e.ahead is None]
    keyed = todo and all(e.stream is not None for e, _ in todo)
    streams = {"streams": [e.stream for e, _ in todo]} if keyed else {}
    gens = iter(backend.continue_ids([e.transcript.prompt_ids + e.transcript.completion_ids for e, _ in todo],
                                     replace(params, max_new_tokens=max(n for _, n in todo)),
                                     limits=[n for _, n in todo], **streams) if todo else [])
    out = []
    for e, n in zip(active, limits, strict=True):
        if e.ahead is None:
            out.append(next(gens))
        else:
            out.append(clip_generation(e.ahead, n, backend.chat_format))
            e.ahead = None
    return out


def _take_reply(e: Episode, g: Generation, turn: int, fmt: ReplyFormat) -> Reply:
    """Record one reply; its tool calls are read in the backend's chat format, reasoning left out."""
    e.turns += 1
    e.prompt_tokens += g.prompt_tokens
    e.completion_tokens += g.completion_tokens
    reply = fmt.parse(g.text)
    if not e.message_level:
        e.transcript.extend(g.completion_ids, g.logprobs, trained=True)
    else:
        e.transcript.append(fmt.assistant_message(reply, turn))
    return reply


def _feed_back(e: Episode, parsed: ParsedToolCalls, outs: list[str], fmt: Any, turn: int) -> None:
    """Outputs back to the model: token level through the format's continuation (a ChatFormat: the backend has a
    tokenizer), message level as tool messages answering the calls' ids."""
    if not e.message_level:
        ids = fmt.continuation([{"role": "tool", "content": o} for o in outs])
        e.transcript.extend(ids, None, trained=False)
        return
    n_err = len(parsed.errors)
    e.transcript.extend({"role": "tool", "tool_call_id": f"call_{turn}_{j}", "content": out}
                        for j, out in enumerate(outs[n_err:]))
    if n_err:  # an unreadable call has no id to answer: say so in a user turn
        e.transcript.append({"role": "user", "content": f"Your tool call could not be read: {parsed.errors[0]}"})

