"""Reading observations back: the public state rebuilt from the texts alone (the importer and the scripted
agents see only texts, never the hidden labels or the drop seed)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from smith.evals.lomekwi.env import progress_key

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
