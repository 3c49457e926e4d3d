"""Deep Lomekwi (lomekwi.tex, "Notable Variations": Deep Lomekwi; released deep_lomekwi.py and its sweep).

The same budgeted coupon game as Lomekwi, with a build tree two steps deep and different nouns. n locked
containers c_1..c_n each hold one kind of wood; the goal is to hold every kind. `examine <container>`
(1 action) puts a random container's key and one random tree resource straight into the inventory (no
ground, no pickup). The T resources are a look-alike family `{stem}1..{stem}T` (one random letter, numbered
in a random order), two of them (r0, r1) the recipe:

    combine r0 r1      -> 1 part   (both consumed)
    combine part part  -> 1 axe    (both parts consumed; so the axe costs two r0 and two r1)

`use axe <container>` yields that container's key (the axe stays), `use key_i c_i` opens c_i and gives its
wood. Crafting consumes its inputs, unlike Lomekwi's shards. Budget round(1.2 (n H_n + n)) as in Lomekwi,
turn cap max(400, 1.5 B), no no-progress guard (the released sweep turns it off: the coupon tail is
legitimately stale). The released sweep plays T in 2..6 x n in 10..30, one episode per cell, every episode
with relabel seed = drop seed = the repetition index (0).

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

Decomposition: C = P(held r0 and r1 at once), R1 = P(part | held), R2 = P(axe | part), R = P(axe | held)
= R1 R2 (part implies held, axe implies part), E = P(win | axe), S = P(win). The loop, the parser (the
released one, without pickup), the echoes and the rule switches are Lomekwi's (`episode.Episode`, `env.Rules`).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import combinations
from math import comb, factorial
from typing import Any, ClassVar

from smith.evals.common import wilson
from smith.evals.lomekwi import costs
from smith.evals.lomekwi.env import Vault
from smith.evals.lomekwi.importer import RELEASED_USAGE, episode_key
from smith.evals.lomekwi.observed import canonical_label
from smith.evals.lomekwi.parse import V1_VERBS, extract_action
from smith.evals.lomekwi.relabel import relabel
from smith.evals.lomekwi.world import World
from smith.models.base import Message

WORLD = "deep"
RECIPE_MODE = "two_layer"
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
STEP_METRICS = ("R1", "R2")


# --------------------------------------------------------------------------------------------------
# World


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


# --------------------------------------------------------------------------------------------------
# State


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


# --------------------------------------------------------------------------------------------------
# Reading observations back (the importer and the scripted agents see only texts)

_CONTAINERS = re.compile(r"There are (\d+) locked containers: (.*?)\.\n")
_SEARCH = re.compile(r"^You search \S+?(?: \(already open\))?\. Out falls (\S+) and 1 (\S+)\. You now hold (\d+) ")
_CRAFT = re.compile(r"^You combine (.+) into 1 (\S+) \((?:new|another)\)\. It persists\.$")
_YIELD = re.compile(r"^You use the (\S+) on \S+\. It yields (\S+)\.")
_OPENS = re.compile(r"^You use \S+ on (\S+): it fits\. \S+ opens, revealing 1 ")


@dataclass
class Seen:
    """The public state rebuilt from (action, observation) pairs alone: the inventory counts the search
    texts state ("You now hold 3 v2"), crafts (inputs consumed, one output), keys from search and axe
    texts, open containers (named canonically). A craft from two different items made the part (so
    `pair` is the recipe), one from two of the same item made the axe."""

    inv: dict[str, int] = field(default_factory=dict)
    keys: set[str] = field(default_factory=set)
    opened: set[str] = field(default_factory=set)
    part: str | None = None
    axe: str | None = None
    pair: tuple[str, str] | None = None

    def feed(self, obs: str) -> str | None:
        """Update from one observation; returns the label crafted by it, if any."""
        if m := _SEARCH.match(obs):
            self.keys.add(m.group(1))
            self.inv[m.group(2)] = int(m.group(3))
        elif m := _CRAFT.match(obs):
            made = [x.split(" ", 1) for x in m.group(1).split(", ")]
            for count, item in made:
                self.inv[item] = self.inv.get(item, 0) - int(count)
                if self.inv[item] <= 0:
                    del self.inv[item]
            out = m.group(2)
            self.inv[out] = self.inv.get(out, 0) + 1
            if len(made) == 2:
                self.part, self.pair = out, (made[0][1], made[1][1])
            else:
                self.axe = out
            return out
        elif m := _YIELD.match(obs):
            self.axe = self.axe or m.group(1)
            self.keys.add(m.group(2))
        elif m := _OPENS.match(obs):
            self.opened.add(canonical_label(m.group(1)))
        return None

    def resources(self) -> list[str]:
        """Held things that are neither the part nor the axe (the search texts name only resources)."""
        return sorted(t for t, c in self.inv.items() if c >= 1 and t not in (self.part, self.axe))


def derive_facts(labels: dict[str, str], n: int, actions: list[list[str]],
                 observations: list[str]) -> dict[str, Any]:
    """Episode facts from the recorded observations alone (no replay): holding both recipe resources at once,
    the first part and axe crafted (0-based action index), two parts held at once, containers opened."""
    if len(actions) != len(observations):
        raise ValueError(f"{len(actions)} actions but {len(observations)} observations; the row is truncated")
    seen = Seen()
    r0, r1, part, axe = labels["r0"], labels["r1"], labels["part"], labels["axe"]
    hold_turn = part_turn = build_turn = None
    two_parts, obtained = False, set()
    for i, obs in enumerate(observations):
        made = seen.feed(obs)
        obtained |= {t for t in (r0, r1) if seen.inv.get(t, 0) >= 1}
        if hold_turn is None and seen.inv.get(r0, 0) >= 1 and seen.inv.get(r1, 0) >= 1:
            hold_turn = i
        if part_turn is None and made == part:
            part_turn = i
        if build_turn is None and made == axe:
            build_turn = i
        two_parts = two_parts or seen.inv.get(part, 0) >= 2
    return {"held": hold_turn is not None, "hold_turn": hold_turn, "built_part": part_turn is not None,
            "part_turn": part_turn, "built": build_turn is not None, "build_turn": build_turn,
            "held_two_parts": two_parts, "dropped_both": obtained == {r0, r1}, "won": len(seen.opened) == n,
            "opened": len(seen.opened), "total_actions": len(actions), "pickups": 0}


# The released row's own flags, checked against the facts read from its observations.
_ROW_FLAGS = {"held_base": "held", "built_part": "built_part", "built_axe": "built", "held_two_parts": "held_two_parts",
              "part_turn": "part_turn", "build_turn": "build_turn", "solved": "won"}


def import_row(row: dict[str, Any], source: str = "") -> dict[str, Any]:
    """One released Deep Lomekwi row -> a smith episode record. Labels come from the row (smith's tokens
    pool is not the released machine's), facts from the observations; every flag the row records must agree."""
    where = f"row {row.get('relabel_seed')} (n={row.get('n')}, T={row.get('n_types')}) of {source or 'the log'}"
    if row.get("recipe_mode") != RECIPE_MODE:
        raise ValueError(f"{where}: recipe_mode={row.get('recipe_mode')!r}; smith plays only the released sweep's "
                         f"{RECIPE_MODE!r} recipe (a Lomekwi row? import it without suite.world=deep)")
    facts = derive_facts(row["labels"], row["n"], row["actions"], row["obs"])
    for flag, fact in _ROW_FLAGS.items():
        if flag in row and row[flag] != facts[fact]:
            raise ValueError(f"{where}: the observations give {fact}={facts[fact]} but the row says {flag}="
                             f"{row[flag]}; the row is inconsistent")
    return {
        "key": episode_key(row["model"], row["n"], row["n_types"], row["relabel_seed"]), "model": row["model"],
        "world": WORLD, "n": row["n"], "n_types": row["n_types"], "seed": row["relabel_seed"],
        "drop_seed": row["draw_seed"], "budget": row.get("budget"), "hint": row.get("hint", False), "scheme": None,
        "labels": row["labels"], "actions": row["actions"], "observations": row["obs"],
        "agent_texts": row.get("agent_texts", []), "unparsed": [], "turn_usage": [],
        "usage": dict(row.get("usage") or {}), "elapsed_s": row.get("elapsed_s"), "source": source,
        "stop_reason": row["stopped_reason"], **facts,
    }


def export_row(record: dict[str, Any]) -> dict[str, Any]:
    """A smith deep record in the released row format (what the released sweep and plotter read)."""
    yields = [i for i, obs in enumerate(record["observations"]) if _YIELD.match(obs)]
    return {
        "model": record["model"], "n_types": record["n_types"], "n": record["n"], "n_kinds": record["n"],
        "recipe_mode": RECIPE_MODE, "hint": record["hint"], "budget": record["budget"],
        "relabel_seed": record["seed"], "draw_seed": record["drop_seed"], "labels": record["labels"],
        "actions": record["actions"], "agent_texts": record["agent_texts"], "obs": record["observations"],
        "solved": record["won"], "distinct_held": record["opened"], "built_part": record["built_part"],
        "built_axe": record["built"], "held_base": record["held"], "held_two_parts": record["held_two_parts"],
        "part_turn": record["part_turn"], "build_turn": record["build_turn"], "t_star": yields[0] if yields else None,
        "use_axe_count": len(yields), "craft_attempts": sum(a[0] == "combine" for a in record["actions"]),
        "total_actions": record["total_actions"], "noop_total": len(record["unparsed"]),
        "usage": {k: int(record.get("usage", {}).get(k, 0)) for k in RELEASED_USAGE},
        "stopped_reason": record["stop_reason"], "elapsed_s": record.get("elapsed_s") or 0.0,
    }


# --------------------------------------------------------------------------------------------------
# Metrics: recognition in two steps


def step_counts(records: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """R1 = (part among holders, holders), R2 = (axe among part makers, part makers); refuses records where a
    step was reached without the one before (R = R1 R2 rests on part => held and axe => part)."""
    for r in records:
        if (r["built_part"] and not r["held"]) or (r["built"] and not r["built_part"]):
            raise ValueError(f"episode {r.get('key', '?')} skipped a build step; its record is inconsistent")
    held = [r for r in records if r["held"]]
    part = [r for r in records if r["built_part"]]
    return {"R1": (sum(r["built_part"] for r in held), len(held)), "R2": (sum(r["built"] for r in part), len(part))}


def steps(records: list[dict[str, Any]]) -> dict[str, Any]:
    """R1 and R2 with 95% Wilson intervals and counts, and R - R1 R2 in rationals (0 by construction)."""
    out: dict[str, Any] = {}
    counts = step_counts(records)
    for name, (k, n) in counts.items():
        out[name] = k / n if n else float("nan")
        out[f"{name}_ci"] = list(wilson(k, n))
    (part, held), (axe, made) = counts["R1"], counts["R2"]
    r1r2 = Fraction(part, held) * Fraction(axe, made) if held and made else Fraction(0)
    out["step_residual"] = float(Fraction(axe, held) - r1r2) if held else 0.0
    out["step_counts"] = {k: list(v) for k, v in counts.items()}
    return out


# --------------------------------------------------------------------------------------------------
# Costs (the Appendix B argument carried to the two-step recipe) and the reference agents


def expected_double_collect(n_types: int) -> float:
    """Expected uniform draws until each of T kinds has come up twice (the double dixie cup), exactly:
    T * sum_j (-1)^(j+1) C(T,j) sum_k C(j,k) k! / j^(k+1)."""
    total = Fraction(0)
    for j in range(1, n_types + 1):
        inner = sum(Fraction(comb(j, k) * factorial(k), j ** (k + 1)) for k in range(j + 1))
        total += (-1) ** (j + 1) * comb(n_types, j) * inner
    return float(n_types * total)


def expected_build(n: int, n_types: int) -> float:
    """Upper bound on building, in sequential steps like Appendix B's: draw two of every kind, search the
    C(T,2) pairs ((C(T,2)+1)/2 tries), craft the second part and the axe (2), open every container (2n)."""
    return expected_double_collect(n_types) + costs.expected_combine(n_types) + 2 + costs.expected_open(n)


def build_preferred(n: int, n_types: int) -> bool:
    """The deep optimal agent builds iff this bound is below E[grind] = n H_n + n (the same grind as Lomekwi)."""
    return expected_build(n, n_types) < costs.expected_grind(n)


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
