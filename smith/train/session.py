"""Everything one training run holds besides TRL's trainer: tasks, sandbox, pool, rollout, sync, logs.

`run(cfg)` reads top to bottom: resolve the run directory, load the policy with its LoRA adapters,
build the rollout, hand both to the trainer, train (or resume), and save the pool on the way out.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from transformers import TrainerCallback

from smith.pool import POOL_FILE, PoolEntry, ToolPool, checkpoints
from smith.rollout.episodes import AXES, Rollout, RolloutSettings, Sample
from smith.train.trainer import evaluator_state, format_reasons, gathered, sync_evaluator

COMPLETE = "smith_checkpoint.json"  # written last: a checkpoint without it was interrupted and is ignored
EVALUATOR_FILE = "evaluator_adapter.pt"


class Session:
    """State shared by the rollout function and the callbacks of one run."""

    def __init__(self, cfg: DictConfig, run_dir: Path, source: Any, rollout: Rollout, pool: ToolPool,
                 base_model: str | None = None) -> None:
        """`base_model`: what checkpoints name as their base (default: the recipe's model.name_or_path)."""
        self.cfg = cfg
        self.base_model = base_model or str(cfg.model.name_or_path)
        self.run_dir = run_dir
        self.source = source
        self.rollout = rollout
        self.pool = pool
        self.seed = int(cfg.seed)
        self.weights = torch.tensor([float(cfg.rewards.weights[a]) for a in AXES])
        self.std_floor = float(cfg.dapo.std_floor)
        self.dynamic_sampling = bool(cfg.dapo.dynamic_sampling)
        self.per_kind_loss = cfg.dapo.loss_norm == "per_kind"
        self.sync_every = int(cfg.evaluator.sync_every)
        self.has_evaluator_copy = cfg.evaluator.kind == "self" or cfg.judge.kind == "self"
        self.last_sync = 0
        self.staged: list[PoolEntry] = []
        self.timing: dict[str, float] = {}
        self.step_metrics: dict[str, float] = {}

    # -- evaluator / judge sync ------------------------------------------------------------------------
    def maybe_sync(self, trainer: Any, step: int) -> None:
        """Re-sync the frozen copy to the policy every `sync_every` steps (0: never, the No-Sync ablation)."""
        if not self.has_evaluator_copy or self.sync_every <= 0:
            return
        if step > 0 and step % self.sync_every == 0 and step != self.last_sync:
            sync_evaluator(trainer.accelerator.unwrap_model(trainer.model))
            self.last_sync = step

    # -- pool admissions across ranks ------------------------------------------------------------------
    def stage(self, entry: PoolEntry) -> bool:
        self.staged.append(entry)
        return True

    def share_admissions(self, trainer: Any) -> None:
        """Every rank admits every rank's candidates in the same order, so pools stay identical."""
        from accelerate.utils import gather_object

        staged, self.staged = self.staged, []
        everyone = gather_object([staged]) if trainer.accelerator.num_processes > 1 else [staged]
        for entries in everyone:
            for e in entries:
                self.pool.admit(e)

    def log_rank(self, rank: int, step: int, advantages: list[float]) -> None:
        rows = self.run_dir / "ranks"
        rows.mkdir(exist_ok=True)
        digest = hashlib.sha1(json.dumps(self.pool.to_json()["entries"], sort_keys=True).encode()).hexdigest()
        row = {"step": step, "advantages": [round(a, 6) for a in advantages], "pool_size": len(self.pool),
               "pool_digest": digest}
        with (rows / f"rank{rank}.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")

    # -- logging ---------------------------------------------------------------------------------------
    def record(self, samples: list[Sample], rank: int = 0, step: int = 0, keys: list[str] | None = None) -> None:
        """Per-step metrics beyond TRL's own: format failures, pool sizes, use outcomes, timing; and this rank's
        episodes, appended to its own log (ranks never share a file)."""
        m: dict[str, float] = {}
        builds = [s for s in samples if "parse" in s.trace]
        for reason, n in format_reasons(samples).items():
            m[f"format/{reason}"] = n / max(len(builds), 1)
        uses = [s for s in samples if s.kind == "use"]
        if uses:
            m["use/correct"] = sum(bool(s.trace.get("correct")) for s in uses) / len(uses)
            m["use/turns"] = sum(s.trace.get("turns", 0) for s in uses) / len(uses)
            calls = sum(s.trace.get("tool_calls", 0) for s in uses)
            m["use/tool_call_success"] = sum(s.trace.get("tool_call_ok", 0) for s in uses) / calls if calls else 0.0
        m["pool/size"] = float(len(self.pool))
        for cat, n in self.pool.sizes().items():
            m[f"pool/size/{cat}"] = float(n)
        m["tokens/completion"] = sum(sum(s.mask) for s in samples) / max(len(samples), 1)
        m["tokens/tool_output"] = sum(len(s.mask) - sum(s.mask) for s in samples) / max(len(samples), 1)
        for k, v in self.timing.items():
            m[f"time/{k}"] = v
        self.step_metrics = m
        with (self.run_dir / ("rollouts.jsonl" if rank == 0 else f"rollouts.rank{rank}.jsonl")).open("a") as f:
            for s, key in zip(samples, keys or [None] * len(samples), strict=True):
                # `key` (build:N / use:N) names the GRPO group: its G samples share it, on whichever rank
                f.write(json.dumps({"step": step, "key": key, "kind": s.kind, "category": s.category,
                                    "rewards": _clean(s.rewards), "truncated": s.truncated, "trace": s.trace},
                                   default=str) + "\n")


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}


class SmithCallback(TrainerCallback):
    """Checkpoint extras (pool, evaluator copy, sync step, completion marker), metrics.jsonl, timing."""

    def __init__(self, session: Session) -> None:
        self.s = session
        self._step_start = 0.0

    def on_step_begin(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        self._step_start = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        total = time.perf_counter() - self._step_start
        self.s.timing["update"] = max(total - self.s.timing.get("generation", 0) - self.s.timing.get("grading", 0),
                                      0.0)

    def on_log(self, args, state, control, logs=None, **kw):  # noqa: ANN001, ANN201
        if not state.is_world_process_zero or not logs or ("loss" not in logs and "reward" not in logs):
            return
        row = {"step": state.global_step, **_clean(dict(logs))}
        row["time/update"] = self.s.timing.get("update")
        with (self.s.run_dir / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")

    def on_save(self, args, state, control, model=None, **kw):  # noqa: ANN001, ANN201
        copy = evaluator_state(model) if self.s.has_evaluator_copy and model is not None else None  # every rank
        if not state.is_world_process_zero:
            return
        ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        self.s.pool.save(ckpt / POOL_FILE)
        if copy is not None:
            torch.save(copy, ckpt / EVALUATOR_FILE)
        meta = {"step": state.global_step, "last_sync": self.s.last_sync, "pool_size": len(self.s.pool),
                "base_model": self.s.base_model, "time": time.time()}
        tmp = ckpt / f".{COMPLETE}.tmp"
        tmp.write_text(json.dumps(meta))
        os.replace(tmp, ckpt / COMPLETE)
        link = Path(args.output_dir) / f"step-{state.global_step}"
        if not link.exists():
            link.symlink_to(ckpt.name)

    def on_train_end(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        if state.is_world_process_zero:
            self.s.pool.save(self.s.run_dir / POOL_FILE)


def last_complete_checkpoint(run_dir: Path) -> Path | None:
    """Newest checkpoint whose completion marker exists; interrupted ones are removed."""
    done = None
    for _, ckpt in checkpoints(run_dir):
        if (ckpt / COMPLETE).exists():
            done = ckpt
        else:
            shutil.rmtree(ckpt, ignore_errors=True)
    return done


def restore(session: Session, model: Any, ckpt: Path, rank: int = 0) -> None:
    """Pool, evaluator copy and sync step from a checkpoint (TRL/Trainer restore the rest); this rank's logs
    trimmed back to the checkpoint's step."""
    session.pool.__dict__.update(ToolPool.load(ckpt / POOL_FILE).__dict__)
    meta = json.loads((ckpt / COMPLETE).read_text())
    session.last_sync = int(meta.get("last_sync", 0))
    trim_logs(session.run_dir, int(meta["step"]), rank)
    if session.has_evaluator_copy and (ckpt / EVALUATOR_FILE).exists():
        state = torch.load(ckpt / EVALUATOR_FILE)
        params = dict(model.named_parameters())
        with torch.no_grad(), gathered([params[n] for n in state], modify=True):
            for name, value in state.items():
                params[name].copy_(value)


def trim_logs(run_dir: Path, step: int, rank: int) -> None:
    """A resumed run replays the steps after its checkpoint: drop the rows they wrote before (and a row cut
    by a kill), so no step is logged twice. Each rank trims its own files."""
    for name in (["metrics.jsonl", "rollouts.jsonl"] if rank == 0 else [f"rollouts.rank{rank}.jsonl"]):
        path = run_dir / name
        if not path.exists():
            continue
        keep = []
        for line in path.read_text().splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    keep.append(line + "\n")
            except ValueError:
                continue
        path.write_text("".join(keep))


def save_config(cfg: DictConfig, run_dir: Path) -> None:
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))


def rollout_settings(cfg: DictConfig, run_dir: Path) -> RolloutSettings:
    return RolloutSettings(
        max_completion_length=int(cfg.dapo.max_completion_length),
        temperature=float(cfg.dapo.temperature),
        top_p=float(cfg.dapo.top_p),
        max_turns=int(cfg.use.max_turns),
        eta_mid=float(cfg.use.eta_mid),
        eta_min=float(cfg.use.eta_min),
        n_distractors=int(cfg.use.n_distractors),
        max_tool_output_chars=int(cfg.use.max_tool_output_chars),
        evaluator=str(cfg.evaluator.kind),
        judge=str(cfg.judge.kind),
        evaluator_max_turns=int(cfg.evaluator.max_turns),
        judge_max_new_tokens=int(cfg.judge.max_new_tokens),
        menu_size=int(cfg.pool.menu_size),
        source_run=run_dir.name,
    )
