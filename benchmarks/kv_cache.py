"""The decode loop's KV cache: smith's in-place layer (`smith.models.hf._GrowingLayer`, a buffer that doubles when
full) against transformers' `DynamicLayer` (the whole cache concatenated with every token), on the same model,
batch and tokens: B rows sharing one prompt of L tokens, then N one-token decode steps (fixed tokens, no sampling).
Rounds alternate the two caches; the medians are compared, per batch size, and the last line is the largest
batch's:

    kv_cache batch=<b> context=<l> dynamic_ms=<a> in_place_ms=<b> ratio=<a/b>

    python benchmarks/kv_cache.py [--model smollm2-135m] [--batch 4 16] [--context 600] [--steps 40] [--rounds 3]
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

from transformers import AutoModelForCausalLM, DynamicCache  # noqa: E402
from transformers.cache_utils import Cache  # noqa: E402

from smith.models import resolve_model  # noqa: E402
from smith.models.hf import _GrowingLayer  # noqa: E402


def step_ms(model, cache, batch: int, context: int, steps: int) -> tuple[float, torch.Tensor]:
    """Milliseconds per decode step of `batch` rows after a shared prompt of `context` tokens; the last logits."""
    g = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    prompt = torch.randint(vocab, (1, context), generator=g)
    tokens = torch.randint(vocab, (steps, batch, 1), generator=g)
    with torch.no_grad():
        model(input_ids=prompt, past_key_values=cache, use_cache=True, logits_to_keep=1)
        cache.batch_select_indices(torch.zeros(batch, dtype=torch.long))
        mask = torch.ones(batch, context, dtype=torch.long)
        t0 = time.perf_counter()
        for token in tokens:
            mask = torch.cat([mask, torch.ones(batch, 1, dtype=torch.long)], -1)
            logits = model(input_ids=token, attention_mask=mask, position_ids=(mask.sum(-1, keepdim=True) - 1),
                           past_key_values=cache, use_cache=True, logits_to_keep=1).logits
    return (time.perf_counter() - t0) / steps * 1000, logits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m", help="a model SPEC (smith.models)")
    ap.add_argument("--batch", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--context", type=int, default=600)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    model = AutoModelForCausalLM.from_pretrained(resolve_model(a.model)[0], dtype=torch.float32).eval()
    line = ""
    for batch in a.batch:
        times: dict[str, list[float]] = {"dynamic": [], "in_place": []}
        for _ in range(a.rounds):
            ours, out_ours = step_ms(model, Cache(layer_class_to_replicate=_GrowingLayer), batch, a.context, a.steps)
            theirs, out_theirs = step_ms(model, DynamicCache(), batch, a.context, a.steps)
            if not torch.allclose(out_ours, out_theirs, atol=1e-4):
                raise SystemExit("the two caches gave different logits")
            times["in_place"].append(ours)
            times["dynamic"].append(theirs)
        dyn, mine = statistics.median(times["dynamic"]), statistics.median(times["in_place"])
        line = (f"kv_cache batch={batch} context={a.context} dynamic_ms={dyn:.1f} in_place_ms={mine:.1f} "
                f"ratio={dyn / mine:.2f}")
        print(line, flush=True)
    print(line)


if __name__ == "__main__":
    main()
