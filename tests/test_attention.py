"""smith's attention (`sdpa_gqa`) against transformers' `sdpa` on the tiny Qwen3 (4 query heads, 2 key-value heads):
the same logits and gradients on a padded batch, the same greedy tokens through the decode loop, and every model smith
loads uses it."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM

from smith.models.attention import SDPA_GQA
from smith.models.base import SamplingParams
from smith.models.hf import HFBackend


def padded_batch() -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(10, 200, (3, 24), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[0, :5], mask[2, :11] = 0, 0
    return ids, mask


def forward_backward(model: torch.nn.Module) -> tuple[torch.Tensor, list[torch.Tensor]]:
    ids, mask = padded_batch()
    model.zero_grad()
    out = model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100))
    out.loss.backward()
    return out.logits.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]


def test_sdpa_gqa_gives_sdpas_logits_and_gradients_on_a_padded_batch(tiny_model_dir, monkeypatch) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32, attn_implementation="sdpa")
    assert model.config.num_key_value_heads < model.config.num_attention_heads  # the case it changes
    logits, grads = forward_backward(model)
    model.set_attn_implementation(SDPA_GQA)
    kernel, calls = torch.nn.functional.scaled_dot_product_attention, []

    def counted(query, key, *args, **kwargs):
        calls.append((query.shape[1], key.shape[1], kwargs.get("enable_gqa")))
        return kernel(query, key, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)
    ours, our_grads = forward_backward(model)
    assert calls and all(kv < q and gqa for q, kv, gqa in calls)  # the key-value heads reached the kernel as they are
    valid = padded_batch()[1].bool()
    torch.testing.assert_close(ours[valid], logits[valid], rtol=0, atol=1e-5)
    for ours_g, g in zip(our_grads, grads, strict=True):
        torch.testing.assert_close(ours_g, g, rtol=1e-4, atol=1e-6)


def test_the_decode_loop_on_sdpa_gqa_says_what_it_says_on_sdpa(tiny_model_dir) -> None:
    backend = HFBackend.from_pretrained(tiny_model_dir, name="tiny")
    assert backend.model.config._attn_implementation == SDPA_GQA
    prompts = [[5, 6, 7, 8, 9, 10, 11], [12, 13], [14, 15, 16, 17]]  # distinct lengths: every step has a mask
    greedy = SamplingParams(max_new_tokens=12)
    ours = backend.continue_ids(prompts, greedy)
    backend.model.set_attn_implementation("sdpa")
    theirs = backend.continue_ids(prompts, greedy)
    assert [g.completion_ids for g in ours] == [g.completion_ids for g in theirs]
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), rtol=0, atol=1e-5)
