"""The one interface every generation backend implements (hf, vllm, openai, scripted).

Suites, rollouts and the trainer talk only to `ChatBackend`, so a new backend or a scripted
test double drops in without touching them (docs/architecture.md, "Layout and layers", inspect-ai style).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from smith.models.chat_format import ChatFormat, Message, Tool, chat_format


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
    seed: int | None = None  # the call's; a row draws from (seed, its stream: `row_streams`)


_MASK64 = (1 << 64) - 1


def mix64(x: int) -> int:
    """splitmix64's finaliser: a 64-bit integer whose bits all depend on every bit of `x`."""
    x &= _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def derive_seed(seed: int, k: int) -> int:
    """The seed of a call's `k`-th sub-call (an episode's turn k), distinct for every k and apart from `seed`."""
    return mix64(seed + (k + 1) * 0x9E3779B97F4A7C15) >> 2


def row_streams(streams: Sequence[int] | None, rows: int) -> list[int]:
    """Each row's random stream in a seeded `continue_ids` batch: `streams` (one per row), or the row's index. A row
    draws its tokens from (the call's seed, its stream) alone, so two calls that give it the same pair sample it
    alike whatever else they batch: the rollout keys a row by its sample's place in the step, so a run and its
    control draw the same randomness for the same sample (common random numbers, docs/training.md)."""
    if streams is None:
        return list(range(rows))
    streams = [int(s) for s in streams]
    if len(streams) != rows:
        raise ValueError(f"streams must be one per row ({rows}); got {len(streams)}")
    return streams


def row_seeds(seed: int, streams: Sequence[int] | None, rows: int) -> list[int]:
    """Each row's own seed where an engine seeds rows, not draws (vLLM's requests): `seed` + its stream, as a
    non-negative 64-bit integer."""
    return [(seed + s) & (2**63 - 1) for s in row_streams(streams, rows)]


def row_limits(limits: Sequence[int] | None, rows: int, params: SamplingParams) -> list[int]:
    """Each row's token limit in a `continue_ids` batch: `limits` (one per row, 1 to params.max_new_tokens; rows of
    different lengths share one batch, as a use turn beside the step's builds), or params.max_new_tokens."""
    if limits is None:
        return [params.max_new_tokens] * rows
    limits = [int(n) for n in limits]
    if len(limits) != rows or not all(1 <= n <= params.max_new_tokens for n in limits):
        raise ValueError(f"limits must be one per row ({rows}), each 1 to max_new_tokens "
                         f"({params.max_new_tokens}); got {limits}")
    return limits


def clip_generation(g: Generation, max_new_tokens: int, fmt: ChatFormat) -> Generation:
    """`g` as if generation had stopped after `max_new_tokens` tokens (sampling is causal: the cut is exact)."""
    if len(g.completion_ids) <= max_new_tokens:
        return g
    ids = g.completion_ids[:max_new_tokens]
    return replace(g, completion_ids=ids, logprobs=g.logprobs[:max_new_tokens], finish_reason="length",
                   text=fmt.decode(ids), completion_tokens=len(ids))


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
    """Shared half of the backends that generate from token ids (hf, vllm, scripted, TRL's vLLM): the
    tokenizer's chat format (smith.models.chat_format) renders a conversation, `continue_ids` (the subclass)
    generates from the ids, each row to its own limit when given `limits` (`row_limits`)."""

    tokenizer: Any

    @property
    def chat_format(self) -> ChatFormat:
        return chat_format(self.tokenizer)

    def render(self, conversation: list[Message], tools: list[Tool] | None = None) -> list[int]:
        """The exact prompt ids: the chat format's rendering with `tools`, ending in the assistant header."""
        return self.chat_format.render(conversation, tools)

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


class Metered:
    """A backend in one role of a SMITH step (policy, evaluator, judge) that counts what it generates: the step's
    `tokens/<role>/<engine>` (completion tokens) and `time/<role>` (seconds inside generation calls), so a user
    sees where a step's tokens and seconds go on whichever engine serves each role. Everything else is the
    backend's own."""

    def __init__(self, backend: Any, role: str) -> None:
        self.backend, self.role = backend, role
        self.engine = getattr(backend, "engine", type(backend).__name__)
        self._lock = threading.Lock()
        self._tokens, self._seconds = 0, 0.0

    def __getattr__(self, name: str) -> Any:
        if name == "backend":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.backend, name)

    def _count(self, gens: list[Generation], t0: float) -> list[Generation]:
        with self._lock:
            self._seconds += time.perf_counter() - t0
            self._tokens += sum(len(g.completion_ids) or g.completion_tokens for g in gens)
        return gens

    def continue_ids(self, prompts: Any, params: SamplingParams | None = None, **kwargs: Any) -> list[Generation]:
        t0 = time.perf_counter()
        return self._count(self.backend.continue_ids(prompts, params, **kwargs), t0)

    def chat(self, conversations: list[list[Message]], tools: list[list[Tool] | None] | None = None,
             params: SamplingParams | None = None, **kwargs: Any) -> list[Generation]:
        t0 = time.perf_counter()
        return self._count(self.backend.chat(conversations, tools, params, **kwargs), t0)

    def shift(self, other: Metered, tokens: int) -> None:
        """Count `tokens` this role's call generated for `other` (the judge's rows in the evaluator's batch) as
        `other`'s; the call's seconds stay this role's."""
        with self._lock:
            self._tokens -= tokens
        with other._lock:
            other._tokens += tokens

    def take(self) -> dict[str, float]:
        """This role's counts since the last `take`, as log columns; reset."""
        with self._lock:
            out = {f"tokens/{self.role}/{self.engine}": float(self._tokens), f"time/{self.role}": self._seconds}
            self._tokens, self._seconds = 0, 0.0
        return out
