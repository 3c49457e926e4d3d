"""Deep Lomekwi rows read back from their texts alone: the public state (`Seen`), the episode facts, and the
released row format in and out (the released deep sweep records its own row format, not Lomekwi's)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from smith.evals.lomekwi.deep.env import WORLD
from smith.evals.lomekwi.importer import RELEASED_USAGE, episode_key
from smith.evals.lomekwi.observed import canonical_label

RECIPE_MODE = "two_layer"
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
    """LomekwiEpisode facts from the recorded observations alone (no replay): holding both recipe resources at once,
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
