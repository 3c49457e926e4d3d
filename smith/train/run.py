"""`python train.py recipe=...`: load the policy, wire the rollout to the trainer, train, resume, save.

Reads top to bottom (docs/architecture.md, "One training step"): policy + adapters -> tasks, sandbox, pool -> rollout ->
trainer -> train (or resume) -> pool saved. The step itself lives in SmithTrainer.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from smith.config import TrainConfig, typed
from smith.errors import ConfigError, writable_dir, writable_parent
from smith.models.openai import check_endpoint
from smith.pool import ToolPool
from smith.rollout.episodes import Rollout
from smith.train.advantages import ADVANTAGES
from smith.train.args import SmithGRPOConfig
from smith.train.progress import ConsoleCallback, WandbConfig
from smith.train.session import (
    Session,
    SmithCallback,
    check_resume_config,
    last_complete_checkpoint,
    restore,
    rollout_settings,
    save_config,
)
from smith.train.trainer import AXIS_REWARDS, EVALUATOR_ADAPTER, SmithTrainer, sync_evaluator


def load_policy(cfg: DictConfig, on_gpu: bool) -> tuple[Any, Any, str]:
    """Base model + tokenizer, the LoRA policy adapter, and (when used) a frozen evaluator/judge copy."""
    from accelerate import PartialState
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = str(cfg.model.name_or_path)
    path = name
    if name == "tiny":
        from smith.models.tiny import build_tiny_model

        with PartialState().main_process_first():
            path = str(build_tiny_model(cfg.model.tiny_dir)[0].resolve())
    elif name == "tiny-warm":
        from smith.train.warm import build_warm_model

        with PartialState().main_process_first():
            path = str(build_warm_model(cfg.model.warm_dir, cache_dir=str(cfg.tasks.cache_dir))[0].resolve())
    elif Path(name).is_dir():  # adapters name their base by this path: absolute, so they load from anywhere
        path = str(Path(name).resolve())
    dtype = getattr(torch, str(cfg.model.dtype)) if on_gpu else torch.float32
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    lora = LoraConfig(r=int(cfg.lora.r), lora_alpha=int(cfg.lora.alpha), lora_dropout=float(cfg.lora.dropout),
                      target_modules=str(cfg.lora.target_modules), task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    if cfg.evaluator.kind == "self" or cfg.judge.kind == "self":
        model.add_adapter(EVALUATOR_ADAPTER, lora)
        model.set_adapter("default")
        sync_evaluator(model)  # the copy starts from the base checkpoint, like the policy (LoRA B = 0)
        for n, p in model.named_parameters():
            if f".{EVALUATOR_ADAPTER}." in n:
                p.requires_grad_(False)
    return model, tok, path


def save_final(trainer: Any, tok: Any, run_dir: Path, cfg: DictConfig, base: str) -> None:
    """The policy adapter (not the evaluator copy) and tokenizer at the run root, with a model card, so that
    `AutoPeftModelForCausalLM.from_pretrained(run_dir)` works from any directory. Every rank gathers (ZeRO-3)."""
    from smith.curves import read_metrics
    from smith.train.progress import summary

    # under DeepSpeed, accelerate gathers through the engine (`model_wrapped`), not the bare PEFT model
    weights = trainer.accelerator.get_state_dict(trainer.model_wrapped if trainer.is_deepspeed_enabled
                                                 else trainer.model)
    if not trainer.accelerator.is_main_process:
        return
    model = trainer.accelerator.unwrap_model(trainer.model)
    model.save_pretrained(run_dir, state_dict=weights, selected_adapters=["default"])
    tok.save_pretrained(run_dir)
    rows = read_metrics(run_dir)
    meta = ["---", "library_name: peft", "tags: [smith, trl, grpo, dapo, lora, tool-making]"]
    if not Path(base).is_absolute():
        meta.append(f"base_model: {base}")
    card = [*meta, "---", "", f"# {run_dir.name}", "",
            f"A LoRA adapter trained with smith (SMITH: build and use tools, DAPO) on `{base}`, recipe "
            f"`{cfg.name}`, {trainer.state.global_step} steps, seed {cfg.seed}; "
            f"{len(rows)} logged steps in `metrics.jsonl`, the run's config in `config.yaml`.", "",
            "```python", "from peft import AutoPeftModelForCausalLM", "",
            f'model = AutoPeftModelForCausalLM.from_pretrained("{run_dir.name}")', "```", ""]
    if rows:
        card += ["Rewards per axis:", "", "```", summary(rows), "```", ""]
    card.append(f"Tool pool: `tool_pool.json` (`smith export-pool {run_dir.name} --format openai --out tools.json` "
                "writes it as OpenAI tools).")
    (run_dir / "README.md").write_text("\n".join(card) + "\n")


def make_sandbox(cfg: DictConfig) -> tuple[Any, Any]:
    from sandbox import Limits, Sandbox

    limits = Limits(timeout_s=float(cfg.sandbox.timeout_s), memory_mb=int(cfg.sandbox.memory_mb))
    if cfg.sandbox.url:
        from sandbox import RemoteSandbox

        return RemoteSandbox(str(cfg.sandbox.url)), limits
    return Sandbox(isolation=str(cfg.sandbox.isolation), workers=int(cfg.sandbox.workers)), limits


def per_device_batch(cfg: TrainConfig, num_processes: int) -> int:
    """Completions per device and micro-step; a batch that does not split is refused (train() asks before the
    model loads, so the refusal is immediate)."""
    d = cfg.dapo
    completions = int(d.prompts_per_step) * int(d.num_generations)
    per_device, rem = divmod(completions, num_processes * int(d.gradient_accumulation_steps))
    if rem or per_device == 0:
        raise ConfigError(
            f"prompts_per_step x num_generations = {completions} must split evenly over "
            f"{num_processes} processes x {d.gradient_accumulation_steps} accumulation steps"
        )
    if int(d.prompts_per_step) % 2 and cfg.build.fraction == 0.5:
        raise ConfigError(f"dapo.prompts_per_step={d.prompts_per_step} must be even for a 1:1 build/use batch")
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
    "loss_norm": "dapo.loss_norm",
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


def trainer_overrides(cfg: TrainConfig) -> dict[str, Any]:
    """`trainer.<field>=value`: any GRPOConfig field smith does not set itself (checked before any model loads)."""
    import dataclasses
    import difflib

    from trl import GRPOConfig

    overrides = dict(cfg.trainer)
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
            GRPOConfig(output_dir=str(Path(cfg.output_dir or ".")), use_cpu=True, **overrides)
        except ValueError as e:
            raise ConfigError(f"trainer.*: GRPOConfig refused the settings: {str(e).splitlines()[0]}") from None
    return overrides


def grpo_args(cfg: DictConfig | TrainConfig, run_dir: Path, on_gpu: bool, num_processes: int) -> SmithGRPOConfig:
    """TRL's arguments with smith's own (SmithGRPOConfig), from the typed config; `owned` maps smith's keys."""
    cfg = typed(cfg)
    d = cfg.dapo
    per_device = per_device_batch(cfg, num_processes)
    report = [] if cfg.logging.wandb == "disabled" else ["wandb"]
    if report:
        os.environ.setdefault("WANDB_MODE", str(cfg.logging.wandb))
        os.environ.setdefault("WANDB_PROJECT", str(cfg.logging.project))
        os.environ.setdefault("WANDB_DIR", str(run_dir))  # offline runs land inside the run directory
    use_vllm = cfg.generation.backend == "vllm"
    owned = dict(
        output_dir=str(run_dir),
        max_steps=int(cfg.max_steps),
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=int(d.gradient_accumulation_steps),
        num_generations=int(d.num_generations),
        max_completion_length=int(d.max_completion_length),
        temperature=float(d.temperature),
        top_p=float(d.top_p),
        beta=float(d.beta),
        epsilon=float(d.epsilon),
        epsilon_high=float(d.epsilon_high),
        loss_type=str(d.loss_type),
        mask_truncated_completions=bool(d.mask_truncated_completions),
        gradient_checkpointing=bool(d.gradient_checkpointing),
        learning_rate=float(d.learning_rate),
        warmup_steps=int(d.warmup_steps),
        reward_weights=[float(getattr(cfg.rewards.weights, f.__name__)) for f in AXIS_REWARDS],
        shuffle_dataset=False,  # rows alternate build/use; in order, every batch splits 1:1
        save_strategy="steps",
        save_steps=int(cfg.save_every),
        logging_steps=1,
        seed=int(cfg.seed),
        bf16=on_gpu and str(cfg.model.dtype) == "bfloat16",
        use_cpu=not on_gpu,
        use_vllm=use_vllm,
        vllm_mode=str(cfg.generation.vllm_mode),
        **({"vllm_server_base_url": str(cfg.generation.vllm_server_url)}
           if use_vllm and cfg.generation.vllm_server_url else {}),
        remove_unused_columns=False,
        dataloader_num_workers=0,
        advantage=d.advantage,
        std_floor=d.std_floor,
        dynamic_sampling=d.dynamic_sampling,
        loss_norm=d.loss_norm,
    )
    defaults = dict(lr_scheduler_type="constant_with_warmup", report_to=report,
                    disable_tqdm=True)  # smith prints one line per step (smith.train.progress)
    try:
        return SmithGRPOConfig(**{**defaults, **trainer_overrides(cfg), **owned})
    except ValueError as e:
        raise ConfigError(f"trainer.*: GRPOConfig refused the settings: {str(e).splitlines()[0]}") from None


def script_function(spec: str) -> Any:
    """`generation.backend=scripted generation.script=module:function`: scripted text, real everything else
    (dry runs of the whole pipeline, and tests that need a non-empty pool in a subprocess). Imported before the
    model loads, so a misspelt script fails at once."""
    import importlib

    module, _, func = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError, ValueError) as e:
        raise ConfigError(f"generation.script '{spec}' is not an importable module:function ({e})") from None


def make_retriever(cfg: DictConfig) -> Any:
    """`pool.retrieval`: null (the paper's 1 matching + distractors), a scorer name, or a saved retriever dir.
    Made before the model loads (a scorer loads its own model lazily), so a bad value fails at once."""
    if not cfg.pool.retrieval:
        return None
    from smith.pool.retrieval.retriever import AdaptiveRetriever
    from smith.pool.retrieval.scorers import SCORERS

    spec = str(cfg.pool.retrieval)
    if not Path(spec).is_dir():
        if spec not in SCORERS:
            raise ConfigError(f"pool.retrieval={spec} is neither a scorer ({', '.join(SCORERS)}) nor a saved "
                              "retriever directory")
        return AdaptiveRetriever(spec)
    try:
        return AdaptiveRetriever.load(spec)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as e:  # a file the user named, not ours
        raise ConfigError(f"pool.retrieval={spec} is not a loadable retriever directory ({type(e).__name__}: "
                          f"{e})") from None


def external_backend(section: DictConfig, cfg: DictConfig) -> Any:
    from smith.models import load_backend

    return load_backend(f"openai:{section.base_url}#{section.model_name}", cfg)


MODEL_DIRS = {"tiny": "model.tiny_dir", "tiny-warm": "model.warm_dir"}  # built (and cached) by the run


def check_vllm_server(cfg: TrainConfig) -> None:
    """Server mode, before any model loads: the server must answer (TRL's client would retry for 4 minutes), and the
    training side needs CUDA (TRL pushes the policy's weights through vLLM's NCCL weight-transfer engine)."""
    import httpx

    url = str(cfg.generation.vllm_server_url or "http://0.0.0.0:8000").rstrip("/")  # TRL's default
    try:
        httpx.get(f"{url}/health", timeout=5).raise_for_status()
    except httpx.HTTPError as e:
        raise ConfigError(f"generation.vllm_server_url: no vLLM server answers at {url}/health ({type(e).__name__}); "
                          f"start it first: trl vllm-serve --model {cfg.model.name_or_path} "
                          f"--port {httpx.URL(url).port or 8000}") from None
    if cfg.device == "cpu" or not torch.cuda.is_available():
        raise ConfigError("generation.vllm_mode=server needs CUDA on the training side: TRL pushes the policy's "
                          "weights to the server over vLLM's NCCL weight-transfer engine; on CPU use "
                          "generation.vllm_mode=colocate")


def check_config(cfg: DictConfig | TrainConfig) -> TrainConfig:
    """Fail in one line before any model loads, and return the typed config to pass down. Types, ranges and
    enumerations are the schema's (smith.config: a misspelt choice used to mean None, a number of the wrong type
    failed after the model loaded); here: `trainer.*` against GRPOConfig, an external evaluator/judge endpoint
    that is not up or does not serve the named model, and a vLLM server that does not answer."""
    conf = typed(cfg)
    if conf.dapo.advantage not in ADVANTAGES:  # the registry's names: one module to add an estimator
        raise ConfigError(f"dapo.advantage={conf.dapo.advantage} is not one of {', '.join(ADVANTAGES)}")
    trainer_overrides(conf)
    for part in ("evaluator", "judge"):
        section = getattr(conf, part)
        if section.kind != "external":
            continue
        if not section.base_url or not section.model_name:
            raise ConfigError(f"{part}.kind=external needs {part}.base_url and {part}.model_name")
        check_endpoint(str(section.base_url), str(section.model_name), part,
                       model_label=f"{part}.model_name={section.model_name}",
                       hint="start it first (docs/training.md, 'Recipes')")
    if conf.generation.backend == "vllm" and conf.generation.vllm_mode == "server":
        check_vllm_server(conf)
    return conf


def check_places(cfg: DictConfig) -> None:
    """The directories and services a run uses besides its own directory, checked before any model loads (each
    used to fail after it): the tiny model's build directory (built in place behind a lock file beside it),
    a local model path, the task item cache, and a remote sandbox's /health."""
    name = str(cfg.model.name_or_path)
    if name in MODEL_DIRS:
        writable_parent(str(OmegaConf.select(cfg, MODEL_DIRS[name])), MODEL_DIRS[name])
    elif name.startswith(("/", ".", "~")) and not (Path(name).expanduser() / "config.json").is_file():
        raise ConfigError(f"model.name_or_path={name} is not a model directory (no config.json); "
                          "give a model directory, a hub id, tiny or tiny-warm")
    if cfg.tasks.cache_dir:
        writable_dir(str(cfg.tasks.cache_dir), "tasks.cache_dir")
    if cfg.sandbox.url:
        import httpx

        url = f"{str(cfg.sandbox.url).rstrip('/')}/health"
        try:
            reply = httpx.get(url, timeout=10).raise_for_status().json()
            problem = None if isinstance(reply, dict) and reply.get("ok") is True else f"it answered {reply!r:.80}"
        except (httpx.HTTPError, ValueError) as e:
            problem = f"{type(e).__name__}: {e}"
        if problem:
            raise ConfigError(f"sandbox.url: {url} is not answering as a sandbox service ({problem}); "
                              "start `python -m sandbox serve` first")


def train(cfg: DictConfig, run_dir: Path, callbacks: tuple = ()) -> Path:
    from accelerate import PartialState
    from datasets import Dataset
    from transformers import PrinterCallback

    from smith.models.hf import HFBackend
    from smith.tasks import load_catalog
    from smith.train.data import TaskSource, prompt_rows

    # the user's input is checked first: a bad value fails in one line, with no run directory made, no model loaded
    conf = check_config(cfg)  # the typed config (smith.config), passed down; cfg stays the record of the run
    state = PartialState()
    per_device_batch(conf, state.num_processes)
    catalog = load_catalog(cfg.tasks.catalog)
    seen = list(cfg.tasks.categories) if cfg.tasks.categories else [c.name for c in catalog.seen]
    catalog.check_names(seen, "tasks.categories")
    script = script_function(str(cfg.generation.script)) if cfg.generation.backend == "scripted" else None
    check_places(cfg)
    retriever = make_retriever(cfg)
    writable_dir(run_dir, "resume" if cfg.resume else "output_dir")
    ckpt, changes = None, []
    if cfg.resume:  # the settings first: a refused resume leaves the run directory as it was
        changes = check_resume_config(cfg, run_dir)
        ckpt = last_complete_checkpoint(run_dir, warn=state.is_main_process)
    on_gpu = cfg.device != "cpu" and torch.cuda.is_available()
    args = grpo_args(conf, run_dir, on_gpu, state.num_processes)
    torch.manual_seed(int(cfg.seed))
    model, tok, model_path = load_policy(cfg, on_gpu)
    source = TaskSource(seen, conf.build.n_examples, conf.build.k_heldout, conf.tasks.seed, conf.tasks.cache_dir,
                        bank_size=conf.tasks.bank_size, band_examples=conf.build.band_examples,
                        band_heldout=conf.build.band_heldout, catalog=catalog)
    pool = ToolPool(int(cfg.pool.cap_per_category), groups={c.name: c.group for c in catalog.categories})
    hf = HFBackend(model, tok, name=model_path)
    copy = hf.with_adapter(EVALUATOR_ADAPTER) if EVALUATOR_ADAPTER in getattr(model, "peft_config", {}) else None
    if script is not None:
        from smith.models.scripted import ScriptedBackend

        policy = ScriptedBackend(tok, script)
    else:
        policy = hf
    evaluator = {"self": copy, "direct": None}.get(str(cfg.evaluator.kind)) if cfg.evaluator.kind != "external" \
        else external_backend(cfg.evaluator, cfg)
    judge = {"self": copy, "none": None}.get(str(cfg.judge.kind)) if cfg.judge.kind != "external" \
        else external_backend(cfg.judge, cfg)
    n_rows = int(cfg.max_steps) * int(cfg.dapo.prompts_per_step) * int(cfg.dapo.gradient_accumulation_steps) * 2
    dataset = Dataset.from_list(prompt_rows(n_rows, float(cfg.build.fraction)))
    if state.is_main_process:
        save_config(cfg, run_dir, ckpt)
        if changes:
            print("resuming with changed settings (resume_allow_changes=true):\n" + "\n".join(changes))
    if cfg.resume and ckpt is None:
        print(f"no complete checkpoint in {run_dir}; starting from step 0")

    with ExitStack() as stack:
        sandbox, limits = make_sandbox(cfg)
        stack.callback(sandbox.close)
        # the warm model lives at a local path only: checkpoints name that path as their base
        base = model_path if cfg.model.name_or_path == "tiny-warm" else None
        session = Session(cfg, run_dir, pool, base_model=base)
        # admissions are staged by the session, so that every rank admits every rank's tools in one order
        make_rollout = partial(Rollout, sandbox=sandbox, limits=limits, pool=pool,
                               settings=rollout_settings(conf, run_dir), evaluator=evaluator, judge=judge,
                               workers=max(2, int(cfg.sandbox.workers)), admit=session.stage, retriever=retriever,
                               catalog=catalog)
        trainer = SmithTrainer(model=model, reward_funcs=AXIS_REWARDS, args=args, train_dataset=dataset,
                               processing_class=tok, session=session, tasks=source, policy=policy,
                               make_rollout=make_rollout,
                               callbacks=[SmithCallback(session), ConsoleCallback(run_dir), WandbConfig(cfg),
                                          *callbacks])
        stack.callback(trainer.rollout.close)
        trainer.remove_callback(PrinterCallback)
        if ckpt is not None:
            restore(session, model, ckpt, state.process_index)
            print(f"resuming {run_dir} from {ckpt.name} (pool of {len(pool)} tools)")
        trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
        save_final(trainer, tok, run_dir, cfg, model_path)
        if state.is_main_process:
            pool.save(run_dir / "tool_pool.json")
    if state.is_main_process:
        print(f"smith: trained {cfg.name} for {trainer.state.global_step} steps; run directory: {run_dir} "
              f"(final adapter and tokenizer with a model card README.md, checkpoints, tool_pool.json with {len(pool)} "
              "tools, metrics.jsonl, curves.png)")
    return run_dir
