"""The relabeled layout of one episode (`World`) and its draw from the seed; the world names the state class
that plays it (env.py, v1.py; Deep Lomekwi's `DeepWorld` brings its own)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from smith.evals.lomekwi.env import Vault
from smith.evals.lomekwi.relabel import recipe_indices, relabel
from smith.evals.lomekwi.v1 import V1Vault

WORLDS = ("pickup", "v1")


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
