"""The reference agents in the workshop (optimal, grinder, random): they read only the conversation, like an
LLM, and reply one action (Lomekwi's agents.py hands them the deep world's turns)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from itertools import combinations

from smith.evals.lomekwi.deep.costs import build_preferred
from smith.evals.lomekwi.deep.importer import Seen
from smith.evals.lomekwi.parse import V1_VERBS, extract_action
from smith.models.base import Message

_CONTAINERS = re.compile(r"There are (\d+) locked containers: (.*?)\.\n")


@dataclass
class Belief:
    """What the conversation tells a scripted agent: containers, what it holds, the pairs it tried."""

    containers: list[str]
    seen: Seen
    tried: set[tuple[str, str]]

    def closed(self) -> list[str]:
        return [c for c in self.containers if c not in self.seen.opened]

    def key_for(self, container: str) -> str | None:
        base = next(iter(self.seen.keys), None)
        return f"{base.rsplit('_', 1)[0]}_{container.rsplit('_', 1)[1]}" if base else None


def read_conversation(messages: list[Message]) -> Belief:
    """Rebuild the public state: each assistant reply's action (the released parser) and the observation
    that answered it (the text before the status line)."""
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    m = _CONTAINERS.search(messages[users[0]]["content"])
    if not m:
        raise ValueError("not a Deep Lomekwi initial observation: no 'There are N locked containers: ...' line")
    seen, tried = Seen(), set()
    for i in users[1:]:
        act = extract_action(messages[i - 1]["content"], verbs=V1_VERBS)
        if act is None:
            continue
        seen.feed(messages[i]["content"].split("\n\n")[0])
        if act[0] == "combine":
            tried.add((min(act[1], act[2]), max(act[1], act[2])))
    return Belief(m.group(2).split(", "), seen, tried)


def _grind_step(b: Belief) -> str:
    for c in b.closed():
        key = b.key_for(c)
        if key in b.seen.keys:
            return f"use {key} {c}"
    return f"examine {b.closed()[0]}"


def _build_step(b: Belief) -> str:
    s, first = b.seen, b.closed()[0]
    if s.axe:
        key = b.key_for(first)
        return f"use {key} {first}" if key in s.keys else f"use {s.axe} {first}"
    if s.part and s.inv.get(s.part, 0) >= 2:
        return f"combine {s.part} {s.part}"
    if s.pair:
        a, c = s.pair
        return f"combine {a} {c}" if s.inv.get(a, 0) >= 1 and s.inv.get(c, 0) >= 1 else f"examine {first}"
    untried = [p for p in combinations(s.resources(), 2) if p not in b.tried]
    return f"combine {untried[0][0]} {untried[0][1]}" if untried else f"examine {first}"


def _random_step(b: Belief, rng: random.Random) -> str:
    s = b.seen
    objects = sorted(s.keys | set(s.inv))
    verb = rng.choice(["examine", "combine", "use"])
    if verb == "combine" and len(objects) >= 2:
        a, c = rng.sample(objects, 2)
        return f"combine {a} {c}"
    if verb == "use" and objects:
        return f"use {rng.choice(objects)} {rng.choice(b.containers)}"
    return f"examine {rng.choice(b.containers + objects)}"


def scripted_reply(policy: str, messages: list[Message], n_types: int, rng: random.Random) -> str:
    """The reply of a reference policy in the deep world: optimal builds iff `build_preferred` (else grinds),
    trying untried pairs of held resources, then the known pair again for the second part, then the axe;
    grinder examines and uses the keys it holds; random picks a verb and known objects at random."""
    b = read_conversation(messages)
    if policy == "random":
        return "I act at random.\n" + _random_step(b, rng)
    if policy == "optimal" and build_preferred(len(b.containers), n_types):
        return "Plan: build the axe (E[build] < E[grind]).\n" + _build_step(b)
    return "Plan: grind for keys.\n" + _grind_step(b)
