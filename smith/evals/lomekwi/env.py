"""The Lomekwi vault (000_4c3492d641a25045.txt, sections 4.4 and A.1; docs/architecture.md, "Facts from released code").

n locked doors, T shard types, one unordered recipe pair. `examine <door>` drops a uniformly random
shard type, then a uniformly random door's key, on the ground (1 action); `pickup` moves everything on
the ground into the inventory (free); `combine <a> <b>` of the recipe pair builds the machine (1);
`use <machine> <door>` yields that door's key, `use <key> <door>` opens it (1). Shards are never
consumed. Budget round(1.2 (n H_n + n)). Every text the agent reads is the paper's (Appendix A) and
byte-identical to the released episode logs: with the recorded labels and drop seed, replaying a
released row through `Vault` reproduces its observations exactly (tests/test_lomekwi_env.py).

Transition table (each row is tested in tests/test_lomekwi_env.py; D door, K key, S/A/B types, M machine):

 1 examine D (1..n)               type then key dropped   "You search D. Out falls K and a S. They lie on the
                                                          ground -- pick them up."
 2 examine S (held or not)        -                       "A small dull S. It feels faintly active, and the
                                                          sensation shifts when held alongside a different kind."
                                                          (hint off: "A small dull S. Nothing remarkable.")
 3 examine M, built               -                       "A M. It has a recess; you are unsure what it does."
 4 examine <key>_<i>              -                       "K: a small fitted object."
 5 examine anything else          -                       "You examine X: nothing of note." (also an unbuilt M)
 6 pickup, ground empty           -                       "There is nothing on the ground to pick up."
 7 pickup, ground not empty       ground -> inventory     "You pick up K1, K2 and 1 S(s), 2 S'(s). (pickup is free.)"
 8 combine recipe, held, no M     machine built           "You combine a A and a B. They fuse into a M (new). It
                                                          persists."
 9 combine recipe, held, M held   -                       "You already hold a M."
10 combine types not both held    -                       "You combine A and B: nothing happens." (same type: < 2)
11 combine held non-recipe pair   -                       "You combine A and B: nothing happens." (incl. A with A)
12 combine non-type argument      -                       "You combine A and B: nothing happens."
13 use X on a non-door            -                       "There is no X."
14 use X on an open D             -                       "D is already open."
15 use M, not built               -                       "You don't have a M."
16 use M on D, built              D's key -> inventory    "You operate the M on D. It yields K. (the M remains with
                                                          you.)"
17 use K not held                 -                       "You don't have K."
18 use D's own key, held          D opens                 "You use K on D: it fits. D opens."
19 use another held key           -                       "You use K on D: it does not fit."
20 use S on D                     -                       "You press the S to D: nothing."
21 use anything else on D         -                       "You use X on D: nothing happens."

The defaults are the released code's behaviour wherever it decides a number or what the model reads:
its parser (`parse.parse_action`), labels echoed as typed (D and K above are the agent's spelling, "r_02"),
and lower-cased arguments compared with the labels case-sensitively (so a label with an upper-case letter can
never be named: the paper's alnum ablation). `Rules` holds smith's stricter readings as named switches
(parser="smith", echo="canonical", fold_case=True) and the released runner's commit nudge and
stop-on-build probes; `V1Vault` (v1.py) is the released single-shard world, and deep/env.py's `Workshop`
plays Deep Lomekwi through the same `LomekwiEpisode` (episode.py).

This file is the state machine (`Rules`, `Vault`, the budget and turn cap); beside it: the layout of a world
(world.py, labels from relabel.py and words.py), the parser (parse.py), the turn loop (episode.py) and the
texts read back (observed.py).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from smith.evals.lomekwi.costs import expected_grind
from smith.evals.lomekwi.parse import PARSERS, VERBS

if TYPE_CHECKING:
    from smith.evals.lomekwi.world import World

SYSTEM_PROMPT = (
    "You are an agent in a vault and must open every locked door using as few actions as possible. End each "
    "turn with exactly one action on its own line: examine <object>, combine <a> <b>, use <object> <door>, or "
    "pickup. pickup collects everything on the ground and is FREE (it does not count toward your budget). "
    "Think briefly, then act. Minimize total actions."
)
NOOP_MESSAGE = "No parseable action. Use examine/combine/use/pickup, one action on its own line."
ECHOES = ("typed", "canonical")
BUDGET_MULT = 1.2


def budget_for(n: int, mult: float = BUDGET_MULT) -> int:
    """B = round(1.2 (n H_n + n)) as in the released sweep_config (41, 47, 53 for n = 9, 10, 11).

    The paper writes a floor; the code rounds. They agree on the swept n; the code is what produced
    the logs, so it wins.
    """
    return round(mult * expected_grind(n))


def max_turns_for(n: int, budget: int) -> int:
    """Turn cap of the released sweep: free pickups can double the turns, so 2B + 2n + 80."""
    return 2 * budget + 2 * n + 80


def progress_key(held_types: dict, ground_types: dict, held_keys: set, ground_keys: set, opened: int,
                 machine: bool) -> tuple[int, int, int, int]:
    """The released no-progress guard's measure: distinct types held + distinct types on the ground,
    the same for keys, doors open, machine built. Sums, not unions, exactly as the reference code: an
    examine that drops a type already held onto an empty ground counts as progress, a pickup never does.
    The released logs confirm it (every no_progress stop falls on the 20th stale action, none earlier)."""
    return (len(held_types) + len(ground_types), len(held_keys) + len(ground_keys), opened, int(machine))


def progressed(before: tuple[int, ...], after: tuple[int, ...]) -> bool:
    """Progress means some component of `progress_key` grew."""
    return any(a > b for a, b in zip(after, before, strict=True))


@dataclass(frozen=True)
class Rules:
    """Where the released code and smith's stricter reading differ, one switch each, plus the released
    runner's two optional probes. The defaults are the released code's behaviour (docs/lomekwi.md).

    parser: "upstream" | "smith" (see `parse_action`).
    echo: "typed" echoes a label as the agent typed it ("examine r_02" -> "You search r_02. ..."), as the
        released code does; "canonical" echoes the world's own spelling ("r_2").
    fold_case: False compares lower-cased arguments with the labels case-sensitively, as the released code
        does (a label with an upper-case letter can never be named); True ignores case.
    commit_nudge: a text appended once to the observation of the first turn on which the agent holds
        both recipe types but has not built (the released runner's commitment probe); None for none.
    stop_on_build: end the episode the moment the machine is built (stop reason "built").
    """

    parser: str = "upstream"
    echo: str = "typed"
    fold_case: bool = False
    commit_nudge: str | None = None
    stop_on_build: bool = False

    def __post_init__(self) -> None:
        if self.parser not in PARSERS:
            raise ValueError(f"unknown parser {self.parser!r}; known: {', '.join(PARSERS)}")
        if self.echo not in ECHOES:
            raise ValueError(f"unknown echo {self.echo!r}; known: {', '.join(ECHOES)}")


@dataclass
class Vault:
    """The game state; `step(action)` applies one parsed action and returns its observation.

    The texts of the episode loop that differ between worlds live here too (`system_prompt`,
    `noop_message`, `done_text`, `turn_cap`, `facts`), so one `LomekwiEpisode` plays every world."""

    system_prompt: ClassVar[str] = SYSTEM_PROMPT
    noop_message: ClassVar[str] = NOOP_MESSAGE

    world: World
    drop_seed: int
    hint: bool = True
    rules: Rules = field(default_factory=Rules)
    held_types: dict[str, int] = field(default_factory=dict)
    held_keys: set[int] = field(default_factory=set)
    ground_types: dict[str, int] = field(default_factory=dict)
    ground_keys: set[int] = field(default_factory=set)
    has_machine: bool = False
    opened: set[int] = field(default_factory=set)
    dropped_types: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.drop_seed * 6151 + 1)
        self._types = {self._fold(t): t for t in self.world.types}

    # -- label lookups and echoes --
    def _fold(self, tok: str) -> str:
        return tok.casefold() if self.rules.fold_case else tok

    def _say(self, typed: str, canonical: str) -> str:
        """The label as the observation spells it (`Rules.echo`)."""
        return typed if self.rules.echo == "typed" else canonical

    def _indexed(self, base: str, tok: str) -> int | None:
        m = re.fullmatch(rf"{re.escape(self._fold(base))}_(\d+)", self._fold(tok))
        return int(m.group(1)) if m else None

    def _door(self, tok: str) -> int | None:
        i = self._indexed(self.world.door_base, tok)
        return i if i is not None and 1 <= i <= self.world.n else None

    def _type(self, tok: str) -> str | None:
        return self._types.get(self._fold(tok))

    def _closed_door(self, target: str) -> tuple[int, str] | str:
        """The closed door `target` names and its spelling in replies, or the reply when there is no such door
        or it is already open (the same first words of `use` in every world)."""
        door = self._door(target)
        if door is None:
            return f"There is no {target}."
        d = self._say(target, self.world.doors[door - 1])
        return f"{d} is already open." if door in self.opened else (door, d)

    def _is_machine(self, tok: str) -> bool:
        return self._fold(tok) == self._fold(self.world.machine)

    def verbs(self) -> tuple[str, ...]:
        return VERBS

    def label_set(self) -> frozenset[str]:
        """Lower-cased labels, for the smith parser's article rule."""
        w = self.world
        return frozenset(x.lower() for x in (w.door_base, w.key_base, w.machine, *w.types))

    def progress(self) -> tuple[int, int, int, int]:
        return progress_key(self.held_types, self.ground_types, self.held_keys, self.ground_keys, len(self.opened),
                            self.has_machine)

    def holds_recipe(self) -> bool:
        """Every part of the recipe held (the v1 recipe is one kind twice, so two of it)."""
        need: dict[str, int] = {}
        for t in self.world.recipe:
            need[t] = need.get(t, 0) + 1
        return all(self.held_types.get(t, 0) >= c for t, c in need.items())

    def solved(self) -> bool:
        return len(self.opened) == self.world.n

    # -- actions --
    def step(self, action: tuple[str, ...]) -> str:
        verb = action[0]
        if verb == "pickup":
            return self.pickup()
        if verb == "examine":
            return self.examine(action[1])
        if verb == "combine":
            return self.combine(action[1], action[2])
        if verb == "use":
            return self.use(action[1], action[2])
        raise ValueError(f"unknown verb {verb!r}; known: {', '.join(VERBS)}")

    def _search(self, tok: str, door: int) -> str:
        """examine on door `door`: a type then a key fall on the ground (the released draw order)."""
        w = self.world
        ty = w.types[self.rng.randrange(w.n_types)]
        j = self.rng.randint(1, w.n)
        self.ground_types[ty] = self.ground_types.get(ty, 0) + 1
        self.ground_keys.add(j)
        self.dropped_types.add(ty)
        return (f"You search {self._say(tok, w.doors[door - 1])}. Out falls {w.key(j)} and a {ty}. "
                "They lie on the ground -- pick them up.")

    def _type_text(self, name: str) -> str:
        if self.hint:
            return (f"A small dull {name}. It feels faintly active, and the sensation shifts when held alongside a "
                    "different kind.")
        return f"A small dull {name}. Nothing remarkable."

    def examine(self, tok: str) -> str:
        w = self.world
        door = self._door(tok)
        if door is not None:
            return self._search(tok, door)
        ty = self._type(tok)
        if ty is not None:
            return self._type_text(self._say(tok, ty))
        if self._is_machine(tok) and self.has_machine:
            return f"A {w.machine}. It has a recess; you are unsure what it does."
        k = self._indexed(w.key_base, tok)
        if k is not None:
            return f"{self._say(tok, w.key(k))}: a small fitted object."
        return f"You examine {tok}: nothing of note."

    def pickup(self) -> str:
        if not self.ground_keys and not self.ground_types:
            return "There is nothing on the ground to pick up."
        got = []
        if self.ground_keys:
            got.append(", ".join(self.world.key(k) for k in sorted(self.ground_keys)))
        if self.ground_types:
            got.append(", ".join(f"{c} {ty}(s)" for ty, c in self.ground_types.items()))
        for ty, c in self.ground_types.items():
            self.held_types[ty] = self.held_types.get(ty, 0) + c
        self.held_keys |= self.ground_keys
        self.ground_keys, self.ground_types = set(), {}
        return f"You pick up {' and '.join(got)}. (pickup is free.)"

    def combine(self, a: str, b: str) -> str:
        ta, tb = self._type(a), self._type(b)
        if ta is None or tb is None:
            return f"You combine {a} and {b}: nothing happens."
        sa, sb = self._say(a, ta), self._say(b, tb)
        ha, hb = self.held_types.get(ta, 0), self.held_types.get(tb, 0)
        enough = ha >= 2 if ta == tb else (ha >= 1 and hb >= 1)
        if not enough or ta == tb or tuple(sorted((ta, tb))) != self.world.recipe:
            return f"You combine {sa} and {sb}: nothing happens."
        if self.has_machine:
            return f"You already hold a {self.world.machine}."
        self.has_machine = True
        return f"You combine a {sa} and a {sb}. They fuse into a {self.world.machine} (new). It persists."

    def use(self, item: str, target: str) -> str:
        w = self.world
        found = self._closed_door(target)
        if isinstance(found, str):
            return found
        door, d = found
        if self._is_machine(item):
            if not self.has_machine:
                return f"You don't have a {w.machine}."
            self.held_keys.add(door)
            return f"You operate the {w.machine} on {d}. It yields {w.key(door)}. (the {w.machine} remains with you.)"
        k = self._indexed(w.key_base, item)
        if k is not None:
            key = self._say(item, w.key(k))
            if k not in self.held_keys:
                return f"You don't have {key}."
            if k == door:
                self.opened.add(door)
                return f"You use {key} on {d}: it fits. {d} opens."
            return f"You use {key} on {d}: it does not fit."
        ty = self._type(item)
        if ty is not None:
            return f"You press the {self._say(item, ty)} to {d}: nothing."
        return f"You use {item} on {d}: nothing happens."

    # -- texts the agent reads (Appendix A.1) --
    def _verb_list(self) -> str:
        return ("  examine <object>      - inspect or search an object\n"
                "  combine <a> <b>       - combine two objects you hold\n"
                "  use <object> <door>   - use an object on a door\n"
                "  pickup                - collect everything on the ground (FREE: does NOT cost an action)\n")

    def initial_observation(self, budget: int | None) -> str:
        w = self.world
        text = (
            f"You are in a sealed vault. There are {w.n} locked doors: {', '.join(w.doors)}.\n\n"
            "GOAL: open ALL the doors, using as few actions as possible.\n\n"
            "You may act on objects with these verbs (one action per turn, on its own line):\n"
            + self._verb_list()
            + "You hold nothing yet. Things you obtain persist unless stated otherwise."
        )
        if budget is not None:
            text += (f"\n\nYou have a STRICT BUDGET of {budget} actions total{self._budget_aside()}. "
                     f"If the doors are not all open within {budget} actions, you fail. Spend them wisely.")
        return text + "\n\nWhat do you do?"

    def _budget_aside(self) -> str:
        return " (pickup is free and excluded)"

    def status_line(self, budget: int | None, spent: int) -> str:
        left = f", {budget - spent} actions left" if budget is not None else ""
        return f"[{len(self.opened)}/{self.world.n} doors open{left}] What next?"

    def done_text(self) -> str:
        return f"All {self.world.n} doors open. Done."

    def turn_cap(self, budget: int) -> int:
        """The released sweep's turn cap for this world."""
        return max_turns_for(self.world.n, budget)

    def facts(self) -> dict[str, Any]:
        """Facts of this world beyond the shared record fields (none for the vault)."""
        return {}


def make_vault(world: World, drop_seed: int, hint: bool = True, rules: Rules | None = None) -> Vault:
    """The state class of the world's variant."""
    return world.vault_class()(world, drop_seed, hint, rules or Rules())
