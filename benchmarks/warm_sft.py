"""Warm-start SFT speed: smith's settings against TRL's defaults on the warm model's own rows (copy drills,
protocol demonstrations), a fresh 1.2M-parameter Qwen3 each time. Three arms:

- trl_default: `SFTTrainer` as shipped (chunked log-prob loss, gradient checkpointing on);
- ungrouped: `LearntPositionsSFTTrainer` with one forward per batch (the model's own cross-entropy, the LM head
  only on learnt positions), gradient checkpointing off, float32 (`smith.train.args.sft_args`): the warm build
  up to this benchmark's third arm;
- smith: what `build_warm_model` runs: the same, in `length_groups` forwards of rows of similar length, each cut
  to its longest row.

All arms train on the same batches, so their final losses must match (printed): the speed-ups do not change the
maths. (Training on batches grouped by length, a different sampler, was faster again but learnt the copy drills
worse.)

Rounds alternate the arms to cancel machine noise; medians are compared. Last line (the slower stage):

    warm sft steps/s smith=<a> ungrouped=<b> trl_default=<c> ratio=<a/c> grouping=<a/b>

    python benchmarks/warm_sft.py [--steps 30] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAYON_NUM_THREADS", "1")

from datasets import Dataset  # noqa: E402
from trl import SFTTrainer  # noqa: E402

from smith.models.chat_format import chat_format  # noqa: E402
from smith.train.args import sft_args  # noqa: E402
from smith.train.warm import (  # noqa: E402
    LearntPositionsSFTTrainer,
    WarmSettings,
    copy_drills,
    demo_rows,
    demonstrations,
    drill_rows,
    fresh_model,
    warm_tokenizer,
)


def rows(tok, n: int, cache_dir: str) -> dict[str, list[dict[str, list[int]]]]:
    return {"copy drills (batch 32)": drill_rows(copy_drills(n * 32, chat_format(tok), cache_dir=cache_dir), tok),
            "demonstrations (batch 8)": demo_rows(demonstrations(n * 8, cache_dir=cache_dir)[0], tok)}


class Ungrouped(LearntPositionsSFTTrainer):
    length_groups = 1


ARMS = {"trl_default": (SFTTrainer, {"gradient_checkpointing": True}), "ungrouped": (Ungrouped, {}),
        "smith": (LearntPositionsSFTTrainer, {})}


def train(arm: str, tok, data: list, batch: int, out: str) -> tuple[float, float]:
    model = fresh_model(tok, WarmSettings())
    cls, extra = ARMS[arm]
    args = sft_args(out, on_gpu=False, num_train_epochs=1, per_device_train_batch_size=batch, learning_rate=2e-3,
                    seed=0, data_seed=0, disable_tqdm=True, logging_steps=10_000, **extra)
    trainer = cls(model=model, args=args, train_dataset=Dataset.from_list(data), processing_class=tok)
    start = time.perf_counter()
    loss = trainer.train().training_loss
    return len(data) / batch / (time.perf_counter() - start), loss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30, help="optimiser steps per trainer and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cache-dir", default=str(ROOT / "checkpoints" / ".task-cache"))
    a = ap.parse_args()
    demos, _ = demonstrations(200, cache_dir=a.cache_dir)
    tok = warm_tokenizer(demos, WarmSettings().vocab_size)
    worst = None
    with tempfile.TemporaryDirectory() as out:
        for stage, data in rows(tok, a.steps, a.cache_dir).items():
            batch = 32 if stage.startswith("copy") else 8
            speed: dict[str, list[float]] = {arm: [] for arm in ARMS}
            losses = {}
            for _ in range(a.rounds):
                for arm in ARMS:
                    steps_per_s, losses[arm] = train(arm, tok, data, batch, out)
                    speed[arm].append(steps_per_s)
            m = {arm: statistics.median(v) for arm, v in speed.items()}
            ratio, grouping = m["smith"] / m["trl_default"], m["smith"] / m["ungrouped"]
            print(f"{stage}: steps/s " + " ".join(f"{arm}={v:.2f}" for arm, v in m.items())
                  + f" ratio={ratio:.2f} grouping={grouping:.2f}; final loss "
                  + " ".join(f"{arm}={loss:.4f}" for arm, loss in losses.items()), flush=True)
            if worst is None or ratio < worst[3]:
                worst = (m["smith"], m["ungrouped"], m["trl_default"], ratio, grouping)
    print(f"warm sft steps/s smith={worst[0]:.2f} ungrouped={worst[1]:.2f} trl_default={worst[2]:.2f} "
          f"ratio={worst[3]:.2f} grouping={worst[4]:.2f}")

if __name__ == "__main__":
    main()
