"""Who plays the vault: any chat backend, or a scripted reference agent (section 5.1, Appendix B).

Scripted agents are ChatBackends too: each reply is computed from the conversation alone (the texts an
LLM would read), so the same episode loop, parser and logs serve both. They know the rules (key_i opens
door_i, examine drops a random type and key, pickup is free) and the cell's n and T, never the recipe.

- optimal: builds when E[build] < E[grind] (Appendix B), else grinds. Building: pick up after every
  examine, try each untried pair of held types as soon as both are held (in the single-shard v1 world,
  T = 1: its one kind twice), then per closed door use its key or, lacking it, the machine first.
- grinder: examine, pick up, use every key it holds on its door; never combines.
- random: a uniformly random verb with uniformly random known objects as arguments.

In the Deep Lomekwi world (`world="deep"`) the same three policies read that world's texts
(`deep/agents.py`).
"""

from __future__ import annotations

import logging
import random
import zlib
from dataclasses import dataclass
from itertools import combinations

from tqdm import tqdm

from smith.evals.lomekwi.costs import build_preferred
from smith.evals.lomekwi.deep import agents as deep_agents
from smith.evals.lomekwi.deep.env import WORLD as DEEP_WORLD
from smith.evals.lomekwi.episode import LomekwiEpisode
from smith.evals.lomekwi.observed import Observed, doors_in
from smith.evals.lomekwi.parse import extract_action
from smith.models.base import ChatBackend, Generation, Message, SamplingParams
from smith.models.chat_format import without_reasoning

SCRIPTED = ("optimal", "grinder", "random")
log = logging.getLogger(__name__)


@dataclass
class Belief:
    """What the conversation so far tells a scripted agent."""

    doors: list[str]
    seen: Observed
    tried: set[tuple[str, str]]
    key_base: str | None

    def key_for(self, door: str) -> str | None:
        return f"{self.key_base}_{door.rsplit('_', 1)[1]}" if self.key_base else None

    def closed(self) -> list[str]:
        """Doors not yet reported open; the report echoes the door as typed, case folded by the parser."""
        opened = {d.casefold() for d in self.seen.opened}
        return [d for d in self.doors if d.casefold() not in opened]


def read_conversation(messages: list[Message]) -> Belief:
    """Rebuild the public state from the transcript: each assistant reply's action and the
    observation that answered it (the text before the status line)."""
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    doors = doors_in(messages[users[0]]["content"])
    seen, tried, key_base = Observed(), set(), None
    for i in users[1:]:
        known = {doors[0].rsplit("_", 1)[0], *seen.dropped_types, *([seen.machine] if seen.machine else [])}
        if key_base:
            known.add(key_base)
        act = extract_action(messages[i - 1]["content"], frozenset(x.lower() for x in known))
        if act is None:
            continue
        obs = messages[i]["content"].split("\n\n")[0]
        seen.feed(act, obs)
        if act[0] == "combine":
            tried.add(tuple(sorted(act[1:3])))
        if key_base is None and (seen.held_keys or seen.ground_keys):
            key_base = next(iter(seen.held_keys | seen.ground_keys)).rsplit("_", 1)[0]
    return Belief(doors, seen, tried, key_base)


def _grind_step(b: Belief) -> str:
    if b.seen.ground_keys or b.seen.ground_types:
        return "pickup"
    for door in b.closed():
        key = b.key_for(door)
        if key in b.seen.held_keys:
            return f"use {key} {door}"
    return f"examine {b.closed()[0]}"


def _build_step(b: Belief, n_types: int) -> str:
    if b.seen.ground_keys or b.seen.ground_types:
        return "pickup"
    if b.seen.machine and b.seen.fused:
        door = b.closed()[0]
        key = b.key_for(door)
        return f"use {key} {door}" if key in b.seen.held_keys else f"use {b.seen.machine} {door}"
    held = sorted(t for t, c in b.seen.held_types.items() if c >= 1)
    pairs = list(combinations(held, 2))
    if n_types == 1:  # the v1 world: two shards of its one kind build the machine
        pairs = [(t, t) for t in held if b.seen.held_types[t] >= 2]
    for pair in pairs:
        if pair not in b.tried:
            return f"combine {pair[0]} {pair[1]}"
    return f"examine {b.closed()[0]}"


def _random_step(b: Belief, rng: random.Random) -> str:
    objects = sorted(b.seen.held_keys | set(b.seen.held_types) | ({b.seen.machine} if b.seen.machine else set()))
    verb = rng.choice(["examine", "combine", "use", "pickup"])
    if verb == "pickup":
        return "pickup"
    if verb == "examine":
        return f"examine {rng.choice(b.doors + objects)}"
    if verb == "combine" and len(objects) >= 2:
        a, c = rng.sample(objects, 2)
        return f"combine {a} {c}"
    if verb == "use" and objects:
        return f"use {rng.choice(objects)} {rng.choice(b.doors)}"
    return f"examine {rng.choice(b.doors)}"


class ScriptedAgent:
    """A reference policy behind the ChatBackend interface; `n_types` is the cell's T, `world` the world
    whose texts it reads ("deep" for Deep Lomekwi, anything else for the vault)."""

    def __init__(self, policy: str, n_types: int, seed: int = 0, world: str = "pickup") -> None:
        if policy not in SCRIPTED:
            raise ValueError(f"scripted agent '{policy}' not found; known: {', '.join(SCRIPTED)}")
        self.policy, self.n_types, self.seed, self.world = policy, n_types, seed, world
        self.name = f"scripted:{policy}"

    def reply(self, messages: list[Message]) -> str:
        first = next(m["content"] for m in messages if m["role"] == "user")
        rng = random.Random(zlib.crc32(f"{self.seed}|{len(messages)}|{first}".encode()))
        if self.world == DEEP_WORLD:
            return deep_agents.scripted_reply(self.policy, messages, self.n_types, rng)
        b = read_conversation(messages)
        if self.policy == "random":
            return "I act at random.\n" + _random_step(b, rng)
        if self.policy == "optimal" and build_preferred(len(b.doors), self.n_types):
            return "Plan: build the machine (E[build] < E[grind]).\n" + _build_step(b, self.n_types)
        return "Plan: grind for keys.\n" + _grind_step(b)

    def chat(self, conversations: list[list[Message]], tools: list | None = None,
             params: SamplingParams | None = None) -> list[Generation]:
        return [Generation(text=self.reply(c)) for c in conversations]


def replies(backend: ChatBackend, conversations: list[list[Message]],
            params: SamplingParams) -> list[tuple[Generation | None, str | None]]:
    """One (reply, None) or (None, error) per conversation. A failed model call is a no-op turn of its
    episode, as in the released runner, not the end of the run; when a batched call fails, each
    conversation is asked again on its own, so one failing request costs only its own episode's turn."""
    try:
        gens = backend.chat(conversations, None, params)
    except Exception as e:  # any failure, as the released runner catches
        if len(conversations) > 1:
            return [r for c in conversations for r in replies(backend, [c], params)]
        log.warning("lomekwi: model call failed, the turn is a no-op: %s: %s", type(e).__name__, e)
        return [(None, f"{type(e).__name__}: {e}")]
    if len(gens) != len(conversations):
        raise RuntimeError(f"backend {backend.name} returned {len(gens)} completions for {len(conversations)} "
                           "conversations")
    return [(g, None) for g in gens]


def play(backend: ChatBackend, episodes: list[LomekwiEpisode], params: SamplingParams,
         progress: tqdm | None = None) -> list[LomekwiEpisode]:
    """Play episodes in lockstep: one batched `chat` call per turn over every episode still running. A reply's
    reasoning (`<think>` blocks) never acts: the first parseable line after it does."""
    live = list(episodes)
    while live:
        still = []
        for e, (g, err) in zip(live, replies(backend, [e.messages for e in live], params), strict=True):
            usage = {"input_tokens": g.prompt_tokens, "output_tokens": g.completion_tokens} if g else {}
            if e.feed(without_reasoning(g.text) if g else "", usage, api_error=err):
                still.append(e)
            elif progress is not None:
                progress.update(1)
        live = still
    return episodes
