"""Generation speed of the real model (SmolLM2-135M-Instruct, float32, smith's HF decode loop) at batch 1 and 8, with
torch's default thread count (what smith runs with: it does not set one) against one thread.

The same chat prompt, sampled at temperature 0.7 / top_p 0.95, a fixed number of new tokens (eos switched off, so
every run decodes the same number of steps). Rounds alternate the two thread counts to cancel machine noise; the
medians are compared. One line per batch size:

    real generation batch=<n> tokens/s default_threads(<k>)=<a> one_thread=<b> ratio=<a/b>

    python benchmarks/real_generation.py [--new-tokens 64] [--rounds 3] [--batches 1,8]
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

from smith.models.base import SamplingParams  # noqa: E402
from smith.models.hf import HFBackend  # noqa: E402
from smith.models.real import build_real_model  # noqa: E402

PROMPT = [{"role": "user", "content": "Write a Python function that returns the least common multiple of a list of "
                                      "integers, with a short explanation."}]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--model-dir", default=str(ROOT / "checkpoints" / ".smollm2-135m"))
    a = ap.parse_args()
    default = torch.get_num_threads()
    backend = HFBackend.from_pretrained(build_real_model(a.model_dir)[0], progress=False)
    backend.eos_ids = {-1}  # no early stop: every run decodes exactly --new-tokens steps
    params = SamplingParams(max_new_tokens=a.new_tokens, temperature=0.7, top_p=0.95, seed=0)
    for batch in (int(b) for b in a.batches.split(",")):
        rates: dict[int, list[float]] = {default: [], 1: []}
        backend.chat([PROMPT] * batch, None, SamplingParams(max_new_tokens=2, temperature=0.0))  # warm-up
        for _ in range(a.rounds):
            for threads in rates:
                torch.set_num_threads(threads)
                t = time.perf_counter()
                gens = backend.chat([PROMPT] * batch, None, params)
                rates[threads].append(sum(g.completion_tokens for g in gens) / (time.perf_counter() - t))
        torch.set_num_threads(default)
        fast, one = statistics.median(rates[default]), statistics.median(rates[1])
        print(f"real generation batch={batch} tokens/s default_threads({default})={fast:.1f} one_thread={one:.1f} "
              f"ratio={fast / one:.2f}", flush=True)


if __name__ == "__main__":
    main()
