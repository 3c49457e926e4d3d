"""Depth policies for the MDP of depth.py: fixed-K, tabular Q-learning and a small DQN (BoR paper section 2.2-2.3).

The paper's agents are deliberately simple probes of the reward. Both learners here use the fact that
a query's states do not depend on the policy (depth.py): each training query is unrolled to the depth
cap once and both actions are backed up at every state — off-policy Q-learning with a behaviour policy
that always continues, which explores every depth without epsilon schedules. The tabular agent sweeps
each query from the deepest state up, so a STOP reward reaches the first state in one pass.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import numpy as np
from tqdm.auto import tqdm

from smith.pool.retrieval.depth import CONTINUE, N_FEATURES, STOP, Ranking


class DepthPolicy(Protocol):
    name: str

    def depth(self, ranking: Ranking, max_depth: int) -> int:
        """How many of the top-ranked tools to show (1..min(max_depth, N))."""
        ...


class FixedK:
    """The fixed-depth baseline (section 2.3): always the top K."""

    def __init__(self, k: int) -> None:
        if k < 1:
            raise ValueError(f"fixed-K needs K >= 1, got {k}")
        self.k = k
        self.name = f"fixed-{k}"

    def depth(self, ranking: Ranking, max_depth: int) -> int:
        return min(self.k, max_depth, ranking.N)


_TOP_EDGES = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
_DROP_EDGES = np.array([0.25, 0.5, 1.0, 2.0, 3.0])


def _depth_bucket(k: int) -> int:
    return k if k <= 8 else 8 + int(2 * math.log2(k / 8)) + 1


def _keys(x: np.ndarray, k: int) -> tuple[str, str]:
    """Tabular state: depth bucket, rounded BoR ceiling, top z-score bin, drop-from-top bin; and a coarse backoff."""
    d, c = _depth_bucket(k), round(x[6] * 10)
    top = int(np.searchsorted(_TOP_EDGES, x[0]))
    drop = int(np.searchsorted(_DROP_EDGES, x[2]))
    return f"{d},{c},{top},{drop}", f"{d},{c}"


class QLearningAgent:
    """Tabular Q-learning over a discretised state, with a coarse (depth, ceiling) table for unseen states.

    Step size 1/n per (state, action), floored at `alpha_min`; undiscounted (episodes are at most
    `max_depth` steps). An action never tried in a state is unknown, and unknown CONTINUE means STOP.
    """

    def __init__(
        self, reward: str = "bor", step_cost: float = 0.01, max_depth: int = 100, alpha_min: float = 0.02
    ) -> None:
        self.reward, self.step_cost, self.max_depth, self.alpha_min = reward, step_cost, max_depth, alpha_min
        self.name = f"q-{reward}"
        self.q: dict[str, list[float]] = {}
        self.n: dict[str, list[int]] = {}

    def _update(self, key: str, action: int, target: float) -> None:
        q = self.q.setdefault(key, [math.nan, math.nan])
        n = self.n.setdefault(key, [0, 0])
        n[action] += 1
        if math.isnan(q[action]):
            q[action] = target
        else:
            q[action] += max(1.0 / n[action], self.alpha_min) * (target - q[action])

    def _values(self, keys: tuple[str, str]) -> list[float] | None:
        for key in keys:
            if key in self.q:
                return self.q[key]
        return None

    def _value(self, keys: tuple[str, str], can_continue: bool) -> float:
        q = self._values(keys)
        if q is None:
            return 0.0
        options = [v for a, v in enumerate(q) if not math.isnan(v) and (a == STOP or can_continue)]
        return max(options) if options else 0.0

    def fit(
        self, rankings: Sequence[Ranking], epochs: int = 20, seed: int = 0, progress: bool = False
    ) -> QLearningAgent:
        rng = np.random.default_rng(seed)
        episodes = []
        for ranking in rankings:
            feats, stop_r = ranking.unroll(self.max_depth, self.reward)
            episodes.append(([_keys(f, k) for k, f in enumerate(feats, start=1)], stop_r.tolist()))
        for _ in tqdm(range(epochs), desc=f"{self.name} epochs", disable=not progress):
            for i in rng.permutation(len(episodes)):
                keys, stop_r = episodes[i]
                depth = len(stop_r)
                for k in range(depth, 0, -1):
                    for key in keys[k - 1]:
                        self._update(key, STOP, stop_r[k - 1])
                        if k < depth:
                            nxt = self._value(keys[k], can_continue=k + 1 < depth)
                            self._update(key, CONTINUE, nxt - self.step_cost)
        return self

    def depth(self, ranking: Ranking, max_depth: int) -> int:
        cap = min(max_depth, self.max_depth, ranking.N)
        for k in range(1, cap):
            q = self._values(_keys(ranking.features(k), k))
            if q is None or math.isnan(q[CONTINUE]) or q[STOP] >= q[CONTINUE]:
                return k
        return cap

    def save(self, path: str | Path) -> None:
        meta = {
            "reward": self.reward,
            "step_cost": self.step_cost,
            "max_depth": self.max_depth,
            "alpha_min": self.alpha_min,
        }
        Path(path).write_text(json.dumps({"kind": "q", **meta, "q": self.q, "n": self.n}))

    @classmethod
    def load(cls, path: str | Path) -> QLearningAgent:
        d = json.loads(Path(path).read_text())
        agent = cls(d["reward"], d["step_cost"], d["max_depth"], d["alpha_min"])
        agent.q, agent.n = d["q"], d["n"]
        return agent


@contextmanager
def _one_thread() -> Iterator[None]:
    """A 64-unit MLP gains nothing from intra-op threads and loses much to them on a busy machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class DQNAgent:
    """A small deep Q-network (two hidden layers) on the continuous state of depth.py, trained by replay
    over the unrolled transitions with a periodically synced target network and a Huber loss."""

    def __init__(
        self,
        reward: str = "bor",
        step_cost: float = 0.01,
        max_depth: int = 100,
        hidden: int = 64,
        lr: float = 1e-3,
        seed: int = 0,
    ) -> None:
        import torch

        self.reward, self.step_cost, self.max_depth, self.hidden, self.lr = reward, step_cost, max_depth, hidden, lr
        self.name = f"dqn-{reward}"
        torch.manual_seed(seed)
        self.seed = seed
        self.net = self._mlp()

    def _mlp(self):
        from torch import nn

        h = self.hidden
        return nn.Sequential(nn.Linear(N_FEATURES, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 2))

    def fit(
        self,
        rankings: Sequence[Ranking],
        updates: int = 1500,
        batch_size: int = 128,
        target_every: int = 50,
        progress: bool = False,
    ) -> DQNAgent:
        import torch
        import torch.nn.functional as F

        x, r, x_next, has_next, next_can_continue = [], [], [], [], []
        for ranking in rankings:
            feats, stop_r = ranking.unroll(self.max_depth, self.reward)
            depth = len(stop_r)
            x.append(feats)
            r.append(stop_r)
            x_next.append(np.vstack([feats[1:], np.zeros((1, N_FEATURES))]))
            has_next.append(np.arange(1, depth + 1) < depth)
            next_can_continue.append(np.arange(2, depth + 2) < depth)
        X, Rs, Xn = (torch.tensor(np.concatenate(a), dtype=torch.float32) for a in (x, r, x_next))
        Hn, Cn = (torch.tensor(np.concatenate(a)) for a in (has_next, next_can_continue))
        target = self._mlp()
        target.load_state_dict(self.net.state_dict())
        opt = torch.optim.Adam(self.net.parameters(), lr=self.lr)
        gen = torch.Generator().manual_seed(self.seed)
        with _one_thread():
            for step in tqdm(range(updates), desc=f"{self.name} updates", disable=not progress):
                idx = torch.randint(0, len(X), (batch_size,), generator=gen)
                q = self.net(X[idx])
                with torch.no_grad():
                    qn = target(Xn[idx])
                    v_next = torch.where(Cn[idx], qn.max(dim=1).values, qn[:, STOP])
                loss = F.smooth_l1_loss(q[:, STOP], Rs[idx])
                mask = Hn[idx]
                if mask.any():
                    loss = loss + F.smooth_l1_loss(q[mask, CONTINUE], v_next[mask] - self.step_cost)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if (step + 1) % target_every == 0:
                    target.load_state_dict(self.net.state_dict())
        return self

    def depth(self, ranking: Ranking, max_depth: int) -> int:
        import torch

        cap = min(max_depth, self.max_depth, ranking.N)
        feats = np.stack([ranking.features(k) for k in range(1, cap + 1)])
        with torch.no_grad():
            q = self.net(torch.tensor(feats, dtype=torch.float32)).numpy()
        stops = np.flatnonzero(q[:-1, STOP] >= q[:-1, CONTINUE]) if cap > 1 else np.array([], dtype=int)
        return int(stops[0]) + 1 if len(stops) else cap

    def save(self, path: str | Path) -> None:
        import torch

        meta = {"reward": self.reward, "step_cost": self.step_cost, "max_depth": self.max_depth, "hidden": self.hidden}
        torch.save({"kind": "dqn", **meta, "lr": self.lr, "state_dict": self.net.state_dict()}, path)

    @classmethod
    def load(cls, path: str | Path) -> DQNAgent:
        import torch

        d = torch.load(path, weights_only=True)
        agent = cls(d["reward"], d["step_cost"], d["max_depth"], d["hidden"], d["lr"])
        agent.net.load_state_dict(d["state_dict"])
        return agent
