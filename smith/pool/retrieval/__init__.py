"""Tool retrieval over a large pool with adaptive depth (BoR paper, ../shared/seeds/001_b84c5ac8cb1b902c.txt).

Scorers rank tool texts; a depth policy (fixed-K, tabular Q-learning or a DQN trained on the BoR reward)
decides how many of the top tools to show. `AdaptiveRetriever.shortlist` is what the pool calls;
`pool_search` builds the search tool served by `smith serve-pool --retrieve`.
"""

from smith.pool.retrieval.agents import DepthPolicy, DQNAgent, FixedK, QLearningAgent
from smith.pool.retrieval.chance import bor_ceiling, p_rand
from smith.pool.retrieval.depth import Ranking, shortlist_outcome
from smith.pool.retrieval.docs import ToolDoc, as_text
from smith.pool.retrieval.retriever import AdaptiveRetriever, PoolSearch, pool_search
from smith.pool.retrieval.scorers import SCORERS, BM25Scorer, DenseScorer, RandomScorer, Scorer, make_scorer

__all__ = [
    "SCORERS",
    "AdaptiveRetriever",
    "BM25Scorer",
    "DQNAgent",
    "DenseScorer",
    "DepthPolicy",
    "FixedK",
    "PoolSearch",
    "QLearningAgent",
    "RandomScorer",
    "Ranking",
    "Scorer",
    "ToolDoc",
    "as_text",
    "bor_ceiling",
    "make_scorer",
    "p_rand",
    "pool_search",
    "shortlist_outcome",
]
