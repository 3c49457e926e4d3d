"""Cold start: a short supervised fine-tune of a real model on smith's reply formats, before RL.

A pretrained instruct model that has never seen smith's protocols gives RL no format signal: SmolLM2-135M-Instruct
wrote no parseable build in 24 tries (docs/training.md, "Real weights"), so every group ties and is dropped. RL
papers with a cold start (ReTool, DeepSeek-R1) first fine-tune on a few formatted demonstrations; so does smith,
on the warm start's demonstrations (smith.train.warm) rendered in the model's own chat format (its template, its
tool-call syntax or smith's fallback for templates without tools). Only demonstrations the rollout would reward
are kept (correct tools, the right tool's output): a real model should learn the format, not the warm start's
designed mistakes. A LoRA adapter is trained (TRL's SFTTrainer) and merged, so RL starts from a plain checkpoint
with its own fresh policy adapter. Built once per (base model, settings), behind a file lock, swapped in whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from smith.builds import cached_build, read_marker
from smith.config import ColdConfig

COLD_VERSION = 1
MARKER = "smith_cold.json"
BASE_MARKERS = ("smith_real.json", "smith_warm.json", "smith_tiny.json")  # what identifies a locally built base


def base_identity(base: str | os.PathLike) -> str:
    """A locally built base by its build marker (the same weights wherever the directory lives); otherwise its path."""
    for name in BASE_MARKERS:
        marker = Path(base) / name
        if marker.is_file():
            return hashlib.sha256(marker.read_bytes()).hexdigest()[:16]
    return str(Path(base).resolve())


def cold_rows(tok: Any, s: ColdConfig, cache_dir: str | None) -> list[dict[str, list[int]]]:
    """`s.demos` SFT rows of rewarded demonstrations no longer than `s.max_tokens`, loss on the model's tokens."""
    from smith.train.warm import demonstrations, render

    rows: list[dict[str, list[int]]] = []
    drawn = 0
    while len(rows) < s.demos:
        batch, _ = demonstrations(4 * s.demos, s.seed + drawn, cache_dir=cache_dir)
        drawn += 1
        for demo in batch:
            if demo.right:
                ids, labels = render(demo, tok)
                if len(ids) <= s.max_tokens:
                    rows.append({"input_ids": ids, "labels": labels})
        if drawn > 8 and not rows:
            raise ValueError(f"no demonstration fits cold.max_tokens={s.max_tokens} with this tokenizer")
    return rows[: s.demos]


def build_cold_start(base: str | os.PathLike, path: str | os.PathLike, s: ColdConfig,
                     cache_dir: str | None = None, on_gpu: bool = False, dtype: str = "float32",
                     progress: bool = True) -> tuple[Path, bool]:
    """Build (or reuse) the cold-started model of `base` at `path`. Returns (path, built_now)."""
    key = {"version": COLD_VERSION, "base": base_identity(base), **asdict(s)}
    key.pop("dir", None)

    def build(tmp: Path) -> None:
        import torch
        from datasets import Dataset
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from smith.models.attention import SDPA_GQA
        from smith.train.args import sft_args
        from smith.train.warm import LearntPositionsSFTTrainer

        t0 = time.perf_counter()
        tok = AutoTokenizer.from_pretrained(base)
        rows = cold_rows(tok, s, cache_dir)
        torch_dtype = getattr(torch, dtype) if on_gpu else torch.float32
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch_dtype, attn_implementation=SDPA_GQA)
        model = get_peft_model(model, LoraConfig(r=s.lora_r, lora_alpha=2 * s.lora_r, lora_dropout=0.0,
                                                 target_modules="all-linear", task_type="CAUSAL_LM"))
        args = sft_args(tmp / "sft", on_gpu=on_gpu, dtype=dtype, num_train_epochs=s.epochs,
                        per_device_train_batch_size=s.batch_size, learning_rate=s.learning_rate,
                        lr_scheduler_type="cosine", warmup_steps=min(10, len(rows) // (4 * s.batch_size)),
                        weight_decay=0.0, logging_steps=5, seed=s.seed, data_seed=s.seed, disable_tqdm=not progress)
        trainer = LearntPositionsSFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                                            processing_class=tok)
        loss = trainer.train().training_loss
        merged = model.merge_and_unload()
        merged.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        shutil.rmtree(tmp / "sft", ignore_errors=True)
        lengths = [len(r["input_ids"]) for r in rows]
        info = {"key": key, "base_path": str(Path(base).resolve()), "train_loss": loss, "rows": len(rows),
                "mean_tokens": sum(lengths) / len(lengths),
                "learnt_tokens": sum(sum(x != -100 for x in r["labels"]) for r in rows),
                "seconds": round(time.perf_counter() - t0, 1)}
        (tmp / MARKER).write_text(json.dumps(info, indent=1))

    return cached_build(path, lambda p: read_marker(p, MARKER).get("key") == key, build, "cold start")
