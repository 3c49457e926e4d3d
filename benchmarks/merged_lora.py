"""Generation from a merged copy of a LoRA model against the unmerged adapter (smith.models.hf, `_Merged`): the
recipe's rank-16 LoRA on every linear layer of the model (small random weights, so it changes what the model says
a little), `HFBackend.continue_ids` on G rows of one real `lcm` build prompt, greedy, both arms in the same run (the
baseline decodes through PEFT's unmerged layers, as smith did before). The first call of the merged arm makes the
copy; it is timed apart (`copy_s`), as is rewriting its weights after a LoRA update (`rewrite_s`).

    merged_lora rows=<g> unmerged_s=<a> merged_s=<b> tokens=<n> same_tokens=<bool> copy_s=<c> rewrite_s=<r> \
speedup=<a/b>

    python benchmarks/merged_lora.py [--model smollm2-135m] [--rows 4] [--new-tokens 128] [--rounds 3] [--lora-r 16]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from peft import LoraConfig, get_peft_model  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from smith.errors import guarded  # noqa: E402
from smith.models import resolve_model  # noqa: E402
from smith.models.attention import SDPA_GQA  # noqa: E402
from smith.models.base import SamplingParams  # noqa: E402
from smith.models.hf import HFBackend, _Merged  # noqa: E402
from smith.rollout.prompts import build_messages  # noqa: E402
from smith.tasks import items  # noqa: E402


def timed(backend: HFBackend, prompts: list[list[int]], params: SamplingParams) -> tuple[float, list[list[int]]]:
    t0 = time.perf_counter()
    out = backend.continue_ids(prompts, params)
    return time.perf_counter() - t0, [g.completion_ids for g in out]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m", help="a model SPEC (smith.models)")
    ap.add_argument("--rows", type=int, default=4, help="the recipe's G")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lora-r", type=int, default=16, help="the recipe's rank (recipes/recipe/smollm2-135m.yaml)")
    a = ap.parse_args()
    path = resolve_model(a.model)[0]
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation=SDPA_GQA)
    model = get_peft_model(model, LoraConfig(r=a.lora_r, lora_alpha=2 * a.lora_r, target_modules="all-linear"))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 1e-3)  # as after a few updates: the adapter is live, the model still itself
    backend = HFBackend(model, AutoTokenizer.from_pretrained(path), progress=False)
    examples = random.Random(0).sample(items("lcm", "easy", 16, seed=0), 4)
    prompts = [backend.render(build_messages(examples))] * a.rows
    params = SamplingParams(max_new_tokens=a.new_tokens, temperature=0.0)

    merged_layers = _Merged.layers
    _Merged.layers = staticmethod(lambda model: None)  # the baseline: decode through the unmerged layers
    unmerged = [timed(backend, prompts, params) for _ in range(a.rounds)]
    _Merged.layers = merged_layers
    copy_s = timed(backend, prompts[:1], SamplingParams(max_new_tokens=1))[0]
    merged = [timed(backend, prompts, params) for _ in range(a.rounds)]
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.mul_(1.0)  # an update that changes nothing but the version counters: the copy is rewritten
    rewrite_s = timed(backend, prompts[:1], SamplingParams(max_new_tokens=1))[0]
    tokens = unmerged[0][1]
    before, after = min(t for t, _ in unmerged), min(t for t, _ in merged)
    print(f"merged_lora rows={a.rows} unmerged_s={before:.2f} merged_s={after:.2f} tokens={sum(map(len, tokens))} "
          f"same_tokens={merged[0][1] == tokens} copy_s={copy_s:.2f} rewrite_s={rewrite_s:.2f} "
          f"speedup={before / after:.2f}")


if __name__ == "__main__":
    guarded(main)
