"""The adaptive-depth retriever the pool calls when it holds more tools than a prompt's menu, and the
`search_tools(query, k)` tool that `smith serve-pool --retrieve` exposes (BoR paper sections 2.2, 3.3:
shorter, adaptive shortlists leave the model fewer distractors to confuse it)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smith.pool.retrieval.agents import DepthPolicy, DQNAgent, FixedK, QLearningAgent
from smith.pool.retrieval.depth import Ranking
from smith.pool.retrieval.docs import ToolDoc, as_text
from smith.pool.retrieval.scorers import Scorer, make_scorer

if TYPE_CHECKING:
    from smith.pool.pool import PoolEntry, ToolPool

AGENTS = ("q", "dqn")


class AdaptiveRetriever:
    """Rank tools with a scorer, then cut the ranking where a depth policy says STOP (never past `max_k`).

    Without a trained policy it shows the top `max_k` (the fixed-K baseline); `fit` trains one on
    queries with known relevant tools, e.g. catalog questions against the pool's tools of their category.
    """

    def __init__(self, scorer: Scorer | str = "minilm", policy: DepthPolicy | None = None) -> None:
        self.scorer = make_scorer(scorer) if isinstance(scorer, str) else scorer
        self.policy = policy

    def rank(self, query: str, documents: Sequence[ToolDoc | dict | str], relevant: Sequence[int] = ()) -> Ranking:
        if not documents:
            raise ValueError("cannot rank an empty tool list; add tools to the pool first")
        return Ranking.from_scores(self.scorer.score([query], [as_text(d) for d in documents])[0], relevant)

    def shortlist(self, query: str, documents: Sequence[ToolDoc | dict | str], max_k: int) -> list[int]:
        """Indices into `documents` of the tools to show, best first: 1..max_k of them."""
        if max_k < 1:
            raise ValueError(f"max_k must be >= 1, got {max_k}")
        ranking = self.rank(query, documents)
        policy = self.policy or FixedK(max_k)
        return [int(i) for i in ranking.order[: policy.depth(ranking, max_k)]]

    def fit(
        self,
        queries: Sequence[str],
        documents: Sequence[ToolDoc | dict | str],
        relevant: Sequence[Sequence[int]],
        agent: str = "q",
        reward: str = "bor",
        step_cost: float = 0.01,
        max_depth: int = 100,
        seed: int = 0,
    ) -> AdaptiveRetriever:
        """Train a depth policy on these queries (relevant[i]: indices of the right tools for queries[i])."""
        if len(queries) != len(relevant):
            raise ValueError(f"{len(queries)} queries but {len(relevant)} relevance lists; give one list per query")
        scores = self.scorer.score(list(queries), [as_text(d) for d in documents])
        rankings = [Ranking.from_scores(s, rel) for s, rel in zip(scores, relevant, strict=True)]
        if agent == "q":
            self.policy = QLearningAgent(reward, step_cost, max_depth).fit(rankings, seed=seed)
        elif agent == "dqn":
            self.policy = DQNAgent(reward, step_cost, max_depth, seed=seed).fit(rankings)
        else:
            raise ValueError(f"agent '{agent}' not found; known: {', '.join(AGENTS)}")
        return self

    def save(self, directory: str | Path) -> Path:
        """Write the scorer name and the trained policy (Q-table JSON or DQN weights) under `directory`."""
        if not isinstance(self.policy, QLearningAgent | DQNAgent):
            raise ValueError("only a trained policy can be saved; call fit(...) first")
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        kind = "q" if isinstance(self.policy, QLearningAgent) else "dqn"
        self.policy.save(out / ("policy.json" if kind == "q" else "policy.pt"))
        (out / "retriever.json").write_text(json.dumps({"scorer": self.scorer.name, "agent": kind}))
        return out

    @classmethod
    def load(cls, directory: str | Path) -> AdaptiveRetriever:
        d = Path(directory)
        if not (d / "retriever.json").exists():
            raise FileNotFoundError(f"no retriever.json in {d}; save one with AdaptiveRetriever.save(dir)")
        meta = json.loads((d / "retriever.json").read_text())
        policy = QLearningAgent.load(d / "policy.json") if meta["agent"] == "q" else DQNAgent.load(d / "policy.pt")
        return cls(meta["scorer"], policy)


class PoolSearch:
    """`search_tools(query, k)` over a pool's entries: the matching entries, best first.

    With k omitted the retriever's depth policy chooses how many (at most `max_k`); with k given, the top k.
    `spec` is the OpenAI function schema to advertise; its `parameters` double as an MCP inputSchema.
    """

    name = "search_tools"

    def __init__(
        self, entries: Sequence[PoolEntry], retriever: AdaptiveRetriever | None = None, max_k: int = 10
    ) -> None:
        self.entries = list(entries)
        self.docs = [ToolDoc(e.tool.function_name, e.tool.description, e.tool.schema.get("parameters") or {})
                     for e in self.entries]
        self.retriever = retriever or AdaptiveRetriever()
        self.max_k = max_k

    @property
    def spec(self) -> dict[str, Any]:
        k_help = f"How many tools to return, 1..{self.max_k}; omit it to let the retriever decide."
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": (
                    f"Search the {len(self.entries)} pooled tools by what you need done; returns the best "
                    "matching tools' names and descriptions, best first."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "What the tool should do, in plain words."},
                        "k": {"type": "integer", "minimum": 1, "maximum": self.max_k, "description": k_help},
                    },
                    "required": ["query"],
                },
            },
        }

    def __call__(self, query: str, k: int | None = None) -> list[PoolEntry]:
        if k is not None and not 1 <= int(k) <= self.max_k:
            raise ValueError(f"k must be between 1 and {self.max_k}, got {k}")
        if k is None:
            picked = self.retriever.shortlist(query, self.docs, self.max_k)
        else:
            picked = [int(i) for i in self.retriever.rank(query, self.docs).order[: min(int(k), len(self.docs))]]
        return [self.entries[i] for i in picked]


def pool_search(pool: ToolPool, retriever: AdaptiveRetriever | None = None, max_k: int = 10) -> PoolSearch:
    """The search tool `smith serve-pool --retrieve` serves over `pool` (top-k, or adaptive depth when k is omitted)."""
    return PoolSearch(list(pool), retriever, max_k)
