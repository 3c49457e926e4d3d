"""Deep Lomekwi's world (`DeepWorld`, drawn by `make_deep_world`) and its state machine (`Workshop`, a `Vault`
with the two-step recipe and consumed inputs). The game is described in deep/__init__.py.

Transitions (each tested in tests/test_lomekwi_deep.py; C container, K key, R resource, P part, A axe):

 examine C (1..n)            K and R into the inventory  "You search C[ (already open)]. Out falls K and 1 R.
                                                          You now hold <count> R."
 examine R                   -                            "A small R. Nothing remarkable." (held or not)
 examine P, a part ever made -                            "A P. It looks like a fabricated component."
 examine A, the axe made     -                            "A A. It has a working edge; you sense it could force
                                                          a container."
 examine <key>_<i>           -                            "K: a small fitted key."
 examine anything else       -                            "You examine X: nothing of note."
 combine r0 r1, both held    r0, r1 -> P                  "You combine 1 r0, 1 r1 into 1 P (new|another). It
                                                          persists."
 combine P P, two held       two P -> A                   "You combine 2 P into 1 A (new|another). It persists."
 combine anything else       -                            "You try to combine X and Y: nothing happens."
 use X on a non-container    -                            "There is no X."
 use X on an open C          -                            "C is already open."
 use A, none held            -                            "You don't have a A."
 use A on C                  C's key                      "You use the A on C. It yields K. (the A remains with
                                                          you.)"
 use K not held              -                            "You don't have K."
 use C's own key             C opens, its wood held       "You use K on C: it fits. C opens, revealing 1 W (a
                                                          kind of wood). You now hold it."
 use another held key        -                            "You use K on C: it does not fit."
 use anything else on C      -                            "You use X on C: nothing happens."

The loop, the parser (the released one, without pickup), the echoes and the rule switches are Lomekwi's
(`episode.LomekwiEpisode`, `env.Rules`).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

from smith.evals.lomekwi.env import Vault
from smith.evals.lomekwi.parse import V1_VERBS
from smith.evals.lomekwi.relabel import relabel
from smith.evals.lomekwi.world import World

WORLD = "deep"
POOL_SIZE = 600  # the released Deep Lomekwi draws its tokens from a 600-token pool (Lomekwi: 300)
STRUCTURE = ("container", "key", "axe", "part")
FAMILY_LETTERS = "abcdefghijkmnpqrstuvwxyz"  # no l or o: they read as 1 and 0 next to the family's numbers
SYSTEM_PROMPT = (
    "You are an agent in a workshop and must collect every different kind of a target material, each locked "
    "inside its own container, using as few actions as possible. End each turn with exactly one action on its "
    "own line: examine <object>, combine <a> <b> (exactly two items), or use <object> <container>. Think "
    "briefly, then act. Minimize total actions."
)
NOOP_MESSAGE = ("No parseable action. Use examine / combine <a> <b> / use <item> <container>, one action on its "
                "own line.")


@dataclass(frozen=True)
class DeepWorld(World):
    """A Deep Lomekwi layout: `door_base` names the containers, `machine` is the axe, `types` the resource
    family in latent order (r0, r1, ...), `recipe` = (r0, r1), `woods` the n wood kinds in container order."""

    part: str = ""
    woods: tuple[str, ...] = ()
    variant: str = WORLD

    def vault_class(self) -> type[Vault]:
        return Workshop

    def labels(self) -> dict[str, Any]:
        """The released row's `labels`: role -> label."""
        out = {"container": self.door_base, "key": self.key_base, "axe": self.machine, "part": self.part}
        out.update({f"w{i}": w for i, w in enumerate(self.woods)})
        out.update({f"r{i}": r for i, r in enumerate(self.types)})
        return out


def world_from_labels(labels: dict[str, str], n: int, n_types: int) -> DeepWorld:
    """The world a released row names (its labels are the row's; smith's token pool need not draw them)."""
    types = tuple(labels[f"r{i}"] for i in range(n_types))
    return DeepWorld(n, labels["container"], labels["key"], labels["axe"], types, (types[0], types[1]),
                     part=labels["part"], woods=tuple(labels[f"w{i}"] for i in range(n)))


def make_deep_world(seed: int, n: int, n_types: int, scheme: str = "tokens", fold_case: bool = False) -> DeepWorld:
    """Relabel the structure and the n woods with `seed` (the released element order and pool size), then
    name the T resources as one look-alike family: a random stem letter not used as a label, numbered 1..T
    in a random order, so nothing but trying tells the recipe pair apart."""
    if n_types < 2:
        raise ValueError(f"the deep recipe needs at least 2 resource kinds, got n_types={n_types}")
    labels = relabel([*STRUCTURE, *(f"w{i}" for i in range(n))], seed, scheme, fold_case=fold_case,
                     pool_size=POOL_SIZE)
    rng = random.Random(seed * 99991 + 17)
    letters = list(FAMILY_LETTERS)
    rng.shuffle(letters)
    taken = set(labels.values())
    stem = next(c for c in letters if c not in taken)
    roles = [f"r{i}" for i in range(n_types)]
    rng.shuffle(roles)
    for i, role in enumerate(roles, 1):
        labels[role] = f"{stem}{i}"
    return world_from_labels(labels, n, n_types)


def max_turns_for(budget: int) -> int:
    """The released deep sweep's turn cap: no free actions here, so 1.5 B, at least 400."""
    return max(400, round(budget * 1.5))


@dataclass
class Workshop(Vault):
    """The Deep Lomekwi state. Reuses the vault's label lookups, echoes and case rule; `inv` counts
    resources, parts, axes and woods; keys go to `held_keys`, opened containers to `opened`."""

    system_prompt: ClassVar[str] = SYSTEM_PROMPT
    noop_message: ClassVar[str] = NOOP_MESSAGE

    world: DeepWorld
    inv: dict[str, int] = field(default_factory=dict)
    built_part: bool = False
    part_turn: int | None = None
    held_two_parts: bool = False
    steps: int = 0

    def verbs(self) -> tuple[str, ...]:
        return V1_VERBS

    def label_set(self) -> frozenset[str]:
        w = self.world
        return frozenset(x.lower() for x in (w.door_base, w.key_base, w.machine, w.part, *w.types, *w.woods))

    def progress(self) -> tuple[int, ...]:
        """The released guard's measure (used only when a no-progress window is set): containers open, keys
        held, distinct things in the inventory, axe made, part made."""
        return (len(self.opened), len(self.held_keys), len(self.inv), int(self.has_machine), int(self.built_part))

    def holds_recipe(self) -> bool:
        return all(self.inv.get(t, 0) >= 1 for t in self.world.recipe)

    def _recipes(self) -> list[tuple[Counter, str]]:
        w = self.world
        return [(Counter({w.recipe[0]: 1, w.recipe[1]: 1}), w.part), (Counter({w.part: 2}), w.machine)]

    def _item(self, tok: str) -> str:
        """The world's label of a craftable item named by `tok` (case rule applied); `tok` otherwise."""
        ty = self._type(tok)
        if ty is not None:
            return ty
        return next((x for x in (self.world.part, self.world.machine) if self._fold(x) == self._fold(tok)), tok)

    def step(self, action: tuple[str, ...]) -> str:
        self.steps += 1
        obs = super().step(action)
        self.held_two_parts = self.held_two_parts or self.inv.get(self.world.part, 0) >= 2
        return obs

    def _search(self, tok: str, door: int) -> str:
        """examine on a container: a key then a resource (the released draw order), both into the inventory."""
        w = self.world
        j = self.rng.randint(1, w.n)
        res = self.rng.choice(w.types)
        self.held_keys.add(j)
        self.inv[res] = self.inv.get(res, 0) + 1
        self.dropped_types.add(res)
        note = " (already open)" if door in self.opened else ""
        return (f"You search {self._say(tok, w.doors[door - 1])}{note}. Out falls {w.key(j)} and 1 {res}. "
                f"You now hold {self.inv[res]} {res}.")

    def examine(self, tok: str) -> str:
        w = self.world
        door = self._door(tok)
        if door is not None:
            return self._search(tok, door)
        item = self._item(tok)
        if item in w.types:
            return f"A small {self._say(tok, item)}. Nothing remarkable."
        if item == w.part and self.built_part:
            return f"A {self._say(tok, item)}. It looks like a fabricated component."
        if item == w.machine and self.has_machine:
            return f"A {self._say(tok, item)}. It has a working edge; you sense it could force a container."
        k = self._indexed(w.key_base, tok)
        if k is not None:
            return f"{self._say(tok, w.key(k))}: a small fitted key."
        return f"You examine {tok}: nothing of note."

    def combine(self, a: str, b: str) -> str:
        given = Counter([self._item(a), self._item(b)])
        for need, out in self._recipes():
            if given != need or any(self.inv.get(t, 0) < c for t, c in need.items()):
                continue
            for t, c in need.items():
                self.inv[t] -= c
                if self.inv[t] <= 0:
                    del self.inv[t]
            self.inv[out] = self.inv.get(out, 0) + 1
            if out == self.world.part and not self.built_part:
                self.built_part, self.part_turn = True, self.steps - 1
            if out == self.world.machine:
                self.has_machine = True
            made = ", ".join(f"{c} {t}" for t, c in need.items())
            return f"You combine {made} into 1 {out} ({'new' if self.inv[out] == 1 else 'another'}). It persists."
        return f"You try to combine {a} and {b}: nothing happens."

    def use(self, item: str, target: str) -> str:
        w = self.world
        found = self._closed_door(target)
        if isinstance(found, str):
            return found
        door, d = found
        if self._is_machine(item):
            axe = self._say(item, w.machine)
            if self.inv.get(w.machine, 0) < 1:
                return f"You don't have a {axe}."
            self.held_keys.add(door)
            return f"You use the {axe} on {d}. It yields {w.key(door)}. (the {axe} remains with you.)"
        k = self._indexed(w.key_base, item)
        if k is not None:
            key = self._say(item, w.key(k))
            if k not in self.held_keys:
                return f"You don't have {key}."
            if k != door:
                return f"You use {key} on {d}: it does not fit."
            self.opened.add(door)
            wood = w.woods[door - 1]
            self.inv[wood] = self.inv.get(wood, 0) + 1
            return f"You use {key} on {d}: it fits. {d} opens, revealing 1 {wood} (a kind of wood). You now hold it."
        return f"You use {item} on {d}: nothing happens."

    def initial_observation(self, budget: int | None) -> str:
        w = self.world
        text = (
            f"You are in a sealed workshop. There are {w.n} locked containers: {', '.join(w.doors)}.\n\n"
            f"GOAL: collect at least one of EACH of the {w.n} different kinds of wood, using as few actions as "
            "possible. Each kind is locked inside one of the containers above; different kinds are named "
            "differently.\n\n"
            "You may act on objects with these verbs (one action per turn, on its own line):\n"
            "  examine <object>      - inspect or search an object\n"
            "  combine <a> <b>       - combine exactly two items you hold\n"
            "  use <object> <container> - use an item on a container\n"
            "You hold nothing yet. Things you obtain persist unless stated otherwise."
        )
        if budget is not None:
            text += (f"\n\nYou have a STRICT BUDGET of {budget} actions total. If you do not hold all {w.n} kinds "
                     f"within {budget} actions, you fail. Spend them wisely.")
        return text + "\n\nWhat do you do?"

    def status_line(self, budget: int | None, spent: int) -> str:
        left = f", {budget - spent} actions left" if budget is not None else ""
        return f"[{len(self.opened)}/{self.world.n} kinds{left}] What next?"

    def done_text(self) -> str:
        return f"You hold all {self.world.n} kinds. Done."

    def turn_cap(self, budget: int) -> int:
        return max_turns_for(budget)

    def facts(self) -> dict[str, Any]:
        return {"built_part": self.built_part, "part_turn": self.part_turn, "held_two_parts": self.held_two_parts}
