"""smith.train: the SMITH trainer (DAPO on TRL) and `main(cfg)`, the body of train.py (not `run`: that name is the
submodule smith.train.run, which replaces a package attribute of the same name once imported)."""

from __future__ import annotations

import time
from pathlib import Path

from omegaconf import DictConfig

from smith.errors import ConfigError


def resolve_run_dir(cfg: DictConfig) -> Path:
    """The run directory, computed once on rank 0 and broadcast, so ranks never race on timestamps (`train`
    creates it, once the configuration has passed its checks).

    First use of the process state: without `cpu=True` a CPU-only torchrun looks like one process here (while
    the Trainer's own Accelerator sees all), so every rank would name its own run directory and size the batch
    as if alone."""
    import torch
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list

    state = PartialState(cpu=cfg.device == "cpu" or not torch.cuda.is_available())
    if cfg.resume:
        path = str(cfg.resume)
    elif cfg.output_dir:
        path = str(cfg.output_dir)
    else:
        path = f"checkpoints/{cfg.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    if state.num_processes > 1:
        box = [path]
        broadcast_object_list(box, from_process=0)
        path = box[0]
    run_dir = Path(path)
    if cfg.resume and not run_dir.is_dir():
        raise ConfigError(f"resume={run_dir} is not a run directory")
    return run_dir


def main(cfg: DictConfig) -> Path:
    """SMITH training, or a distillation baseline when the recipe has a `distill` section (smith.train.distill)."""
    if cfg.get("distill") is not None:
        from smith.train.distill import distill

        return distill(cfg, resolve_run_dir(cfg))
    from smith.train.run import train

    return train(cfg, resolve_run_dir(cfg))
