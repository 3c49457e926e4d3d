"""One run's state beside TRL's trainer (the tool pool, the evaluator's last sync step, logs), its
checkpoint extras and resume (the newest readable checkpoint, logs trimmed back, settings compared)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import struct
import sys
import time
import zipfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from transformers import TrainerCallback
from yaml import YAMLError

from smith.config import TrainConfig, as_plain, field_of
from smith.errors import ConfigError
from smith.pool import POOL_FILE, PoolFileError, ToolPool, checkpoints
from smith.rollout.episodes import EpisodeKind, RolloutSettings, Sample
from smith.train.adapters import evaluator_state, gathered

COMPLETE = "smith_checkpoint.json"  # written last: a checkpoint without it was interrupted and is ignored
EVALUATOR_FILE = "evaluator_adapter.pt"


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


class SmithCallback(TrainerCallback):
    """Checkpoint extras (pool, evaluator copy, sync step, completion marker), metrics.jsonl, timing."""

    def __init__(self, session: Session) -> None:
        self.s = session
        self._step_start = 0.0
        self._update = 0.0  # seconds of the last step outside the evaluator sync, generation and grading

    def on_step_begin(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        self._step_start = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        total = time.perf_counter() - self._step_start
        # consumed (already logged): a step that reuses its batch (`dapo.updates_per_batch` > 1) rolls nothing out
        rollout = sum(self.s.step_metrics.pop(f"time/{k}", 0.0) for k in ("sync", "generation", "grading"))
        self._update = max(total - rollout, 0.0)

    def on_log(self, args, state, control, logs=None, **kw):  # noqa: ANN001, ANN201
        if not state.is_world_process_zero or not logs or ("loss" not in logs and "reward" not in logs):
            return
        row = {"step": state.global_step, **_clean(dict(logs))}
        row["time/update"] = self._update
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


# what a checkpoint must hold to be resumed from (besides the optimizer state, below): TRL's trainer state,
# scheduler and policy adapter, smith's pool and completion marker
REQUIRED = ("trainer_state.json", "scheduler.pt", "adapter_model.safetensors", POOL_FILE, COMPLETE)


def last_complete_checkpoint(run_dir: Path, warn: bool = True) -> Path | None:
    """Newest checkpoint to resume from. Interrupted ones (no completion marker: killed mid-save) are removed;
    a complete one that is unreadable (`checkpoint_problem`: a truncated file, bad JSON) is moved aside to
    `checkpoint-N-unreadable` (kept for a look, ignored from then on; its `step-N` link removed) with a
    warning (`warn`: on stderr), and the one before it is used."""
    done = []
    for _, ckpt in checkpoints(run_dir):
        if (ckpt / COMPLETE).exists():
            done.append(ckpt)
        else:
            shutil.rmtree(ckpt, ignore_errors=True)
    for ckpt in reversed(done):
        problem = checkpoint_problem(ckpt)
        if problem is None:
            return ckpt
        aside = _set_aside(ckpt)
        if warn:
            print(f"warning: {ckpt.name} is unreadable ({problem}); moved to {aside.name}, trying the checkpoint "
                  "before it", file=sys.stderr, flush=True)
    return None


def checkpoint_problem(ckpt: Path) -> str | None:
    """Why `ckpt` cannot be resumed from, or None. Readable means: the REQUIRED files and the optimizer state
    (optimizer.pt, or DeepSpeed's global_step* directory) are there; every JSON file parses (the marker and
    trainer_state.json name their step); every safetensors file has a whole header whose tensors end exactly
    at the end of the file; every torch file (.pt, .pth, .bin) is a whole zip archive (truncation cuts off its
    central directory, at the end); the tool pool passes its schema. Cheap: headers and small files only."""
    missing = [name for name in REQUIRED if not (ckpt / name).is_file()]
    if not (ckpt / "optimizer.pt").is_file() and not any(ckpt.glob("global_step*")):
        missing.append("optimizer.pt")
    if missing:
        return f"missing {', '.join(missing)}"
    for path in sorted(ckpt.rglob("*")):
        try:
            if path.suffix == ".json":
                json.loads(path.read_text())
            elif path.suffix == ".safetensors":
                _check_safetensors(path)
            elif path.suffix in (".pt", ".pth", ".bin"):
                zipfile.ZipFile(path).close()
        except (OSError, ValueError, zipfile.BadZipFile, RecursionError) as e:
            return f"{path.relative_to(ckpt)}: {type(e).__name__}: {e}"
    for name, key in ((COMPLETE, "step"), ("trainer_state.json", "global_step")):
        data = json.loads((ckpt / name).read_text())
        if not isinstance(data, dict) or not isinstance(data.get(key), int):
            return f"{name} names no {key}"
    try:
        ToolPool.load(ckpt / POOL_FILE)
    except PoolFileError as e:
        return str(e)
    return None


def _check_safetensors(path: Path) -> None:
    """A safetensors file is an 8-byte header length, a JSON header, then the tensors the header places."""
    with path.open("rb") as f:
        size = path.stat().st_size
        head = f.read(8)
        if len(head) < 8 or (n := struct.unpack("<Q", head)[0]) > size - 8:
            raise ValueError("header cut short")
        header = json.loads(f.read(n))
    ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
    if 8 + n + max(ends, default=0) != size:
        raise ValueError(f"holds {size} bytes, its header places {8 + n + max(ends, default=0)}")


def _set_aside(ckpt: Path) -> Path:
    """Rename `ckpt` out of the way (resume saves a new one under its name) and drop its `step-N` link."""
    aside, n = ckpt.with_name(f"{ckpt.name}-unreadable"), 1
    while aside.exists():
        n += 1
        aside = ckpt.with_name(f"{ckpt.name}-unreadable-{n}")
    link = ckpt.with_name(ckpt.name.replace("checkpoint-", "step-"))
    with contextlib.suppress(OSError):  # another rank did it first
        ckpt.rename(aside)
        if link.is_symlink() and os.readlink(link) == ckpt.name:
            link.unlink()
    return aside


def restore(session: Session, model: Any, ckpt: Path, rank: int = 0) -> None:
    """Pool, evaluator copy and sync step from a checkpoint (TRL/Trainer restore the rest); this rank's logs
    trimmed back to the checkpoint's step."""
    meta = json.loads((ckpt / COMPLETE).read_text())
    session.resume_from(ckpt / POOL_FILE, int(meta.get("last_sync", 0)))
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


CONFIG = "config.yaml"  # the configuration the run was started with; never overwritten
# settings a resume may change without resume_allow_changes=true: where the run lives and how it is started,
# how far it goes (max_steps), checkpoint cadence, reporting, where tools run and task items are cached, and
# the OpenAI client's key / timeouts; none changes what a step computes (an entry ending in "." is a prefix)
RESUME_MAY_CHANGE = ("resume", "output_dir", "resume_allow_changes", "max_steps", "save_every", "logging.",
                     "sandbox.workers", "sandbox.url", "tasks.cache_dir", "openai.")


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Nested settings -> {"dapo.learning_rate": value, ...} (lists stay whole values)."""
    if not isinstance(tree, dict) or not tree:
        return {prefix: tree}
    out: dict[str, Any] = {}
    for k, v in tree.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _configs(run_dir: Path) -> list[Path]:
    """config.yaml, then config.resume-1.yaml, -2, ...: what the run was started and each time resumed with."""
    resumed = sorted((int(m.group(1)), p) for p in run_dir.glob("config.resume-*.yaml")
                     if (m := re.fullmatch(r"config\.resume-(\d+)\.yaml", p.name)))
    return [p for p in [run_dir / CONFIG, *(p for _, p in resumed)] if p.is_file()]


def config_changes(conf: TrainConfig, run_dir: Path) -> list[str]:
    """A resume's settings that differ from the ones the run last ran with, `key: old -> new` each (values as
    JSON; `(absent)` for a key one side lacks), RESUME_MAY_CHANGE left out. A run directory without a saved
    config (none was written yet) has none."""
    saved = _configs(run_dir)
    if not saved:
        return []
    try:
        old = _flat(OmegaConf.to_container(OmegaConf.load(saved[-1]), resolve=True))
    except (OSError, YAMLError, OmegaConfBaseException) as e:
        raise ConfigError(f"resume={run_dir}: {saved[-1]} is unreadable ({type(e).__name__}); restore it to "
                          "compare this resume's settings with the run's") from None
    new = _flat(as_plain(conf))

    absent = object()

    def shown(flat: dict[str, Any], key: str) -> str:
        return json.dumps(flat[key], default=str) if key in flat else "(absent)"

    def added_at_default(key: str) -> bool:
        """A setting the schema gained after the run was saved, at its default: the run ran with that value."""
        f = field_of(key)
        return key not in old and f is not None and f.default is not dataclasses.MISSING and new.get(key) == f.default

    return [f"{k}: {shown(old, k)} -> {shown(new, k)}" for k in sorted(old.keys() | new.keys())
            if old.get(k, absent) != new.get(k, absent) and not added_at_default(k)
            and not any(k == m or (m.endswith(".") and k.startswith(m)) for m in RESUME_MAY_CHANGE)]


def check_resume_config(conf: TrainConfig, run_dir: Path) -> list[str]:
    """Refuse a resume whose settings differ from the run's (a silently changed learning rate or category list
    would make one run of two), showing the diff above the error line, unless resume_allow_changes=true;
    returns the accepted changes (for the caller to print). Reads files only: runs before any model loads."""
    changes = config_changes(conf, run_dir)
    if changes and not conf.resume_allow_changes:
        raise ConfigError(f"resume={run_dir}: {len(changes)} setting(s) differ from the run's saved config "
                          "(listed above); drop those overrides, or pass resume_allow_changes=true to resume "
                          "with them", details=changes)
    return changes


def save_config(conf: TrainConfig, run_dir: Path, resumed_from: Path | None = None) -> Path:
    """The first start writes config.yaml; each resume adds config.resume-N.yaml (naming its checkpoint) and
    leaves the earlier ones as they are, so the run's history of settings stays readable."""
    path = run_dir / CONFIG
    note = ""
    if path.exists():
        path = run_dir / f"config.resume-{len(_configs(run_dir))}.yaml"
        note = f"# resumed from {resumed_from.name if resumed_from else 'step 0 (no checkpoint)'}\n"
    path.write_text(note + OmegaConf.to_yaml(as_plain(conf)))
    return path


def rollout_settings(conf: TrainConfig, run_dir: Path) -> RolloutSettings:
    """The rollout's settings from the typed config (smith.config)."""
    return RolloutSettings(
        max_completion_length=conf.dapo.max_completion_length,
        temperature=conf.dapo.temperature,
        top_p=conf.dapo.top_p,
        max_turns=conf.use.max_turns,
        eta_mid=conf.use.eta_mid,
        eta_min=conf.use.eta_min,
        n_distractors=conf.use.n_distractors,
        max_tool_output_chars=conf.use.max_tool_output_chars,
        max_turn_tokens=conf.use.max_turn_tokens,
        evaluator=conf.evaluator.kind,
        judge=conf.judge.kind,
        evaluator_max_turns=conf.evaluator.max_turns,
        judge_max_new_tokens=conf.judge.max_new_tokens,
        menu_size=conf.pool.menu_size,
        source_run=run_dir.name,
    )
