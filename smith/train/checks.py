"""The start-up checks of `train.py`: everything a run's settings can get wrong is one line (ConfigError, exit 2)
before any model loads or any run directory is made. Types, ranges and choices are the typed config's
(smith.config); here: what needs the layers above it (the advantage registry, GRPOConfig, endpoints, paths)."""

from __future__ import annotations

from pathlib import Path

import torch

from smith.config import TrainConfig
from smith.errors import ConfigError, writable_dir, writable_parent
from smith.models import check_chat_format
from smith.models.openai import check_endpoint
from smith.models.real import REAL_SPEC, gguf_file
from smith.models.tiny import WARM_SHIPPED, WARM_SPEC
from smith.models.vllm import lora_slot_rank
from smith.train.advantages import ADVANTAGES
from smith.train.args import trainer_overrides

MODEL_DIRS = {"tiny": "tiny_dir", WARM_SPEC: "warm_dir", REAL_SPEC: "real_dir"}  # built (and cached) by the run


def _model_dir(conf: TrainConfig, name: str) -> str:
    """Where a built model spec lives (`model.warm_dir` null: the warm model shipped with smith)."""
    return str(getattr(conf.model, MODEL_DIRS[name]) or WARM_SHIPPED)


def check_vllm_server(conf: TrainConfig) -> None:
    """Server mode, before any model loads: the server must answer (TRL's client would retry for 4 minutes); a
    `trl vllm-serve` server also needs CUDA on the training side (TRL pushes the policy's weights through vLLM's
    NCCL weight-transfer engine); a LoRA server's adapter loading is checked at the first push."""
    import httpx

    url = (conf.generation.vllm_server_url or "http://0.0.0.0:8000").rstrip("/")  # TRL's default
    lora = conf.generation.vllm_server == "lora"
    start = (f"VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 vllm serve {conf.model.name_or_path} --enable-lora "
             f"--max-lora-rank {lora_slot_rank(conf.lora.r)} --max-loras 2 --logprobs-mode processed_logprobs" if lora
             else f"trl vllm-serve --model {conf.model.name_or_path}")
    try:
        httpx.get(f"{url}/health", timeout=5).raise_for_status()
    except httpx.HTTPError as e:
        raise ConfigError(f"generation.vllm_server_url: no vLLM server answers at {url}/health ({type(e).__name__}); "
                          f"start it first: {start} --port {httpx.URL(url).port or 8000}") from None
    if lora:
        return
    if conf.device == "cpu" or not torch.cuda.is_available():
        raise ConfigError("generation.vllm_mode=server needs CUDA on the training side: TRL pushes the policy's "
                          "weights to the server over vLLM's NCCL weight-transfer engine; on CPU use "
                          "generation.vllm_mode=colocate or generation.vllm_server=lora")


def check_config(conf: TrainConfig) -> None:
    """Fail in one line before any model loads. Types, ranges and enumerations are the schema's (smith.config,
    checked when the config is built: a misspelt choice used to mean None, a number of the wrong type failed after
    the model loaded); here: `trainer.*` against GRPOConfig, an external evaluator/judge endpoint that is not up or
    does not serve the named model, and a vLLM server that does not answer."""
    if conf.dapo.advantage not in ADVANTAGES:  # the registry's names: one module to add an estimator
        raise ConfigError(f"dapo.advantage={conf.dapo.advantage} is not one of {', '.join(ADVANTAGES)}")
    trainer_overrides(conf)
    for part in ("evaluator", "judge"):
        section = getattr(conf, part)
        if section.kind != "external":
            continue
        if not section.base_url or not section.model_name:
            raise ConfigError(f"{part}.kind=external needs {part}.base_url and {part}.model_name")
        check_endpoint(section.base_url, section.model_name, part,
                       model_label=f"{part}.model_name={section.model_name}",
                       hint="start it first (docs/training.md, 'Recipes')")
    if conf.generation.backend == "vllm" and conf.generation.vllm_mode == "server":
        check_vllm_server(conf)


def check_places(conf: TrainConfig) -> None:
    """The directories and services a run uses besides its own directory, checked before any model loads (each
    used to fail after it): the tiny model's build directory (built in place behind a lock file beside it),
    a local model path and its chat template, the task item cache, and a remote sandbox's /health."""
    name = conf.model.name_or_path
    if name in MODEL_DIRS and getattr(conf.model, MODEL_DIRS[name]) is not None:  # None: the shipped warm model
        writable_parent(_model_dir(conf, name), f"model.{MODEL_DIRS[name]}")
        if name == REAL_SPEC:
            gguf_file()  # its package is installed
    elif name.startswith(("/", ".", "~")) and not (Path(name).expanduser() / "config.json").is_file():
        raise ConfigError(f"model.name_or_path={name} is not a model directory (no config.json); "
                          f"give a model directory, a hub id, tiny, tiny-warm or {REAL_SPEC}")
    check_chat_format(_model_dir(conf, name) if name in MODEL_DIRS else name, thinking=conf.model.thinking)
    if conf.tasks.cache_dir:
        writable_dir(conf.tasks.cache_dir, "tasks.cache_dir")
    if conf.sandbox.url:
        import httpx

        url = f"{conf.sandbox.url.rstrip('/')}/health"
        try:
            reply = httpx.get(url, timeout=10).raise_for_status().json()
            problem = None if isinstance(reply, dict) and reply.get("ok") is True else f"it answered {reply!r:.80}"
        except (httpx.HTTPError, ValueError) as e:
            problem = f"{type(e).__name__}: {e}"
        if problem:
            raise ConfigError(f"sandbox.url: {url} is not answering as a sandbox service ({problem}); "
                              "start `python -m sandbox serve` first")
