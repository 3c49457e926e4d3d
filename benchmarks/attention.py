"""A decode step of a padded batch with smith's attention (`sdpa_gqa`) against transformers' `sdpa`, on the same model:
the rows are distinct prompts of different lengths, left-padded as smith's decode loop pads them, so every forward
carries an attention mask, under which transformers copies the key and value heads out to the query heads' count
(smith.models.attention). For each batch B: the prompts are prefilled, then N one-token decode steps run (fixed
tokens, smith's in-place cache) with each implementation in turn; the logits of both must be the same. Then one
training forward and backward of the same padded rows (TRL's update) with each. The baseline (`sdpa`) is measured
in the same run:

    attention batch=<b> sdpa_ms=<a> sdpa_gqa_ms=<c> speedup=<a/c> max_diff=<d>
    attention update rows=<b> sdpa_s=<a> sdpa_gqa_s=<c> speedup=<a/c>
    attention batches=<b,...> speedup=<first batch> speedup_widest=<widest batch> update_speedup=<x>

    python benchmarks/attention.py [--model smollm2-135m] [--batch 4 16] [--context 600] [--steps 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformers import AutoModelForCausalLM  # noqa: E402
from transformers.cache_utils import Cache  # noqa: E402

from smith.errors import guarded  # noqa: E402
from smith.models import resolve_model  # noqa: E402
from smith.models.attention import SDPA_GQA  # noqa: E402
from smith.models.hf import _GrowingLayer  # noqa: E402

IMPLEMENTATIONS = ("sdpa", SDPA_GQA)


def padded(batch: int, context: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`batch` prompts of `context` tokens less 8 per row, left-padded (ids, mask)."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(vocab, (batch, context), generator=g)
    mask = torch.ones(batch, context, dtype=torch.long)
    for row in range(batch):
        mask[row, : 8 * row] = 0
    return ids, mask


def decode_ms(model: torch.nn.Module, batch: int, context: int, steps: int) -> tuple[float, torch.Tensor]:
    """Milliseconds per decode step after prefilling the padded prompts; the logits of every step."""
    ids, mask = padded(batch, context, model.config.vocab_size)
    tokens = torch.randint(model.config.vocab_size, (steps, batch, 1), generator=torch.Generator().manual_seed(1))
    cache = Cache(layer_class_to_replicate=_GrowingLayer)
    logits = []
    with torch.no_grad():
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True,
              logits_to_keep=1)
        t0 = time.perf_counter()
        for token in tokens:
            mask = torch.cat([mask, torch.ones(batch, 1, dtype=torch.long)], -1)
            logits.append(model(input_ids=token, attention_mask=mask, position_ids=mask.sum(-1, keepdim=True) - 1,
                                past_key_values=cache, use_cache=True, logits_to_keep=1).logits)
    return (time.perf_counter() - t0) / steps * 1000, torch.cat(logits, 1)


def update_s(model: torch.nn.Module, batch: int, context: int) -> float:
    """Seconds of one forward and backward of the padded rows (the loss: next-token cross-entropy)."""
    ids, mask = padded(batch, context, model.config.vocab_size)
    model.train()
    model.zero_grad()
    t0 = time.perf_counter()
    model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss.backward()
    seconds = time.perf_counter() - t0
    model.eval()
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m", help="a model SPEC (smith.models)")
    ap.add_argument("--batch", type=int, nargs="+", default=[4, 16], help="the first is the recipe's build batch")
    ap.add_argument("--context", type=int, default=600)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    model = AutoModelForCausalLM.from_pretrained(resolve_model(a.model)[0], dtype=torch.float32).eval()
    if model.config.num_key_value_heads == model.config.num_attention_heads:
        print(f"attention: {a.model} has no grouped-query attention (as many key-value heads as query heads); "
              "there is nothing to compare", file=sys.stderr)
    speedups = []
    for b in a.batch:
        ms, logits = {}, {}
        for impl in IMPLEMENTATIONS:
            model.set_attn_implementation(impl)
            runs = [decode_ms(model, b, a.context, a.steps) for _ in range(a.rounds)]
            ms[impl], logits[impl] = statistics.median(r[0] for r in runs), runs[0][1]
        diff = (logits["sdpa"] - logits[SDPA_GQA]).abs().max().item()
        speedups.append(ms["sdpa"] / ms[SDPA_GQA])
        print(f"attention batch={b} sdpa_ms={ms['sdpa']:.1f} sdpa_gqa_ms={ms[SDPA_GQA]:.1f} "
              f"speedup={speedups[-1]:.2f} max_diff={diff:.1e}", flush=True)
    seconds = {}
    for impl in IMPLEMENTATIONS:
        model.set_attn_implementation(impl)
        seconds[impl] = min(update_s(model, a.batch[0], a.context) for _ in range(2))
    update = seconds["sdpa"] / seconds[SDPA_GQA]
    print(f"attention update rows={a.batch[0]} sdpa_s={seconds['sdpa']:.2f} sdpa_gqa_s={seconds[SDPA_GQA]:.2f} "
          f"speedup={update:.2f}", flush=True)
    print(f"attention batches={','.join(map(str, a.batch))} speedup={speedups[0]:.2f} "
          f"speedup_widest={speedups[-1]:.2f} update_speedup={update:.2f}")


if __name__ == "__main__":
    guarded(main)
