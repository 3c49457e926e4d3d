"""The update's cost with dropped groups: smith's loss (the rows of a group without signal left out before the
forward, `smith.train.trainer.kept_rows`) against TRL's own loss on the same micro-batch (every row forwarded and
backpropagated, the dropped ones masked). Same model (the warm-started tiny policy), same rows, same gradient
(checked); rounds alternate the two to cancel machine noise and the medians are compared.

    dropped_rows kept=<k>/<n> rows trl=<s> smith=<s> speedup=<trl / smith>

    python benchmarks/dropped_rows.py [--rows 16] [--dropped 8] [--length 256] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import GRPOTrainer  # noqa: E402

from smith.entry import train_config  # noqa: E402
from smith.train.args import grpo_args  # noqa: E402
from smith.train.data import prompt_rows  # noqa: E402
from smith.train.trainer import AXIS_REWARDS, SmithTrainer  # noqa: E402

WARM = ROOT / "smith" / "assets" / "tiny-warm"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--dropped", type=int, default=8, help="rows of dropped groups (tool_mask zeroed)")
    ap.add_argument("--length", type=int, default=256, help="completion tokens a row")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    cfg = train_config(["recipe=tiny"])
    args = grpo_args(cfg, Path(tempfile.mkdtemp(prefix="dropped-rows-")), on_gpu=False, num_processes=1)
    trainer = SmithTrainer(model=AutoModelForCausalLM.from_pretrained(WARM), reward_funcs=AXIS_REWARDS, args=args,
                           processing_class=AutoTokenizer.from_pretrained(WARM),
                           train_dataset=Dataset.from_list(prompt_rows(8)))
    trainer.current_gradient_accumulation_steps = 1
    g = torch.Generator().manual_seed(0)
    n, vocab = a.rows, trainer.model.config.vocab_size
    tool_mask = torch.ones(n, a.length, dtype=torch.long)
    tool_mask[n - a.dropped:] = 0
    is_build = torch.arange(n) % 2 == 0
    kept = tool_mask  # every completion token is the model's
    batch = {"prompt_ids": torch.randint(0, vocab, (n, 64), generator=g), "prompt_mask": torch.ones(n, 64).long(),
             "completion_ids": torch.randint(0, vocab, (n, a.length), generator=g),
             "completion_mask": torch.ones(n, a.length).long(), "tool_mask": tool_mask,
             "advantages": torch.randn(n, generator=g),
             "ref_per_token_logps": -torch.rand(n, a.length, generator=g) - 5,
             "is_build": is_build, "num_items_in_batch": kept.sum(),
             "num_items_build": kept[is_build].sum(), "num_items_use": kept[~is_build].sum()}
    trainer.model.train()

    def step(loss_fn) -> tuple[float, torch.Tensor]:
        trainer.model.zero_grad()
        t = time.perf_counter()
        loss_fn().backward()
        seconds = time.perf_counter() - t
        return seconds, torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])

    # TRL's loss on the very inputs smith's hands it (per-kind weights applied), only without leaving rows out
    def trl() -> torch.Tensor:
        total = batch["num_items_build"] + batch["num_items_use"]
        weight = torch.where(is_build, total / batch["num_items_build"], total / batch["num_items_use"])
        return GRPOTrainer._compute_loss(trainer, trainer.model, {**batch, "num_items_in_batch": total,
                                                                   "tool_mask": tool_mask * weight.unsqueeze(1)})

    def smith() -> torch.Tensor:
        return trainer._compute_loss(trainer.model, batch)

    _, want = step(trl)
    _, got = step(smith)
    assert torch.allclose(got, want, rtol=1e-3, atol=1e-6 * want.abs().max().item()), "the gradients differ"
    times: dict[str, list[float]] = {"trl": [], "smith": []}
    for _ in range(a.rounds):
        times["trl"].append(step(trl)[0])
        times["smith"].append(step(smith)[0])
    t_trl, t_smith = (statistics.median(times[k]) for k in ("trl", "smith"))
    print(f"dropped_rows kept={n - a.dropped}/{n} rows trl={t_trl:.3f} smith={t_smith:.3f} "
          f"speedup={t_trl / t_smith:.2f}")


if __name__ == "__main__":
    main()
