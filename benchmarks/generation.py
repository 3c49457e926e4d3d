"""Generation speed: smith's HF decode loop (`HFBackend.continue_ids`, kept because the log-probs of its sampled
tokens must match TRL's) against transformers' `generate` on the same batch.

Two models: the tiny test model and a ~50M-parameter random Qwen3 (same tokenizer). Each gets one batch of
left-padded prompts of different lengths (as a rollout's turns are) and a fixed number of new tokens (no
early stop on either side: eos is switched off, so both decode exactly the same number of steps), sampled at
temperature 0.7 / top_p 0.95. `--group G` repeats each prompt G times, as a GRPO group's samples share one prompt
(smith prefills it once and copies its cache; `generate` prefills every row). Rounds alternate the two generators
to cancel machine noise; the medians are compared. One line per model, then the model with the lower ratio again
as the last line:

    generation tokens/s smith=<a> hf_generate=<b> ratio=<a/b>

    python benchmarks/generation.py [--batch 16] [--group 1] [--new-tokens 64] [--rounds 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from smith.models.base import SamplingParams  # noqa: E402
from smith.models.hf import HFBackend  # noqa: E402
from smith.models.tiny import build_tiny_model  # noqa: E402


def qwen3_50m(tiny_dir: Path):
    from transformers import AutoConfig, Qwen3ForCausalLM

    config = AutoConfig.from_pretrained(tiny_dir)
    config.update({"hidden_size": 640, "intermediate_size": 1920, "num_hidden_layers": 10, "num_attention_heads": 10,
                   "num_key_value_heads": 5, "head_dim": 64, "layer_types": ["full_attention"] * 10})
    torch.manual_seed(0)
    return Qwen3ForCausalLM(config).eval()


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def compare(name: str, model, tok, batch: int, new: int, rounds: int, group: int = 1) -> tuple[float, float]:
    rng = random.Random(0)
    vocab = model.config.vocab_size
    distinct = [[rng.randrange(10, vocab) for _ in range(rng.randint(100, 400))] for _ in range(batch // group)]
    prompts = [p for p in distinct for _ in range(group)]
    batch = len(prompts)
    backend = HFBackend(model, tok)
    backend.eos_ids = {-1}  # never produced: decode exactly `new` steps, as generate below
    params = SamplingParams(max_new_tokens=new, temperature=0.7, top_p=0.95, seed=0)
    width = max(map(len, prompts))
    ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])

    def ours() -> None:
        out = backend.continue_ids(prompts, params)
        assert all(len(g.completion_ids) == new for g in out)

    def theirs() -> None:
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=0.7, top_p=0.95,
                                 top_k=0, max_new_tokens=new, min_new_tokens=new, eos_token_id=None,
                                 pad_token_id=tok.pad_token_id)
        assert out.shape[1] == width + new

    ours(), theirs()  # warm-up
    a, b = [], []
    for _ in range(rounds):
        a.append(batch * new / timed(ours))
        b.append(batch * new / timed(theirs))
    smith, hf = statistics.median(a), statistics.median(b)
    params_m = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"[{name}, {params_m:.1f}M parameters, batch {batch} ({batch // group} prompts x {group}), {new} new tokens] "
          f"generation tokens/s smith={smith:.1f} hf_generate={hf:.1f} ratio={smith / hf:.3f}", flush=True)
    return smith, hf


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--group", type=int, default=1, help="rows per distinct prompt (a GRPO group's G)")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tiny_dir, _ = build_tiny_model(Path(tempfile.mkdtemp(prefix="smith-gen-")) / "tiny")
    tok = AutoTokenizer.from_pretrained(tiny_dir)
    results = [compare("tiny", AutoModelForCausalLM.from_pretrained(tiny_dir).eval(), tok, args.batch,
                       args.new_tokens, args.rounds, args.group),
               compare("qwen3-50m", qwen3_50m(tiny_dir), tok, args.batch, args.new_tokens, args.rounds, args.group)]
    smith, hf = min(results, key=lambda r: r[0] / r[1])
    print(f"generation tokens/s smith={smith:.1f} hf_generate={hf:.1f} ratio={smith / hf:.3f}")


if __name__ == "__main__":
    main()
