"""What one decode step costs as the batch widens, with and without an unmerged LoRA: the cost model behind a real
step's generation seconds (docs/training.md, "Real weights"). A prompt of L tokens is prefilled, its cache copied
to B rows, then N one-token decode steps run (fixed tokens, smith's in-place cache: `kv_cache.step_ms`), for each
B, on the plain model and on the same model with a LoRA of the recipe's shape on every linear layer (unmerged, as
the policy, the evaluator and the judge generate). The same run times one pass over the model's weight bytes (a
copy), the floor of a step that only had to stream its weights. One line per batch, then the summary, whose
ratios compare the widest batch with the first (the baseline, measured in the same run):

    decode_width batch=<b> plain_ms=<a> lora_ms=<c> rows_per_s=<r>
    decode_width weights_mb=<m> stream_ms=<s> widest=<B> step_ratio=<ms(B)/ms(b0)> rows_ratio=<x> lora_overhead=<y>

    python benchmarks/decode_width.py [--model smollm2-135m] [--batch 4 8 16 32] [--context 600] [--steps 30]
        [--rounds 3] [--lora-r 16]
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
sys.path.insert(0, str(ROOT / "benchmarks"))

from kv_cache import step_ms  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402
from transformers.cache_utils import Cache  # noqa: E402

from smith.errors import guarded  # noqa: E402
from smith.models import resolve_model  # noqa: E402
from smith.models.hf import _GrowingLayer  # noqa: E402


def stream_ms(model: torch.nn.Module) -> tuple[float, float]:
    """(MB of distinct weights, median milliseconds to copy them once into a preallocated buffer)."""
    flat = torch.cat([p.detach().reshape(-1) for p in {id(p): p for p in model.parameters()}.values()])
    out = torch.empty_like(flat)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        out.copy_(flat)
        times.append((time.perf_counter() - t0) * 1000)
    return flat.numel() * flat.element_size() / 1e6, statistics.median(times)


def median_ms(model: torch.nn.Module, batch: int, context: int, steps: int, rounds: int) -> float:
    cache = lambda: Cache(layer_class_to_replicate=_GrowingLayer)  # noqa: E731
    return statistics.median(step_ms(model, cache(), batch, context, steps)[0] for _ in range(rounds))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m", help="a model SPEC (smith.models)")
    ap.add_argument("--batch", type=int, nargs="+", default=[4, 8, 16, 32], help="the first is the baseline")
    ap.add_argument("--context", type=int, default=600)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lora-r", type=int, default=16, help="the recipe's rank (recipes/recipe/smollm2-135m.yaml)")
    a = ap.parse_args()
    model = AutoModelForCausalLM.from_pretrained(resolve_model(a.model)[0], dtype=torch.float32).eval()
    mb, stream = stream_ms(model)
    plain = {b: median_ms(model, b, a.context, a.steps, a.rounds) for b in a.batch}
    model = get_peft_model(model, LoraConfig(r=a.lora_r, lora_alpha=2 * a.lora_r, target_modules="all-linear",
                                             init_lora_weights=False)).eval()
    lora = {b: median_ms(model, b, a.context, a.steps, a.rounds) for b in a.batch}
    for b in a.batch:
        print(f"decode_width batch={b} plain_ms={plain[b]:.1f} lora_ms={lora[b]:.1f} "
              f"rows_per_s={b / lora[b] * 1000:.0f}", flush=True)
    first, widest = a.batch[0], a.batch[-1]
    overhead = statistics.median(lora[b] / plain[b] for b in a.batch)
    print(f"decode_width weights_mb={mb:.0f} stream_ms={stream:.1f} widest={widest} "
          f"step_ratio={lora[widest] / lora[first]:.2f} "
          f"rows_ratio={(widest / lora[widest]) / (first / lora[first]):.2f} lora_overhead={overhead:.2f}")


if __name__ == "__main__":
    guarded(main)
