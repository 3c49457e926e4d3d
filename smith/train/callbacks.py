"""The run's TRL callback: checkpoint extras (pool, evaluator copy, sync step, completion marker written last),
a metrics.jsonl row per logged step, and the update's seconds."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

from smith.pool import POOL_FILE
from smith.train.adapters import evaluator_state
from smith.train.checkpoints import COMPLETE, EVALUATOR_FILE
from smith.train.session import Session, _clean


class SmithCallback(TrainerCallback):
    """Checkpoint extras (pool, evaluator copy, sync step, completion marker), metrics.jsonl, timing."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._step_start = 0.0
        self._update = 0.0  # seconds of the last step outside the evaluator sync, generation and grading

    def on_step_begin(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        self._step_start = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        total = time.perf_counter() - self._step_start
        # consumed (already logged): a step that reuses its batch (`dapo.updates_per_batch` > 1) rolls nothing out
        rollout = sum(self.session.step_metrics.pop(f"time/{k}", 0.0) for k in ("sync", "generation", "grading"))
        self._update = max(total - rollout, 0.0)

    def on_log(self, args, state, control, logs=None, **kw):  # noqa: ANN001, ANN201
        if not state.is_world_process_zero or not logs or ("loss" not in logs and "reward" not in logs):
            return
        row = {"step": state.global_step, **_clean(dict(logs))}
        row["time/update"] = self._update
        with (self.session.run_dir / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")

    def on_save(self, args, state, control, model=None, **kw):  # noqa: ANN001, ANN201
        copy = evaluator_state(model) if self.session.has_evaluator_copy and model is not None else None  # every rank
        if not state.is_world_process_zero:
            return
        ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        self.session.pool.save(ckpt / POOL_FILE)
        if copy is not None:
            torch.save(copy, ckpt / EVALUATOR_FILE)
        meta = {"step": state.global_step, "last_sync": self.session.last_sync, "pool_size": len(self.session.pool),
                "base_model": self.session.base_model, "time": time.time()}
        tmp = ckpt / f".{COMPLETE}.tmp"
        tmp.write_text(json.dumps(meta))
        os.replace(tmp, ckpt / COMPLETE)
        link = Path(args.output_dir) / f"step-{state.global_step}"
        if not link.exists():
            link.symlink_to(ckpt.name)

    def on_train_end(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        if state.is_world_process_zero:
            self.session.pool.save(self.session.run_dir / POOL_FILE)
