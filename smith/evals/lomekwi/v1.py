"""The released single-shard world (run_lomekwi_llm.py): its system prompt and its state class, a `Vault`
with no ground and no pickup."""

from __future__ import annotations

from typing import ClassVar

from smith.evals.lomekwi.env import Vault
from smith.evals.lomekwi.parse import V1_VERBS

V1_SYSTEM_PROMPT = (
    "You are an agent in a vault and must open every locked door using as few actions as possible. End each "
    "turn with exactly one action on its own line: examine <object>, combine <a> <b>, or use <object> <door>. "
    "Think briefly, then act. Minimize total actions."
)


class V1Vault(Vault):
    """The released single-shard world (run_lomekwi_llm.py): no ground and no pickup; searching a door
    puts a random door's key and one shard straight into the inventory; two shards build the machine.

    The release has the world, its parser and its prompt but no runner of its own; smith plays it with
    the same episode loop (budget, stop rules, progress measure) as the pickup world.
    """

    system_prompt: ClassVar[str] = V1_SYSTEM_PROMPT

    def verbs(self) -> tuple[str, ...]:
        return V1_VERBS

    def _search(self, tok: str, door: int) -> str:
        w = self.world
        bp = w.types[0]
        j = self.rng.randint(1, w.n)  # the v1 draw: a key only, the shard is always the one kind
        self.held_keys.add(j)
        self.held_types[bp] = self.held_types.get(bp, 0) + 1
        self.dropped_types.add(bp)
        return (f"You search {self._say(tok, w.doors[door - 1])}. Out falls {w.key(j)} and a {bp}. "
                f"You now hold {self.held_types[bp]} {bp}(s).")

    def _type_text(self, name: str) -> str:
        if self.hint:
            return f"A small dull {name}. It is faintly warm, and the warmth grows when several are held together."
        return f"A small dull {name}. Nothing remarkable."

    def combine(self, a: str, b: str) -> str:
        bp = self.world.types[0]
        if self._type(a) != bp or self._type(b) != bp:
            return f"You combine {a} and {b}: nothing happens."
        if self.held_types.get(bp, 0) < 2:
            return f"You need at least two {bp}s to combine."
        if self.has_machine:
            return f"You already hold a {self.world.machine}."
        self.has_machine = True
        return f"You combine two {bp}s. They fuse into a {self.world.machine} (new). It persists."

    def _verb_list(self) -> str:
        return ("  examine <object>      - inspect or search an object\n"
                "  combine <a> <b>       - combine two objects you hold\n"
                "  use <object> <door>   - use an object on a door\n")

    def _budget_aside(self) -> str:
        return ""  # no pickup in this world to exclude
