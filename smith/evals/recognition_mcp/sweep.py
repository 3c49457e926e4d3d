"""The Recognition-MCP sweep: prompt conditions x T x d cells, reps scaled inversely with T (section 4.5),
and the tools-off calibration pilot behind the budget formula (the released oracle_pilot.py).

Rep r uses problem seed r in every cell, so a rep is the same division across models and tool counts.
Rollouts run concurrently (each with its own stdio server), are appended to a resumable JSONL log as
they finish, and a rerun skips every key already logged. A rollout that fails (a model server error
other than a context overflow) is logged as an error row, as the released sweep does: the other
rollouts go on, scoring skips it, and a rerun plays it again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tqdm.auto import tqdm

from smith.errors import ConfigError
from smith.evals.common import EpisodeLog

from .agents import AnthropicAgent, ChatAgent
from .host import CONDITIONS, SweepEpisode, run_episode

Agent = ChatAgent | AnthropicAgent


def plan(conditions: list[str], tools: list[int], reps: list[int], difficulties: list[int],
         limit: int | None = None, surcharge: int = 25, max_turns: int = 300, max_noop: int = 4,
         obfuscate: bool = True, sequential: bool = True, nudge_errors: bool = False) -> list[SweepEpisode]:
    """Every episode of the sweep; `limit` caps the reps of each (condition, T, d) cell."""
    if len(tools) != len(reps):
        raise ConfigError(f"suite.reps must give one count per suite.tools entry: tools={tools}, reps={reps}")
    unknown = [c for c in conditions if c not in CONDITIONS]
    if unknown:
        raise ConfigError(f"condition {unknown[0]!r} not found; known: {', '.join(CONDITIONS)}")
    return [SweepEpisode(c, t, d, r, surcharge=surcharge, max_turns=max_turns, max_noop=max_noop, obfuscate=obfuscate,
                    sequential=sequential, nudge_errors=nudge_errors)
            for c in conditions for t, n in zip(tools, reps, strict=True) for d in difficulties
            for r in range(n if limit is None else min(n, limit))]


def pilot_plan(difficulties: list[int], reps: int, budget: int, max_turns: int, limit: int | None = None,
               max_noop: int = 4) -> list[SweepEpisode]:
    """The tools-off pilot: submit_answer only, a budget too large to stop anything, so the meter at a
    correct submission is the true manual cost S(d)."""
    return [SweepEpisode("baseline", 0, d, r, surcharge=0, budget=budget, max_turns=max_turns, max_noop=max_noop)
            for d in difficulties for r in range(reps if limit is None else min(reps, limit))]


def _leaves(error: BaseException) -> list[BaseException]:
    """The errors inside (nested) exception groups, which the mcp client's task group wraps them in."""
    inner = getattr(error, "exceptions", None)
    return [leaf for e in inner for leaf in _leaves(e)] if inner else [error]


def error_row(agent: Agent, ep: SweepEpisode, error: BaseException) -> dict:
    """What a failed rollout leaves in the log: its cell and the error, the inner errors of a group spelled out."""
    text = "; ".join(f"{type(e).__name__}: {e}" for e in _leaves(error))
    return {"key": ep.key(agent.name), "condition": ep.condition, "model": agent.name, "n": ep.tools,
            "difficulty": ep.difficulty, "seed": ep.rep, "budget": ep.token_budget, "error": text}


async def _play(agent: Agent, todo: list[SweepEpisode], log: EpisodeLog, concurrency: int, no_think: bool,
                seed: int, bar: tqdm) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(ep: SweepEpisode) -> None:
        async with gate:
            try:
                record = await run_episode(agent, ep, no_think=no_think, seed_offset=seed)
            except Exception as e:
                record = error_row(agent, ep, e)
        log.add(record)
        bar.update(1)

    await asyncio.gather(*(one(ep) for ep in todo))


def run_sweep(agent: Agent, episodes: list[SweepEpisode], log_path: Path, concurrency: int = 4,
              no_think: bool = False, seed: int = 0) -> list[dict]:
    """Play every episode not yet in the log (or logged as an error); return the logged records of this plan."""
    log = EpisodeLog(log_path, key="key")
    todo = [ep for ep in episodes if ep.key(agent.name) not in log or log.rows[ep.key(agent.name)].get("error")]
    with tqdm(total=len(episodes), initial=len(episodes) - len(todo), desc="recognition_mcp", unit="rollout") as bar:
        asyncio.run(_play(agent, todo, log, concurrency, no_think, seed, bar))
    return [log.rows[ep.key(agent.name)] for ep in episodes]
