"""The Recognition-MCP sweep: prompt conditions x T x d cells, reps scaled inversely with T (section 4.5).

Rep r uses problem seed r in every cell, so a rep is the same division across models and tool counts.
Rollouts run concurrently (each with its own stdio server), are appended to a resumable JSONL log as
they finish, and a rerun skips every key already logged.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tqdm.auto import tqdm

from smith.errors import ConfigError
from smith.evals.common import EpisodeLog

from .agents import ChatAgent
from .host import CONDITIONS, Episode, run_episode


def plan(conditions: list[str], tools: list[int], reps: list[int], difficulties: list[int],
         limit: int | None = None, surcharge: int = 25, max_turns: int = 300, max_noop: int = 4) -> list[Episode]:
    """Every episode of the sweep; `limit` caps the reps of each (condition, T, d) cell."""
    if len(tools) != len(reps):
        raise ConfigError(f"suite.reps must give one count per suite.tools entry: tools={tools}, reps={reps}")
    unknown = [c for c in conditions if c not in CONDITIONS]
    if unknown:
        raise ConfigError(f"condition {unknown[0]!r} not found; known: {', '.join(CONDITIONS)}")
    return [Episode(c, t, d, r, surcharge=surcharge, max_turns=max_turns, max_noop=max_noop)
            for c in conditions for t, n in zip(tools, reps, strict=True) for d in difficulties
            for r in range(n if limit is None else min(n, limit))]


async def _play(agent: ChatAgent, todo: list[Episode], log: EpisodeLog, concurrency: int, no_think: bool,
                seed: int, bar: tqdm) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(ep: Episode) -> None:
        async with gate:
            record = await run_episode(agent, ep, no_think=no_think, seed_offset=seed)
        log.add(record)
        bar.update(1)

    await asyncio.gather(*(one(ep) for ep in todo))


def run_sweep(agent: ChatAgent, episodes: list[Episode], log_path: Path, concurrency: int = 4,
              no_think: bool = False, seed: int = 0) -> list[dict]:
    """Play every episode not yet in the log; return the logged records of this plan."""
    log = EpisodeLog(log_path, key="key")
    todo = [ep for ep in episodes if ep.key(agent.name) not in log]
    with tqdm(total=len(episodes), initial=len(episodes) - len(todo), desc="recognition_mcp", unit="rollout") as bar:
        asyncio.run(_play(agent, todo, log, concurrency, no_think, seed, bar))
    return [log.rows[ep.key(agent.name)] for ep in episodes]
