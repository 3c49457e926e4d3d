"""`python train.py recipe=...`: load the policy, wire the rollout to the trainer, train, resume, save.

Reads top to bottom (docs/architecture.md, "One training step"): policy + adapters -> tasks, sandbox, pool -> rollout ->
trainer -> train (or resume) -> pool saved. The step itself lives in SmithTrainer.
"""

from __future__ import annotations

from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import torch

from sandbox import open_sandbox
from smith.config import EvaluatorConfig, JudgeConfig, TrainConfig
from smith.errors import ConfigError, writable_dir
from smith.models import built_model
from smith.models.chat_format import chat_format
from smith.models.tiny import WARM_SPEC
from smith.pool import ToolPool
from smith.rollout.episodes import Rollout
from smith.train.adapters import EVALUATOR_ADAPTER, sync_evaluator
from smith.train.args import grpo_args, per_device_batch
from smith.train.callbacks import SmithCallback
from smith.train.checkpoints import last_complete_checkpoint, restore, trim_logs
from smith.train.checks import check_config, check_places
from smith.train.progress import ConsoleCallback, WandbConfig
from smith.train.resume import check_resume_config, save_config
from smith.train.session import Session
from smith.train.trainer import AXIS_REWARDS, SmithTrainer


def load_policy(conf: TrainConfig, on_gpu: bool) -> tuple[Any, Any, str]:
    """Base model + tokenizer, the LoRA policy adapter, and (when used) a frozen evaluator/judge copy."""
    from accelerate import PartialState
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from smith.models.attention import SDPA_GQA

    m = conf.model
    name = m.name_or_path
    with PartialState().main_process_first():
        if name == WARM_SPEC:  # built (or checked current) here: its build needs the rollout, above smith.models
            from smith.train.warm import build_warm_model

            build_warm_model(m.warm_dir, cache_dir=conf.tasks.cache_dir)
        built = built_model(name, conf)  # tiny, tiny-warm, smollm2-135m: the resolver evaluation uses too
    # a local model by its absolute path (adapters name their base by it, so they load from anywhere); a hub id as
    # it is (transformers' cache, or a download, decides)
    path = str(Path(built or name).resolve()) if built is not None or Path(name).is_dir() else name
    if conf.cold.demos > 0:
        from smith.train.cold import build_cold_start

        with PartialState().main_process_first():
            path = str(build_cold_start(path, conf.cold.dir, conf.cold, cache_dir=conf.tasks.cache_dir,
                                        on_gpu=on_gpu, dtype=m.dtype)[0].resolve())
    dtype = getattr(torch, m.dtype) if on_gpu else torch.float32
    tok = AutoTokenizer.from_pretrained(path)
    chat_format(tok, thinking=m.thinking)  # every backend on this tokenizer renders and reads so
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=SDPA_GQA)
    lora = LoraConfig(r=conf.lora.r, lora_alpha=conf.lora.alpha, lora_dropout=conf.lora.dropout,
                      target_modules=conf.lora.target_modules, task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    if conf.evaluator.kind == "self" or conf.judge.kind == "self":
        model.add_adapter(EVALUATOR_ADAPTER, lora)
        model.set_adapter("default")
        sync_evaluator(model)  # the copy starts from the base checkpoint, like the policy (LoRA B = 0)
        for n, p in model.named_parameters():
            if f".{EVALUATOR_ADAPTER}." in n:
                p.requires_grad_(False)
    return model, tok, path


def save_final(trainer: Any, tok: Any, run_dir: Path, conf: TrainConfig, base: str) -> None:
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
            f"`{conf.name}`, {trainer.state.global_step} steps, seed {conf.seed}; "
            f"{len(rows)} logged steps in `metrics.jsonl`, the run's config in `config.yaml`.", "",
            "```python", "from peft import AutoPeftModelForCausalLM", "",
            f'model = AutoPeftModelForCausalLM.from_pretrained("{run_dir.name}")', "```", ""]
    if rows:
        card += ["Rewards per axis:", "", "```", summary(rows), "```", ""]
    card.append(f"Tool pool: `tool_pool.json` (`smith export-pool {run_dir.name} --format openai --out tools.json` "
                "writes it as OpenAI tools).")
    (run_dir / "README.md").write_text("\n".join(card) + "\n")


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


def make_retriever(spec: str | None) -> Any:
    """`pool.retrieval`: null (the paper's 1 matching + distractors), a scorer name, or a saved retriever dir.
    Made before the model loads (a scorer loads its own model lazily), so a bad value fails at once."""
    if not spec:
        return None
    from smith.pool.retrieval.retriever import AdaptiveRetriever
    from smith.pool.retrieval.scorers import SCORERS

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


def external_backend(section: EvaluatorConfig | JudgeConfig, conf: TrainConfig) -> Any:
    from smith.models import load_backend

    return load_backend(f"openai:{section.base_url}#{section.model_name}", conf)


def train(conf: TrainConfig, run_dir: Path, callbacks: tuple = ()) -> Path:
    from accelerate import PartialState
    from datasets import Dataset
    from transformers import PrinterCallback

    from smith.models.hf import HFBackend
    from smith.tasks import load_catalog
    from smith.train.data import TaskSource, prompt_rows

    # the user's input is checked first: a bad value fails in one line, with no run directory made, no model loaded
    check_config(conf)
    state = PartialState()
    per_device_batch(conf, state.num_processes)
    catalog = load_catalog(conf.tasks.catalog)
    seen = list(conf.tasks.categories) if conf.tasks.categories else [c.name for c in catalog.seen]
    catalog.check_names(seen, "tasks.categories")
    script = script_function(conf.generation.script) if conf.generation.backend == "scripted" else None
    check_places(conf)
    retriever = make_retriever(conf.pool.retrieval)
    writable_dir(run_dir, "resume" if conf.resume else "output_dir")
    ckpt, changes = None, []
    if conf.resume:  # the settings first: a refused resume leaves the run directory as it was
        changes = check_resume_config(conf, run_dir)
        ckpt = last_complete_checkpoint(run_dir, warn=state.is_main_process)
    on_gpu = conf.device != "cpu" and torch.cuda.is_available()
    args = grpo_args(conf, run_dir, on_gpu, state.num_processes)
    torch.manual_seed(conf.seed)
    model, tok, model_path = load_policy(conf, on_gpu)
    source = TaskSource(seen, conf.build.n_examples, conf.build.k_heldout, conf.tasks.seed, conf.tasks.cache_dir,
                        bank_size=conf.tasks.bank_size, band_examples=conf.build.band_examples,
                        band_heldout=conf.build.band_heldout, catalog=catalog)
    pool = ToolPool(conf.pool.cap_per_category, groups={c.name: c.group for c in catalog.categories})
    hf = HFBackend(model, tok, name=model_path)
    copy = hf.with_adapter(EVALUATOR_ADAPTER) if EVALUATOR_ADAPTER in getattr(model, "peft_config", {}) else None
    if script is not None:  # the policy's text is scripted, and so is its frozen copy's (one model)
        from smith.models.scripted import ScriptedBackend

        policy = ScriptedBackend(tok, script)
        copy = ScriptedBackend(tok, script, name="scripted:evaluator") if copy is not None else None
    else:
        policy = hf
    external = {role: external_backend(getattr(conf, role), conf) for role in ("evaluator", "judge")
                if getattr(conf, role).kind == "external"}

    def roles(copy: Any) -> dict[str, Any]:
        """The evaluator and judge backends, given the frozen copy the trainer generates with."""
        return {"evaluator": external.get("evaluator", copy if conf.evaluator.kind == "self" else None),
                "judge": external.get("judge", copy if conf.judge.kind == "self" else None)}
    n_rows = conf.max_steps * conf.dapo.prompts_per_step * conf.dapo.gradient_accumulation_steps * 2
    dataset = Dataset.from_list(prompt_rows(n_rows, conf.build.fraction))
    if state.is_main_process:
        save_config(conf, run_dir, ckpt)
        if changes:
            print("resuming with changed settings (resume_allow_changes=true):\n" + "\n".join(changes))
    if conf.resume and ckpt is None:
        print(f"no complete checkpoint in {run_dir}; starting from step 0")
        trim_logs(run_dir, 0, state.process_index)  # the steps the stopped attempt logged are played again

    with ExitStack() as stack:
        sandbox, limits = open_sandbox(conf.sandbox)
        stack.callback(sandbox.close)
        # the warm and cold-started models live at a local path only: checkpoints name that path as their base
        base = model_path if conf.model.name_or_path == WARM_SPEC or conf.cold.demos > 0 else None
        session = Session(conf, run_dir, pool, base_model=base)
        rollout = partial(Rollout, sandbox=sandbox, limits=limits, pool=pool, conf=conf,
                          workers=max(2, conf.sandbox.workers), retriever=retriever, catalog=catalog,
                          source_run=run_dir.name)
        trainer = SmithTrainer(model=model, reward_funcs=AXIS_REWARDS, args=args, train_dataset=dataset,
                               processing_class=tok, session=session, tasks=source, policy=policy, copy=copy,
                               make_rollout=lambda policy, copy: rollout(policy, **roles(copy)),
                               callbacks=[SmithCallback(session), ConsoleCallback(run_dir), WandbConfig(conf),
                                          *callbacks])
        stack.callback(trainer.rollout.close)
        trainer.remove_callback(PrinterCallback)
        if ckpt is not None:
            restore(session, model, ckpt, state.process_index)
            print(f"resuming {run_dir} from {ckpt.name} (pool of {len(pool)} tools)")
        trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
        save_final(trainer, tok, run_dir, conf, model_path)
        if state.is_main_process:
            pool.save(run_dir / "tool_pool.json")
    if state.is_main_process:
        print(f"smith: trained {conf.name} for {trainer.state.global_step} steps; run directory: {run_dir} "
              f"(final adapter and tokenizer with a model card README.md, checkpoints, tool_pool.json with {len(pool)} "
              "tools, metrics.jsonl, curves.png)")
    return run_dir
