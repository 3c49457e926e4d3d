"""One run's state beside TRL's trainer: the tool pool, the evaluator's last sync step, and the run's logs
(metrics.jsonl, rollouts.jsonl, per-rank rows). Checkpoints are smith.train.checkpoints, the checkpoint and log
callback smith.train.callbacks, the run's settings record and the resume check smith.train.resume."""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smith.config import TrainConfig
from smith.pool import ToolPool
from smith.rollout.episodes import EpisodeKind, Sample


class Session:
    """What one run keeps beside TRL's trainer: the tool pool, the evaluator's last sync step, and the run's logs
    (metrics.jsonl, rollouts.jsonl)."""

    def __init__(self, conf: TrainConfig, run_dir: Path, pool: ToolPool, base_model: str | None = None) -> None:
        """`base_model`: what checkpoints name as their base (default: the recipe's model.name_or_path)."""
        self.base_model = base_model or conf.model.name_or_path
        self.run_dir = run_dir
        self.pool = pool
        self.seed = conf.seed
        self.has_evaluator_copy = conf.evaluator.kind == "self" or conf.judge.kind == "self"
        self.last_sync = 0  # the step of the last evaluator sync (the trainer's decision; checkpointed)
        self.step_metrics: dict[str, float] = {}

    def resume_from(self, pool_file: Path, last_sync: int) -> None:
        """A checkpoint's pool (in place: the rollout shares it) and sync step."""
        self.pool.restore(pool_file)
        self.last_sync = last_sync

    def log_rank(self, rank: int, step: int, advantages: list[float]) -> None:
        rows = self.run_dir / "ranks"
        rows.mkdir(exist_ok=True)
        digest = hashlib.sha1(json.dumps(self.pool.to_json()["entries"], sort_keys=True).encode()).hexdigest()
        row = {"step": step, "advantages": [round(a, 6) for a in advantages], "pool_size": len(self.pool),
               "pool_digest": digest}
        with (rows / f"rank{rank}.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")

    # -- logging ---------------------------------------------------------------------------------------
    def record(self, samples: list[Sample], rank: int = 0, step: int = 0, keys: list[str] | None = None,
               timing: dict[str, float] | None = None, counts: dict[str, float] | None = None,
               discarded: Sequence[tuple[str, Sample]] = ()) -> None:
        """Per-step metrics beyond TRL's own, over the episodes the update sees: format failures, sandbox faults,
        pool sizes, use outcomes, `timing` (seconds by phase), `counts` (logged under their own names: the
        refill's); and every episode of this rank, appended to its own log (ranks never share a file) with `kept`:
        false for the `discarded` (key, sample) pairs, groups a refill generated and did not train on."""
        m: dict[str, float] = {}
        builds = [s for s in samples if "parse" in s.trace]
        for reason, n in format_reasons(samples).items():
            m[f"format/{reason}"] = n / max(len(builds), 1)
        graded = [s.trace["evaluation"] for s in samples if "evaluation" in s.trace]
        questions = sum(e["k"] for e in graded)
        if questions:  # a model evaluator whose calls never parse would zero every r_eval without a word
            silent = sum(e.get("no_tool_call", 0) for e in graded)
            m["evaluation/no_tool_call"] = silent / questions
            if silent == questions:
                print(f"warning: step {step}, rank {rank}: the evaluator made no tool call that parsed on any of its "
                      f"{questions} questions, so every r_eval is 0 and no tool enters the pool; its replies must "
                      "call the tool in its chat format's syntax (smith.models.chat_format)", file=sys.stderr)
        uses = [s for s in samples if s.kind == EpisodeKind.USE]
        if uses:
            m["use/correct"] = sum(bool(s.trace.get("correct")) for s in uses) / len(uses)
            m["use/turns"] = sum(s.trace.get("turns", 0) for s in uses) / len(uses)
            calls = sum(s.trace.get("tool_calls", 0) for s in uses)
            m["use/tool_call_success"] = sum(s.trace.get("tool_call_ok", 0) for s in uses) / calls if calls else 0.0
        # sandbox faults (the machine's, not the tools'): graded questions left out of r_eval, use calls that failed
        m["sandbox_faults/evaluation"] = float(sum(s.trace.get("evaluation", {}).get("faults", 0) for s in samples))
        m["sandbox_faults/use"] = float(sum(s.trace.get("sandbox_faults", 0) for s in uses))
        m["pool/size"] = float(len(self.pool))
        for cat, n in self.pool.sizes().items():
            m[f"pool/size/{cat}"] = float(n)
        m["tokens/completion"] = sum(sum(s.mask) for s in samples) / max(len(samples), 1)
        m["tokens/tool_output"] = sum(len(s.mask) - sum(s.mask) for s in samples) / max(len(samples), 1)
        for k, v in (timing or {}).items():
            m[f"time/{k}"] = v
        m.update(counts or {})
        self.step_metrics = m
        rows = [(key, s, True) for s, key in zip(samples, keys or [None] * len(samples), strict=True)]
        rows += [(key, s, False) for key, s in discarded]
        with (self.run_dir / ("rollouts.jsonl" if rank == 0 else f"rollouts.rank{rank}.jsonl")).open("a") as f:
            for key, s, kept in rows:
                # `key` (build:N / use:N) names the GRPO group: its G samples share it, on whichever rank
                f.write(json.dumps({"step": step, "key": key, "kind": s.kind, "category": s.category, "kept": kept,
                                    "rewards": _clean(s.rewards), "truncated": s.truncated, "trace": s.trace},
                                   default=str) + "\n")


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}


def format_reasons(samples: list[Any]) -> Counter:
    """Build responses per parse outcome ("ok" or the failure reason): the `format/<reason>` log columns."""
    return Counter(s.trace.get("parse", {}).get("reason") or "ok" for s in samples if "parse" in s.trace)
