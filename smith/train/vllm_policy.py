"""Policy generation through TRL's own vLLM engine (colocate or server), behind smith's backend interface.

TRL syncs the policy weights into vLLM before each `rollout_func` call; this adapter only turns the
rollout's token-id prompts into vLLM requests. GPU path: written against trl 1.16, not run on CPU here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from smith.models.base import Generation, SamplingParams, TokenBackend


class TRLVLLMPolicy(TokenBackend):
    """`render` / `continue_ids` / `tokenizer` over `trainer.vllm_generation` (one call per turn on every rank)."""

    def __init__(self, trainer: Any, tokenizer: Any) -> None:
        self.trainer = trainer
        self.tokenizer = tokenizer
        self.name = "trl-vllm"
        self.eos_ids = {tokenizer.eos_token_id, tokenizer.pad_token_id}

    def continue_ids(self, prompts: Sequence[Sequence[int]], params: SamplingParams | None = None) -> list[Generation]:
        params = params or SamplingParams()
        _, completions, logprobs, _ = self.trainer.vllm_generation.generate([list(p) for p in prompts], None, 1)
        out = []
        for p, ids, lps in zip(prompts, completions, logprobs, strict=True):
            ids, lps = list(ids)[: params.max_new_tokens], [row[0] for row in lps][: params.max_new_tokens]
            finished = bool(ids) and ids[-1] in self.eos_ids
            out.append(Generation(text=self.tokenizer.decode(ids, skip_special_tokens=True), prompt_ids=list(p),
                                  completion_ids=ids, logprobs=[float("nan") if x is None else x for x in lps],
                                  finish_reason="stop" if finished else "length", prompt_tokens=len(p),
                                  completion_tokens=len(ids)))
        return out
