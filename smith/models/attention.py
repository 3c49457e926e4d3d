"""`sdpa_gqa`: transformers' SDPA attention, but on CPU grouped-query attention stays in the kernel under a mask.

transformers copies every key and value head out to the query heads' count (`repeat_kv`: the whole KV cache, per layer
and per forward) whenever an attention mask is passed, because CUDA's SDPA falls back to its slow math kernel for GQA
under a mask. CPU's SDPA kernel takes GQA and a mask together and gives the same numbers to the bit. Every batch
smith decodes has a mask (rows of distinct prompts are left-padded, a reused prefix leaves holes), so on CPU that copy
was most of a decode step's attention: SmolLM2-135M (9 query heads, 3 key-value heads) decoding 16 padded rows
after 600 tokens took 1.6x as long a step with the copy as without it (`benchmarks/attention.py`). Everything else
(CUDA, no mask, no GQA) is transformers' own `sdpa`. Every model smith loads uses it
(`attn_implementation=SDPA_GQA`)."""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

SDPA_GQA = "sdpa_gqa"


def sdpa_gqa(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
             **kwargs: Any) -> tuple[torch.Tensor, None]:
    """The attention function of `SDPA_GQA` (transformers' signature: heads first in, sequence first out)."""
    if (attention_mask is None or query.device.type != "cpu" or key.shape[1] == query.shape[1]
            or kwargs.get("position_bias") is not None):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                           dropout_p=dropout, scale=scaling, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(SDPA_GQA, sdpa_gqa)
AttentionMaskInterface.register(SDPA_GQA, sdpa_mask)
