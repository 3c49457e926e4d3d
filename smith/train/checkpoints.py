"""A run's checkpoints: which one to resume from (complete and readable: interrupted ones removed, unreadable ones
set aside), and restoring smith's part of it (pool, evaluator copy, sync step, logs trimmed back); TRL restores
the rest."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import sys
import zipfile
from pathlib import Path
from typing import Any

import torch

from smith.pool import POOL_FILE, PoolFileError, ToolPool, checkpoints
from smith.train.adapters import gathered
from smith.train.session import Session

COMPLETE = "smith_checkpoint.json"  # written last: a checkpoint without it was interrupted and is ignored
EVALUATOR_FILE = "evaluator_adapter.pt"


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
