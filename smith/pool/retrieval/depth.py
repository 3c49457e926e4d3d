"""The depth MDP of BoR paper section 2.2: walk down a ranked registry and decide when to STOP.

State: the scores examined so far, the current depth k, the registry size N and the BoR ceiling
-log2 P_rand(N, 1, k). Actions: STOP (show the top-k shortlist) or CONTINUE (examine candidate k+1).
Reward at STOP: -log2 P_rand(N, R, k) if the shortlist holds a relevant tool, else 0; each CONTINUE
costs a small `step_cost`. Because P_rand grows with k, the reward shrinks with depth by itself (the
paper's self-pruning property); the F1 ablation (section 2.3) pays 2h/(k+R) instead, 2/(k+1) at R = 1.

CONTINUE only reveals the next score, so the sequence of states of one query does not depend on the
policy, and STOP is terminal with a reward known at every state. `Ranking.unroll` therefore lays out
a whole query once; agents learn from it off-policy (see agents.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from smith.pool.retrieval.chance import bor_ceiling, p_rand

STOP, CONTINUE = 0, 1
REWARDS = ("bor", "f1")
N_FEATURES = 8


@dataclass(frozen=True)
class Ranking:
    """One query's ranked registry: scores standardised over the whole registry (the ranker scored every
    tool anyway, so z-scores put BM25 and cosine on one scale), in rank order, with relevance flags."""

    z: np.ndarray  # standardised scores, descending
    order: np.ndarray  # document index at each rank
    relevant: np.ndarray  # bool per rank
    N: int
    R: int

    @classmethod
    def from_scores(cls, scores: Sequence[float], relevant: Sequence[int] = ()) -> Ranking:
        s = np.asarray(scores, dtype=np.float64)
        order = np.argsort(-s, kind="stable")
        z = (s - s.mean()) / (s.std() + 1e-9)
        rel = np.zeros(len(s), dtype=bool)
        rel[list(relevant)] = True
        return cls(z=z[order], order=order, relevant=rel[order], N=len(s), R=int(rel.sum()))

    @property
    def first_hit(self) -> int | None:
        """1-based rank of the first relevant tool (None when the registry holds none)."""
        hits = np.flatnonzero(self.relevant)
        return int(hits[0]) + 1 if len(hits) else None

    def hits_at(self, k: int) -> int:
        return int(self.relevant[:k].sum())

    def features(self, k: int) -> np.ndarray:
        """The observation at depth k (1-based): what the paper's state holds, as numbers of order one."""
        z = self.z
        zk = z[k - 1]
        return np.array(
            [
                z[0],
                zk,
                z[0] - zk,
                z[k - 2] - zk if k >= 2 else 0.0,
                z[0] - z[1] if k >= 2 else 0.0,
                np.log2(k) / 10,
                bor_ceiling(self.N, 1, k) / 10,
                np.log2(self.N) / 10,
            ]
        )

    def stop_reward(self, k: int, reward: str = "bor") -> float:
        """Reward for STOP at depth k: BoR bits on a hit (section 2.2) or the F1 ablation 2h/(k+R) (section 2.3)."""
        h = self.hits_at(k)
        if h == 0:
            return 0.0
        if reward == "bor":
            return bor_ceiling(self.N, self.R, k)
        if reward == "f1":
            return 2 * h / (k + self.R)
        raise ValueError(f"reward '{reward}' not found; known: {', '.join(REWARDS)}")

    def unroll(self, max_depth: int, reward: str = "bor") -> tuple[np.ndarray, np.ndarray]:
        """Features and STOP rewards at depths 1..min(max_depth, N): one row per reachable state."""
        depth = min(max_depth, self.N)
        feats = np.stack([self.features(k) for k in range(1, depth + 1)])
        rewards = np.array([self.stop_reward(k, reward) for k in range(1, depth + 1)])
        return feats, rewards


def shortlist_outcome(ranking: Ranking, depth: int) -> dict[str, float]:
    """What a shortlist of the top `depth` tools scores: hit (0/1) and its chance baseline P_rand."""
    return {"depth": depth, "hit": float(ranking.hits_at(depth) > 0), "p_rand": p_rand(ranking.N, ranking.R, depth)}
