"""smith.train: the SMITH trainer (DAPO on TRL) and `main(conf)`, the body of train.py (not `run`: that name is the
submodule smith.train.run, which replaces a package attribute of the same name once imported)."""

from __future__ import annotations

import time
from pathlib import Path

from smith.config import TrainConfig
from smith.errors import ConfigError
from smith.train.resume import CONFIG


def resolve_run_dir(conf: TrainConfig) -> Path:
    """The run directory, computed once on rank 0 and broadcast, so ranks never race on timestamps (`train`
    creates it, once the configuration has passed its checks).

    First use of the process state: without `cpu=True` a CPU-only torchrun looks like one process here (while
    the Trainer's own Accelerator sees all), so every rank would name its own run directory and size the batch
    as if alone."""
    import torch
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list

    state = PartialState(cpu=conf.device == "cpu" or not torch.cuda.is_available())
    if conf.resume:
        path = conf.resume
    elif conf.output_dir:
        path = conf.output_dir
    else:
        path = f"checkpoints/{conf.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    # a fresh run into a directory that holds one would append to its logs and overwrite its checkpoints
    taken = not conf.resume and (Path(path) / CONFIG).exists()
    if state.num_processes > 1:  # rank 0's view, so every rank stops (or goes on) alike
        box = [path, taken]
        broadcast_object_list(box, from_process=0)
        path, taken = box
    run_dir = Path(path)
    if conf.resume and not run_dir.is_dir():
        raise ConfigError(f"resume={run_dir} is not a run directory")
    if taken:
        raise ConfigError(f"output_dir={run_dir} already holds a run (its {CONFIG}); pass resume={run_dir} to "
                          "continue it, or choose another output_dir")
    return run_dir


def main(conf: TrainConfig) -> Path:
    """SMITH training, or a distillation baseline when the recipe has a `distill` section (smith.train.distill).
    `conf` is the typed config smith.entry composed and converted once; every function below takes it or a
    section of it."""
    if conf.distill is not None:
        from smith.train.distill import distill

        return distill(conf, resolve_run_dir(conf))
    from smith.train.run import train

    return train(conf, resolve_run_dir(conf))
