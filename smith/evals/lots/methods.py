"""The methods of Table 1 by name (suite.methods). A task-level method builds one tool space per family from
what the family's fitting requests tell it (`Task`); the LLM router (`ROUTER`) instead picks tools per
evaluation request and lives with the agent (`serving.ChatAgent.route`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from smith.evals.lots import baselines, spaces

ROUTER = "llm_router"


@dataclass(frozen=True)
class Task:
    """One family as a task-level method sees it: the registry, the fitting requests' questions, a fitting-accuracy
    oracle (label-using searches), LOTS's fit of the family and its budget K."""

    family: str
    names: list[str]
    schemas: list[dict[str, Any]]
    queries: list[str]
    fit_accuracy: Callable[[list[str]], float]
    fit: dict[str, Any]
    embed: Any  # the dense encoder, when a method needs it
    seed: int
    beam_width: int

    @property
    def k(self) -> int:
        return len(self.fit["space"])


SPACES: dict[str, Callable[[Task], list[str]]] = {
    "no_tools": lambda t: baselines.no_tools(),
    "keep_all": lambda t: baselines.keep_all(t.names),
    "random": lambda t: baselines.random_space(t.names, t.k, f"{t.seed}:{t.family}"),
    "bm25": lambda t: spaces.top_k(baselines.bm25_scores(t.schemas, t.queries), t.k),
    "dense": lambda t: spaces.top_k(baselines.dense_scores(t.embed, t.schemas, t.queries), t.k),
    "beam_search": lambda t: baselines.beam_search(t.names, t.fit_accuracy, t.beam_width)[0],
    "tto": lambda t: baselines.tto(t.names, t.fit_accuracy)[0],
    "lots": lambda t: t.fit["space"],
}
METHODS = ("no_tools", "keep_all", "random", "bm25", "dense", ROUTER, "beam_search", "tto", "lots")  # Table 1's order
