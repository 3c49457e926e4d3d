"""The prepared one-GPU check (`scripts/gpu_check.sh`): 3 SMITH steps on a randomly initialised model with the
Qwen3-4B architecture (recipes/models/qwen3-4b.json; no weights are downloaded), bf16, HF backend, LoRA r 64,
8 generations, the synced evaluator/judge copy; then a table of where the time and memory went, also as JSON.

Why random weights: the check measures the pipeline's cost at the paper's model size on a machine with no
internet, not learning. The tokenizer is smith's tiny BPE (2,048 tokens) beside the 151,936-row embedding, so most
sampled ids decode to nothing and episodes run to their token budget: the generation numbers are worst-case.
`--dry-run`: the same script on CPU at tiny dimensions (CI runs it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "smith" / "recipes" / "models" / "qwen3-4b.json"
TINY_DIMS = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 32, "max_window_layers": 2}


def build_random_model(path: Path, dry_run: bool) -> Path:
    """The Qwen3-4B-architecture model (tiny dims on a dry run), random init, saved with smith's tiny tokenizer."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from smith.models.tiny import corpus, train_tokenizer

    tok = train_tokenizer(corpus(0), 2048)
    spec = json.loads(CONFIG.read_text())
    spec.update(bos_token_id=None, eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"), pad_token_id=tok.pad_token_id)
    if dry_run:
        spec.update(TINY_DIMS, vocab_size=len(tok))
    config = Qwen3Config(**{k: v for k, v in spec.items() if k not in ("architectures", "torch_dtype")})
    torch.manual_seed(0)
    device, dtype = ("cpu", torch.float32) if dry_run else ("cuda", torch.bfloat16)
    with torch.device(device):
        model = Qwen3ForCausalLM._from_config(config, dtype=dtype)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def overrides(model_dir: Path, run_dir: Path, dry_run: bool, steps: int) -> list[str]:
    """The recipe: tiny-random's pipeline at the paper's LoRA and group size, self evaluator and judge synced
    every step (so the sync is timed twice in 3 steps). The sandbox is strict where bubblewrap is installed, else
    process isolation (GPU images often lack bubblewrap)."""
    return ["recipe=tiny-random", f"model.name_or_path={model_dir}", f"output_dir={run_dir}",
            f"max_steps={steps}", f"save_every={steps}", "lora.r=64", "lora.alpha=128", "dapo.num_generations=8",
            "dapo.prompts_per_step=2", "evaluator.kind=self", "judge.kind=self", "evaluator.sync_every=1",
            f"sandbox.isolation={'strict' if shutil.which('bwrap') else 'process'}",
            f"tasks.cache_dir={run_dir.parent / 'items'}",
            *(["device=cpu", "model.dtype=float32", "dapo.max_completion_length=32", "judge.max_new_tokens=16"]
              if dry_run else ["device=cuda", "model.dtype=bfloat16", "dapo.max_completion_length=256",
                               "judge.max_new_tokens=64", "dapo.gradient_checkpointing=true"])]


def report(run_dir: Path, peak_gb: float | None, total_s: float, samples: int) -> dict[str, Any]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    syncs = [r["time/sync"] for r in rows if r.get("time/sync")]  # the steps that re-synced the evaluator copy
    ckpt = max(run_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    steps = []
    for r in rows:
        generated = (r.get("completions/mean_length", 0.0) - r.get("tokens/tool_output", 0.0)) * samples
        steps.append({"step": r["step"], "generation_s": r.get("time/generation"), "grading_s": r.get("time/grading"),
                      "update_s": r.get("time/update"), "step_s": r.get("step_time"),
                      "generated_tokens": generated,
                      "tokens_per_s": generated / r["time/generation"] if r.get("time/generation") else None})
    return {"steps": steps, "evaluator_sync_s": syncs, "peak_gpu_memory_gb": peak_gb, "total_s": total_s,
            "checkpoint": ckpt.name,
            "checkpoint_mb": sum(f.stat().st_size for f in ckpt.rglob("*") if f.is_file()) / 2**20}


def table(result: dict[str, Any]) -> str:
    def f(x: Any) -> str:
        return "-" if x is None else f"{x:.2f}" if isinstance(x, float) else str(x)

    lines = ["step | generation s | grading s | update s | step s | generated tokens | tokens/s",
             "-----|--------------|-----------|----------|--------|------------------|---------"]
    for s in result["steps"]:
        lines.append(" | ".join(f(s[k]) for k in ("step", "generation_s", "grading_s", "update_s", "step_s",
                                                  "generated_tokens", "tokens_per_s")))
    lines += ["", f"evaluator sync s: {', '.join(f(x) for x in result['evaluator_sync_s']) or '-'}",
              f"peak GPU memory GB: {f(result['peak_gpu_memory_gb'])}",
              f"checkpoint {result['checkpoint']}: {result['checkpoint_mb']:.1f} MB",
              f"total s (model build and load included): {result['total_s']:.1f}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny dimensions (CI)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--work", default=str(ROOT / "checkpoints" / ".gpu-check"), help="model and run directory")
    ap.add_argument("--out", default=None, help="JSON result (default: <work>/gpu_check.json)")
    a = ap.parse_args(argv)
    if not a.dry_run and not torch.cuda.is_available():
        raise SystemExit("error: no CUDA device; run with --dry-run for the CPU-size check")
    t0 = time.perf_counter()
    work = Path(a.work)
    run_dir = work / ("run-dry" if a.dry_run else "run")
    model_dir = build_random_model(work / ("model-dry" if a.dry_run else "model"), a.dry_run)

    from smith.entry import compose
    from smith.train.run import train

    cfg = compose("config", overrides(model_dir, run_dir, a.dry_run, a.steps), ("recipe",))
    train(cfg, run_dir)
    peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() and not a.dry_run else None
    result = report(run_dir, peak, time.perf_counter() - t0, 2 * 8)
    result["device"] = torch.cuda.get_device_name() if peak is not None else "cpu (dry run)"
    out = Path(a.out) if a.out else work / "gpu_check.json"
    out.write_text(json.dumps(result, indent=2))
    print(table(result))
    print(f"gpu_check: wrote {out}")
    return result


if __name__ == "__main__":
    main()
