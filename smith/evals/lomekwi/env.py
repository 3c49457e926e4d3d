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

Episode protocol: the first parseable line of a reply acts; four unparseable replies in a row end the
episode ("noop"), a failed model call counting as one; it also ends when all doors are open ("solved"),
when the budgeted actions reach the budget ("out_of_budget"), after 20 executed actions without state
progress ("no_progress", measured as the reference code does: see `progress_key`), or at the turn cap
("max_turns", 2B + 2n + 80 as in the released sweep). Differential checks against the released runner
(same reply streams, failed calls included) give identical transcripts, actions, observations and stops.

The defaults are the released code's behaviour wherever it decides a number or what the model reads:
its parser (`parse_action`), labels echoed as typed (D and K above are the agent's spelling, "r_02"), and
lower-cased arguments compared with the labels case-sensitively (so a label with an upper-case letter can
never be named: the paper's alnum ablation). `Rules` holds smith's stricter readings as named switches
(parser="smith", echo="canonical", fold_case=True) and the released runner's commit nudge and
stop-on-build probes; `V1Vault` is the released single-shard world, and deep.py's `Workshop` plays Deep
Lomekwi through the same `Episode`.
"""

from __future__ import annotations

import importlib.util
import random
import re
import string
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from smith.evals.lomekwi.costs import expected_grind

SYSTEM_PROMPT = (
    "You are an agent in a vault and must open every locked door using as few actions as possible. End each "
    "turn with exactly one action on its own line: examine <object>, combine <a> <b>, use <object> <door>, or "
    "pickup. pickup collects everything on the ground and is FREE (it does not count toward your budget). "
    "Think briefly, then act. Minimize total actions."
)
V1_SYSTEM_PROMPT = (
    "You are an agent in a vault and must open every locked door using as few actions as possible. End each "
    "turn with exactly one action on its own line: examine <object>, combine <a> <b>, or use <object> <door>. "
    "Think briefly, then act. Minimize total actions."
)
NOOP_MESSAGE = "No parseable action. Use examine/combine/use/pickup, one action on its own line."
VERBS = ("examine", "combine", "use", "pickup")
V1_VERBS = ("examine", "combine", "use")
WORLDS = ("pickup", "v1")
PARSERS = ("upstream", "smith")
ECHOES = ("typed", "canonical")
ARTICLES = frozenset({"a", "an", "the"})
FILLERS = frozenset({"with", "to", "on", "and"})
SCHEMES = ("tokens", "letter", "alnum")
NOOP_LIMIT = 4
NO_PROGRESS_WINDOW = 20
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


# --------------------------------------------------------------------------------------------------
# Relabeling (section 4.3, Appendix A.1 Table 2, Appendix C)


def _edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


@lru_cache(maxsize=1)
def _english() -> frozenset[str]:
    """The dictionary that filters nonsense tokens: reasoning-gym's word list (a pinned dependency), so
    the tokens pool is the same on every machine (the released code read /usr/share/dict/words)."""
    spec = importlib.util.find_spec("reasoning_gym")  # locate, don't import: the package imports every task
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("the tokens scheme needs reasoning-gym's word list; install reasoning-gym")
    text = (Path(spec.origin).parent / "data" / "words3to10.txt").read_text()
    return frozenset(w.strip().lower() for w in text.split())


_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "fl", "gl", "gr",
           "kr", "pl", "pr", "sk", "sl", "sn", "sp", "st", "tr", "vr", "thr", "shp"]
_VOWELS = ["a", "e", "i", "o", "u"]
_CODAS = ["", "", "b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "x", "ld", "lk", "lt", "mp", "nd",
          "nk", "nt", "rd", "rk", "rn", "sk", "st"]
_CONFUSABLE = ("rn", "cl", "vv", "ii", "uu")


def _pronounceable_ok(tok: str) -> bool:
    eng = _english()
    return (4 <= len(tok) <= 8 and not any(b in tok for b in _CONFUSABLE) and tok not in eng
            and tok[:4] not in eng and tok[-4:] not in eng)


@lru_cache(maxsize=4)
def token_pool(size: int = 300, seed: int = 0) -> tuple[str, ...]:
    """Pronounceable nonsense tokens, rejected when a real word is the token or its length-4 prefix or
    suffix (sub-word leakage, Appendix A.1). Seed-independent of the episode: episodes shuffle it."""
    rng = random.Random(seed)
    pool: list[str] = []
    seen: set[str] = set()
    for _ in range(size * 200):
        if len(pool) == size:
            break
        tok = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                      for _ in range(rng.choice([1, 2, 2])))
        if tok not in seen and _pronounceable_ok(tok):
            seen.add(tok)
            pool.append(tok)
    return tuple(pool)


_ALNUM = string.ascii_letters + string.digits


def relabel(elements: list[str], seed: int, scheme: str = "letter", min_dist: int = 3,
            fold_case: bool = False, pool_size: int = 300) -> dict[str, str]:
    """One uniformly random label per latent element, deterministic in `seed` (the repetition index).

    letter: distinct lowercase letters; alnum: [a-zA-Z0-9]{4,8} at pairwise edit distance >= min_dist (the
    released draw); with `fold_case` (labels matched ignoring case, `Rules.fold_case`) the distance is taken
    after case folding and article/filler words are skipped, so no two labels collide once case is ignored;
    tokens: the pronounceable pool of `pool_size` tokens (the released Lomekwi world uses 300, Deep Lomekwi
    600), shuffled, greedy at edit distance >= min_dist. The letter scheme reproduces the released logs' labels
    exactly.
    """
    rng = random.Random(seed * 7919 + 13)
    if scheme == "letter":
        if len(elements) > 26:
            raise ValueError(f"the letter scheme labels at most 26 elements, got {len(elements)}; use scheme=tokens")
        letters = list(string.ascii_lowercase)
        rng.shuffle(letters)
        return dict(zip(elements, letters, strict=False))
    chosen: list[str] = []
    if scheme == "alnum":
        for _ in range(len(elements) * 5000):
            if len(chosen) == len(elements):
                break
            tok = "".join(rng.choice(_ALNUM) for _ in range(rng.randint(4, 8)))
            if not fold_case:
                if all(_edit_distance(tok, c) >= min_dist for c in chosen):
                    chosen.append(tok)
                continue
            folded = tok.casefold()
            if folded in ARTICLES | FILLERS:
                continue
            if all(_edit_distance(folded, c.casefold()) >= min_dist for c in chosen):
                chosen.append(tok)
    elif scheme == "tokens":
        pool = list(token_pool(pool_size))
        rng.shuffle(pool)
        for tok in pool:
            if all(_edit_distance(tok, c) >= min_dist for c in chosen):
                chosen.append(tok)
            if len(chosen) == len(elements):
                break
    else:
        raise ValueError(f"unknown relabeling scheme {scheme!r}; known: {', '.join(SCHEMES)}")
    if len(chosen) < len(elements):
        raise ValueError(f"could not draw {len(elements)} {scheme} labels at edit distance {min_dist}; lower min_dist")
    return dict(zip(elements, chosen, strict=True))


def recipe_indices(seed: int, n_types: int) -> tuple[int, int]:
    """The recipe: one unordered pair of distinct shard types, deterministic in the relabel seed."""
    if n_types < 2:
        raise ValueError(f"a recipe needs at least 2 shard types, got n_types={n_types}")
    a, b = random.Random(seed * 2654435761 + 7).sample(range(n_types), 2)
    return (min(a, b), max(a, b))


@dataclass(frozen=True)
class World:
    """The relabeled layout of one episode; `labels()` is the dict the released logs record.

    variant "pickup" is the paper's world; "v1" is the released single-shard world (run_lomekwi_llm.py):
    one shard kind, drops go straight into the inventory, two shards of it build the machine, so its
    `types` is that one kind and its `recipe` that kind twice.
    """

    n: int
    door_base: str
    key_base: str
    machine: str
    types: tuple[str, ...]
    recipe: tuple[str, str]
    variant: str = "pickup"

    @property
    def n_types(self) -> int:
        return len(self.types)

    @property
    def doors(self) -> list[str]:
        return [f"{self.door_base}_{i}" for i in range(1, self.n + 1)]

    def key(self, i: int) -> str:
        return f"{self.key_base}_{i}"

    def vault_class(self) -> type[Vault]:
        """The state class that plays this world (a subclass world brings its own)."""
        return V1Vault if self.variant == "v1" else Vault

    def labels(self) -> dict[str, Any]:
        if self.variant == "v1":
            return {"door_base": self.door_base, "key_base": self.key_base, "byproduct": self.types[0],
                    "machine": self.machine}
        return {"door_base": self.door_base, "key_base": self.key_base, "machine": self.machine,
                "types": list(self.types), "recipe": list(self.recipe)}

    @classmethod
    def from_labels(cls, labels: dict[str, Any], n: int) -> World:
        if "byproduct" in labels:
            bp = labels["byproduct"]
            return cls(n, labels["door_base"], labels["key_base"], labels["machine"], (bp,), (bp, bp), "v1")
        recipe = sorted(labels["recipe"])
        return cls(n, labels["door_base"], labels["key_base"], labels["machine"], tuple(labels["types"]),
                   (recipe[0], recipe[1]))


def make_world(seed: int, n: int, n_types: int, scheme: str = "letter", fold_case: bool = False) -> World:
    """Relabel door, key, machine and the T shard types with `seed`; draw the recipe pair."""
    labels = relabel(["door", "key", "machine"] + [f"bp{i}" for i in range(n_types)], seed, scheme,
                     fold_case=fold_case)
    types = tuple(labels[f"bp{i}"] for i in range(n_types))
    i, j = recipe_indices(seed, n_types)
    recipe = sorted([types[i], types[j]])
    return World(n, labels["door"], labels["key"], labels["machine"], types, (recipe[0], recipe[1]))


def make_v1_world(seed: int, n: int, scheme: str = "letter", fold_case: bool = False) -> World:
    """The single-shard world: door, key, the one shard kind and the machine relabeled with `seed`, in the
    released element order (so the letter scheme draws the released v1 labels)."""
    labels = relabel(["door", "key", "byproduct", "machine"], seed, scheme, fold_case=fold_case)
    bp = labels["byproduct"]
    return World(n, labels["door"], labels["key"], labels["machine"], (bp,), (bp, bp), "v1")


# --------------------------------------------------------------------------------------------------
# Parser (Appendix A.1)

_ACT = re.compile(r"^>?\s*(examine|combine|use|pickup)\b[\s:]*(.*)$", re.IGNORECASE)  # on the stripped line
# Separators: runs of whitespace, ',' and '+', and the fillers with/to/on/and as whole words. The released
# parser matches the fillers in lower case only ("use x ON y" keeps "on" as an argument); smith's in any case.
_SPLIT_UPSTREAM = re.compile(r"[+,\s]+|\b(?:with|to|on|and)\b")
_SPLIT_SMITH = re.compile(r"[+,\s]+|\b(?:with|to|on|and)\b", re.IGNORECASE)
_PUNCT = "`'\"*.,;:!?()[]{}<>"
_ARITY = {"pickup": 0, "examine": 1, "combine": 2, "use": 2}


def _clean(tok: str) -> str:
    return tok.strip().strip(_PUNCT).lower()


def _arguments(rest: str, parser: str, labels: frozenset[str]) -> list[str]:
    """The argument tokens of one action line, lower-cased, under either reading."""
    if parser == "upstream":
        return [t for t in (x.strip().lower() for x in _SPLIT_UPSTREAM.split(rest.strip())) if t]
    if parser == "smith":
        toks = [t for t in (_clean(x) for x in _SPLIT_SMITH.split(rest)) if t]
        return [t for t in toks if t not in ARTICLES or t in labels]
    raise ValueError(f"unknown parser {parser!r}; known: {', '.join(PARSERS)}")


def parse_action(line: str, labels: frozenset[str] = frozenset(), parser: str = "upstream",
                 verbs: tuple[str, ...] = VERBS) -> tuple[str, ...] | None:
    """One line -> ("examine", x) | ("combine", a, b) | ("use", a, b) | ("pickup",) | None.

    Both readings: the verb case-insensitive at the start of the line (a leading '>' tolerated), arguments
    lower-cased and split on whitespace, ',' and '+' and the fillers with/to/on/and; extra arguments are
    ignored, missing ones make the line unparseable. `verbs` limits the verbs (the v1 world has no pickup).

    parser="upstream" reads a line exactly as the released code that produced the published logs: fillers
    split only in lower case, and nothing else is removed ("examine the t_7" acts on `the`, "examine t."
    on `t.`). parser="smith" is the paper's text (Appendix A.1): fillers in any case, surrounding
    punctuation and leading articles dropped, except an article that is a label of this world (the letter
    scheme can draw 'a'; pass the world's labels, lower-cased, as `labels`).
    """
    m = _ACT.match(line.strip())
    if not m:
        return None
    verb = m.group(1).lower()  # the case-insensitive match also admits e.g. the long s; lower() settles it
    if verb not in verbs:
        return None
    toks = _arguments(m.group(2), parser, labels)
    if len(toks) < _ARITY[verb]:
        return None
    return (verb, *toks[: _ARITY[verb]])


def extract_action(text: str, labels: frozenset[str] = frozenset(), parser: str = "upstream",
                   verbs: tuple[str, ...] = VERBS) -> tuple[str, ...] | None:
    """The first parseable line of a reply acts; the rest of the reply is ignored."""
    for line in text.splitlines():
        act = parse_action(line, labels, parser, verbs)
        if act:
            return act
    return None


# --------------------------------------------------------------------------------------------------
# State and transitions


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
    `noop_message`, `done_text`, `turn_cap`, `facts`), so one `Episode` plays every world."""

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


def make_vault(world: World, drop_seed: int, hint: bool = True, rules: Rules | None = None) -> Vault:
    """The state class of the world's variant."""
    return world.vault_class()(world, drop_seed, hint, rules or Rules())


# --------------------------------------------------------------------------------------------------
# Reading observations back (the importer and the scripted agents see only texts)

_DOORS = re.compile(r"There are (\d+) locked doors: (.*?)\.\n")
_DROP = re.compile(r"^You search (\S+)\. Out falls (\S+) and a (\S+)\. They lie on the ground")
_DROP_V1 = re.compile(r"^You search (\S+)\. Out falls (\S+) and a (\S+)\. You now hold (\d+) ")
_PICKED_TYPE = re.compile(r"^(\d+) (\S+)\(s\)$")
_FUSE = re.compile(r"^You combine a (\S+) and a (\S+)\. They fuse into a (\S+) \(new\)")
_FUSE_V1 = re.compile(r"^You combine two (\S+)s\. They fuse into a (\S+) \(new\)")
_YIELD = re.compile(r"^You operate the (\S+) on (\S+)\. It yields (\S+)\.")
_OPENS = re.compile(r"^You use (\S+) on (\S+): it fits\. (\S+) opens\.$")


def canonical_label(label: str) -> str:
    """An indexed label as the world spells it: "r_02" -> "r_2" (the index read as a number)."""
    m = re.fullmatch(r"(.*_)(\d+)", label)
    return f"{m.group(1)}{int(m.group(2))}" if m else label


def doors_in(initial_observation: str) -> list[str]:
    """The door labels listed by the first observation."""
    m = _DOORS.search(initial_observation)
    if not m:
        raise ValueError("not a Lomekwi initial observation: no 'There are N locked doors: ...' line")
    return m.group(2).split(", ")


@dataclass
class Observed:
    """The public state rebuilt from (action, observation) pairs alone, no replay, no hidden labels.

    Drops come from the search texts, holding from the pickup texts ("You pick up K, K' and 1 S(s)"),
    the machine from the fuse text, keys from the machine's yield text, open doors from "it fits" (named
    canonically: the observation echoes the door as typed, "r_02" is door r_2). The v1 world's search
    text puts the key and the shard straight into the inventory ("You now hold 2 S(s)").
    """

    held_types: dict[str, int] = field(default_factory=dict)
    ground_types: dict[str, int] = field(default_factory=dict)
    held_keys: set[str] = field(default_factory=set)
    ground_keys: set[str] = field(default_factory=set)
    dropped_types: set[str] = field(default_factory=set)
    opened: set[str] = field(default_factory=set)
    machine: str | None = None
    fused: tuple[str, str] | None = None

    def feed(self, action: list[str] | tuple[str, ...], obs: str) -> None:
        if m := _DROP.match(obs):
            self.ground_keys.add(m.group(2))
            self.ground_types[m.group(3)] = self.ground_types.get(m.group(3), 0) + 1
            self.dropped_types.add(m.group(3))
        elif m := _DROP_V1.match(obs):
            self.held_keys.add(m.group(2))
            self.held_types[m.group(3)] = int(m.group(4))
            self.dropped_types.add(m.group(3))
        elif action[0] == "pickup" and obs.startswith("You pick up ") and obs.endswith(". (pickup is free.)"):
            for part in re.split(r", | and ", obs[len("You pick up "): -len(". (pickup is free.)")]):
                if t := _PICKED_TYPE.match(part):
                    self.held_types[t.group(2)] = self.held_types.get(t.group(2), 0) + int(t.group(1))
                else:
                    self.held_keys.add(part)
            self.ground_types, self.ground_keys = {}, set()
        elif m := _FUSE.match(obs):
            self.machine, self.fused = m.group(3), (m.group(1), m.group(2))
        elif m := _FUSE_V1.match(obs):
            self.machine, self.fused = m.group(2), (m.group(1), m.group(1))
        elif m := _YIELD.match(obs):
            self.machine = self.machine or m.group(1)
            self.held_keys.add(m.group(3))
        elif m := _OPENS.match(obs):
            self.opened.add(canonical_label(m.group(3)))

    def progress(self) -> tuple[int, int, int, int]:
        return progress_key(self.held_types, self.ground_types, self.held_keys, self.ground_keys, len(self.opened),
                            self.fused is not None)

    def holds(self, types: list[str] | tuple[str, ...]) -> bool:
        """Every listed type held, as many times as it is listed (the v1 recipe is one kind twice)."""
        return all(self.held_types.get(t, 0) >= list(types).count(t) for t in types)


# --------------------------------------------------------------------------------------------------
# Episode protocol


@dataclass
class Episode:
    """One episode's turn protocol and its record; the agent is whatever produces `reply` texts.

    `messages` is the chat the agent sees (system prompt first); `feed(text, usage)` consumes one reply
    and returns False once the episode is over; `feed("", api_error=...)` records a failed model call,
    which is a no-op turn like any unparseable reply (as in the released runner). `record()` carries
    everything a metric needs. `no_progress_window=None` turns the no-progress guard off (the released deep
    sweep); `max_turns=None` takes the world's released turn cap.
    """

    world: World
    drop_seed: int
    budget: int | None
    hint: bool = True
    max_turns: int | None = None
    no_progress_window: int | None = NO_PROGRESS_WINDOW
    system_prompt: str | None = None
    rules: Rules = field(default_factory=Rules)
    messages: list[dict[str, str]] = field(default_factory=list)
    actions: list[list[str]] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    agent_texts: list[str] = field(default_factory=list)
    turn_usage: list[dict[str, int]] = field(default_factory=list)
    unparsed: list[dict[str, Any]] = field(default_factory=list)
    hold_turn: int | None = None
    build_turn: int | None = None
    nudge_turn: int | None = None
    stop_reason: str | None = None

    def __post_init__(self) -> None:
        self.vault = make_vault(self.world, self.drop_seed, self.hint, self.rules)
        self._labels = self.vault.label_set()
        if self.max_turns is None:
            self.max_turns = self.vault.turn_cap(self.budget or budget_for(self.world.n))
        if self.system_prompt is None:
            self.system_prompt = system_prompt_for(self.world)
        self.turns = 0
        self.api_errors = 0
        self._noops = 0
        self._stale = 0
        self.messages = [{"role": "system", "content": self.system_prompt},
                         {"role": "user", "content": self.vault.initial_observation(self.budget)}]

    @property
    def done(self) -> bool:
        return self.stop_reason is not None

    def spent(self) -> int:
        """Budgeted actions so far: everything but pickup."""
        return sum(1 for a in self.actions if a[0] != "pickup")

    def feed(self, text: str, usage: dict[str, int] | None = None, api_error: str | None = None) -> bool:
        if self.done:
            raise RuntimeError("episode is over; start a new Episode")
        t = self.turns
        self.turns += 1
        self.turn_usage.append(dict(usage or {}))
        if api_error is not None:
            self.api_errors += 1
            text = ""
        act = extract_action(text, self._labels, self.rules.parser, self.vault.verbs())
        if act is None:
            self._noops += 1
            self.unparsed.append({"turn": t, "text": text, **({"api_error": api_error} if api_error else {})})
            if self._noops >= NOOP_LIMIT:
                self.stop_reason = "noop"
            elif self.turns >= self.max_turns:
                self.stop_reason = "max_turns"
            else:
                self.messages += [{"role": "assistant", "content": text},
                                  {"role": "user", "content": self.vault.noop_message}]
            return not self.done
        self._noops = 0
        before = self.vault.progress()
        obs = self.vault.step(act)
        self.actions.append(list(act))
        self.observations.append(obs)
        self.agent_texts.append(text)
        if self.hold_turn is None and self.vault.holds_recipe():
            self.hold_turn = len(self.actions) - 1
        if self.build_turn is None and self.vault.has_machine:
            self.build_turn = len(self.actions) - 1
        self._stale = 0 if progressed(before, self.vault.progress()) else self._stale + 1
        if self.rules.stop_on_build and self.vault.has_machine:
            self.stop_reason, tail = "built", ""
        elif self.vault.solved():
            self.stop_reason, tail = "solved", "\n\n" + self.vault.done_text()
        elif self.budget is not None and self.spent() >= self.budget:
            self.stop_reason, tail = "out_of_budget", f"\n\nBudget exhausted ({self.budget} actions). You fail."
        elif self.no_progress_window is not None and self._stale >= self.no_progress_window:
            self.stop_reason, tail = "no_progress", ""
        else:
            nudge = self._nudge(t)  # the released loop decides the nudge before its turn cap, so the last turn counts
            if self.turns >= self.max_turns:
                self.stop_reason, tail = "max_turns", ""
            else:
                tail = "\n\n" + self.vault.status_line(self.budget, self.spent()) + nudge
        self.messages += [{"role": "assistant", "content": text}, {"role": "user", "content": obs + tail}]
        return not self.done

    def _nudge(self, turn: int) -> str:
        """The commitment nudge, once, on the first turn after which the recipe is held unbuilt."""
        nudge = self.rules.commit_nudge
        if not nudge or self.nudge_turn is not None or self.vault.has_machine or not self.vault.holds_recipe():
            return ""
        self.nudge_turn = turn
        return "\n\n" + nudge

    def record(self) -> dict[str, Any]:
        """The JSONL row: enough to recompute every metric without replay."""
        usage: dict[str, int] = {}
        for u in self.turn_usage:
            for k, v in u.items():
                usage[k] = usage.get(k, 0) + int(v)
        usage["calls"] = len(self.turn_usage) - self.api_errors  # successful model calls, as the release counts
        return {
            "n": self.world.n, "n_types": self.world.n_types, "world": self.world.variant, "budget": self.budget,
            "hint": self.hint, "drop_seed": self.drop_seed, "labels": self.world.labels(),
            "actions": self.actions, "observations": self.observations, "agent_texts": self.agent_texts,
            "unparsed": self.unparsed, "api_errors": self.api_errors, "turn_usage": self.turn_usage, "usage": usage,
            "held": self.hold_turn is not None, "hold_turn": self.hold_turn,
            "built": self.build_turn is not None, "build_turn": self.build_turn,
            "dropped_both": set(self.world.recipe) <= self.vault.dropped_types,
            "won": self.vault.solved(), "opened": len(self.vault.opened),
            "total_actions": self.spent(), "pickups": len(self.actions) - self.spent(),
            "turns": self.turns, "nudge_turn": self.nudge_turn, "stop_reason": self.stop_reason,
            **self.vault.facts(),
        }


def system_prompt_for(world: World) -> str:
    """The released system prompt of the world's variant."""
    return world.vault_class().system_prompt
