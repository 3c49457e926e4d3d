"""What reaches TRL: `SmithGRPOConfig`, TRL's GRPOConfig plus the smith settings the trainer reads from `self.args`
(the way TRL's own extensions subclass it, trl/experimental/gmpo/gmpo_config.py), and `grpo_args`, which builds
it from the typed config: the GRPOConfig fields smith derives (`OWNED`), any other field a user passes as
`trainer.<field>=value` (checked by name and type before any model loads), and the batch split over processes.
Defaults come from smith.config, their one home."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trl import GRPOConfig, SFTConfig

from smith.config import DapoConfig, EvaluatorConfig, TrainConfig
from smith.errors import ConfigError
from smith.rewards import AXES


@dataclass
class SmithGRPOConfig(GRPOConfig):
    advantage: str = field(default=DapoConfig.advantage, metadata={
        "help": "Name of the advantage estimator (`dapo.advantage`): per_axis normalises each reward axis within "
                "its group and takes the weighted sum; sum_then_normalize (smith.train.advantages)."})
    std_floor: float = field(default=DapoConfig.std_floor, metadata={
        "help": "Floor on each axis' within-group std in per-axis advantages (`dapo.std_floor`)."})
    dynamic_sampling: str = field(default=DapoConfig.dynamic_sampling, metadata={
        "help": "Groups whose every reward axis has zero variance (DAPO's dynamic sampling; `dapo.dynamic_sampling`): "
                "refill replaces them with fresh groups of the same kind, drop leaves them out of the loss, off keeps "
                "them.",
        "choices": ["refill", "drop", "off"]})
    refill_rounds: int = field(default=DapoConfig.refill_rounds, metadata={
        "help": "Extra generation rounds at most per batch under refill (`dapo.refill_rounds`)."})
    refill_oversample: int = field(default=DapoConfig.refill_oversample, metadata={
        "help": "Fresh groups per missing group in a refill round (`dapo.refill_oversample`)."})
    loss_norm: str = field(default=DapoConfig.loss_norm, metadata={
        "help": "per_kind: L_DAPO(build) + L_DAPO(use), each normalised by its own token count (the paper); "
                "batch: TRL's one token count (`dapo.loss_norm`).",
        "choices": ["per_kind", "batch"]})
    sync_every: int = field(default=EvaluatorConfig.sync_every, metadata={
        "help": "Re-sync the evaluator/judge copy to the policy every this many steps; 0 never "
                "(`evaluator.sync_every`)."})
    lora_server_url: str | None = field(default=None, metadata={
        "help": "A `vllm serve --enable-lora` server that smith loads the policy and evaluator adapters into and "
                "generates every role on (`generation.vllm_server=lora`); TRL's `use_vllm` is then off."})


def per_device_batch(conf: TrainConfig, num_processes: int) -> int:
    """Completions per device and micro-step; a batch that does not split is refused, and so are refill on a batch
    whose processes would not each hold whole GRPO groups and checkpoints that would fall inside a batch trained on
    for several steps (train() asks before the model loads, so the refusal is immediate)."""
    d = conf.dapo
    completions = d.prompts_per_step * d.num_generations
    per_device, rem = divmod(completions, num_processes * d.gradient_accumulation_steps)
    if rem or per_device == 0:
        raise ConfigError(
            f"prompts_per_step x num_generations = {completions} must split evenly over "
            f"{num_processes} processes x {d.gradient_accumulation_steps} accumulation steps"
        )
    if d.prompts_per_step % 2 and conf.build.fraction == 0.5:
        raise ConfigError(f"dapo.prompts_per_step={d.prompts_per_step} must be even for a 1:1 build/use batch")
    if d.dynamic_sampling == "refill" and d.prompts_per_step % num_processes:
        raise ConfigError(f"dapo.dynamic_sampling=refill replaces whole groups on each process: "
                          f"dapo.prompts_per_step={d.prompts_per_step} must be a multiple of the {num_processes} "
                          "processes (or use dapo.dynamic_sampling=drop)")
    u = d.updates_per_batch
    for key, steps in (("save_every", conf.save_every), ("max_steps", conf.max_steps)):
        if steps % u:
            raise ConfigError(f"{key}={steps} must be a multiple of dapo.updates_per_batch={u}: a checkpoint inside a "
                              "batch would resume by rolling that batch out again")
    return per_device


# GRPOConfig fields smith sets from its own keys: a `trainer.<field>` override of one of them is refused
OWNED = {
    "output_dir": "output_dir", "max_steps": "max_steps", "per_device_train_batch_size": "dapo.prompts_per_step",
    "gradient_accumulation_steps": "dapo.gradient_accumulation_steps", "num_generations": "dapo.num_generations",
    "max_completion_length": "dapo.max_completion_length", "temperature": "dapo.temperature",
    "top_p": "dapo.top_p", "beta": "dapo.beta", "epsilon": "dapo.epsilon", "epsilon_high": "dapo.epsilon_high",
    "loss_type": "dapo.loss_type", "mask_truncated_completions": "dapo.mask_truncated_completions",
    "gradient_checkpointing": "dapo.gradient_checkpointing", "learning_rate": "dapo.learning_rate",
    "warmup_steps": "dapo.warmup_steps", "reward_weights": "rewards.weights",
    "multi_objective_aggregation": "dapo.advantage", "shuffle_dataset": "build.fraction (rows alternate)",
    "save_strategy": "save_every", "save_steps": "save_every", "logging_steps": "metrics.jsonl (one row per step)",
    "seed": "seed", "bf16": "model.dtype", "use_cpu": "device", "use_vllm": "generation.backend",
    "vllm_mode": "generation.vllm_mode", "vllm_server_base_url": "generation.vllm_server_url",
    "remove_unused_columns": "the prompt rows", "dataloader_num_workers": "the prompt stream",
    "generation_batch_size": "dapo.prompts_per_step", "steps_per_generation": "dapo.gradient_accumulation_steps",
    "advantage": "dapo.advantage", "std_floor": "dapo.std_floor", "dynamic_sampling": "dapo.dynamic_sampling",
    "refill_rounds": "dapo.refill_rounds", "refill_oversample": "dapo.refill_oversample",
    "num_iterations": "dapo.updates_per_batch",
    "loss_norm": "dapo.loss_norm", "fp16": "model.dtype",
    "vllm_importance_sampling_mode": "dapo.vllm_importance_sampling",
}


def _accepts(kind: Any, value: Any) -> bool:
    """Whether a Hydra value fits a GRPOConfig field's annotation (unknown annotations are left to GRPOConfig)."""
    import enum
    import types
    import typing

    if kind is type(None):
        return value is None
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        return any(_accepts(k, value) for k in typing.get_args(kind))
    origin = typing.get_origin(kind) or kind
    if origin is bool:
        return isinstance(value, bool)
    if origin is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(origin, type) and issubclass(origin, enum.Enum):
        return isinstance(value, str) and value in {m.value for m in origin}
    if origin in (str, list, dict):
        return isinstance(value, origin)
    return True


def trainer_overrides(conf: TrainConfig) -> dict[str, Any]:
    """`trainer.<field>=value`: any GRPOConfig field smith does not set itself (checked before any model loads)."""
    import dataclasses
    import difflib

    from trl import GRPOConfig

    overrides = dict(conf.trainer)
    fields = {f.name: f for f in dataclasses.fields(GRPOConfig)}
    for key, value in overrides.items():
        if key in OWNED:
            raise ConfigError(f"trainer.{key} is set by smith from {OWNED[key]}; change that instead")
        if key not in fields or key.startswith("_"):
            near = difflib.get_close_matches(key, list(fields), n=1)
            raise ConfigError(f"trainer.{key} is not a GRPOConfig field (trl 1.16)"
                              + (f"; did you mean trainer.{near[0]}?" if near else ""))
        if not _accepts(fields[key].type, value):
            raise ConfigError(f"trainer.{key}={value!r} does not fit GRPOConfig's {fields[key].type}")
    if overrides:  # GRPOConfig's own checks (an unknown optimizer name, conflicting settings), still before loading
        try:
            GRPOConfig(output_dir=str(Path(conf.output_dir or ".")), use_cpu=True, **overrides)
        except ValueError as e:
            raise ConfigError(f"trainer.*: GRPOConfig refused the settings: {str(e).splitlines()[0]}") from None
    return overrides


def mixed_precision(dtype: str, on_gpu: bool) -> dict[str, bool]:
    """`bf16` / `fp16` from the model's dtype and the device, never a library default: TRL's configs turn bf16 on,
    and on a CPU without native bf16 autocast sends every matmul to PyTorch's reference GEMM (6-13x slower); on
    one with it the weights would still differ by machine. On CPU smith trains in float32; on a GPU a bfloat16
    model trains under bf16 autocast and a float16 one without fp16 AMP, as before (not run on a GPU here)."""
    return {"bf16": on_gpu and dtype == "bfloat16", "fp16": False}


def sft_args(output_dir: str | Path, on_gpu: bool, dtype: str = "float32", **fields: Any) -> SFTConfig:
    """TRL's SFTConfig as every smith SFT run uses it (the warm start, distillation, benchmarks/warm_sft.py):
    the precision of `mixed_precision`, no checkpoints, no reporting, no gradient checkpointing (both callers
    turned it off before; a field passed here overrides any of these)."""
    defaults = dict(max_length=None, save_strategy="no", report_to=[], dataloader_num_workers=0,
                    gradient_checkpointing=False)
    return SFTConfig(output_dir=str(output_dir), use_cpu=not on_gpu, **mixed_precision(dtype, on_gpu),
                     **{**defaults, **fields})


def grpo_args(conf: TrainConfig, run_dir: Path, on_gpu: bool, num_processes: int) -> SmithGRPOConfig:
    """TRL's arguments with smith's own (SmithGRPOConfig), from the typed config: the one place GRPOConfig is
    derived. Field by field (`OWNED` names each field's smith key): the run directory, steps, the batch split over
    processes and accumulation, G, lengths, sampling, DAPO's clip and loss, the learning schedule, the axis weights
    in AXES order, checkpoint cadence, seed, precision (`mixed_precision`), vLLM; smith's own fields
    (SmithGRPOConfig); `trainer.*` overrides for the rest."""
    d = conf.dapo
    per_device = per_device_batch(conf, num_processes)
    report = [] if conf.logging.wandb == "disabled" else ["wandb"]
    if report:
        os.environ.setdefault("WANDB_MODE", conf.logging.wandb)
        os.environ.setdefault("WANDB_PROJECT", conf.logging.project)
        os.environ.setdefault("WANDB_DIR", str(run_dir))  # offline runs land inside the run directory
    # a LoRA server is smith's own client: TRL builds no engine and no weight-sync communicator for it
    lora_server = (conf.generation.backend == "vllm" and conf.generation.vllm_mode == "server"
                   and conf.generation.vllm_server == "lora")
    use_vllm = conf.generation.backend == "vllm" and not lora_server
    owned = dict(
        output_dir=str(run_dir),
        max_steps=conf.max_steps,
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=d.gradient_accumulation_steps,
        num_iterations=d.updates_per_batch,  # optimizer steps per generated batch: old log-probs, clipping
        num_generations=d.num_generations,
        max_completion_length=d.max_completion_length,
        temperature=d.temperature,
        top_p=d.top_p,
        beta=d.beta,
        epsilon=d.epsilon,
        epsilon_high=d.epsilon_high,
        loss_type=d.loss_type,
        mask_truncated_completions=d.mask_truncated_completions,
        gradient_checkpointing=d.gradient_checkpointing,
        learning_rate=d.learning_rate,
        warmup_steps=d.warmup_steps,
        reward_weights=[getattr(conf.rewards.weights, axis) for axis in AXES],
        shuffle_dataset=False,  # rows alternate build/use; in order, every batch splits 1:1
        save_strategy="steps",
        save_steps=conf.save_every,
        logging_steps=1,
        seed=conf.seed,
        **mixed_precision(conf.model.dtype, on_gpu),
        use_cpu=not on_gpu,
        use_vllm=use_vllm,
        vllm_mode=conf.generation.vllm_mode,
        vllm_importance_sampling_mode=d.vllm_importance_sampling,
        **({"vllm_server_base_url": conf.generation.vllm_server_url}
           if use_vllm and conf.generation.vllm_server_url else {}),
        remove_unused_columns=False,
        dataloader_num_workers=0,
        advantage=d.advantage,
        std_floor=d.std_floor,
        dynamic_sampling=d.dynamic_sampling,
        refill_rounds=d.refill_rounds,
        refill_oversample=d.refill_oversample,
        loss_norm=d.loss_norm,
        sync_every=conf.evaluator.sync_every,
        lora_server_url=(conf.generation.vllm_server_url or "http://0.0.0.0:8000") if lora_server else None,
    )
    defaults = dict(lr_scheduler_type="constant_with_warmup", report_to=report,
                    disable_tqdm=True)  # smith prints one line per step (smith.train.progress)
    try:
        return SmithGRPOConfig(**{**defaults, **trainer_overrides(conf), **owned})
    except ValueError as e:
        raise ConfigError(f"trainer.*: GRPOConfig refused the settings: {str(e).splitlines()[0]}") from None
