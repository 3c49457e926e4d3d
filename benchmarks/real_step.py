"""Where a SMITH step's seconds go on real weights: `recipe=smollm2-135m` (SmolLM2-135M-Instruct after its cold start,
self evaluator and judge) for a few steps on this machine, then per step the seconds of each phase and the policy's
tokens per second, read back from the run's metrics.jsonl.

Phases: generation (the policy's build and use episodes; a use episode's inner build is graded inside it), grading
(the builds': the self evaluator's and judge's turns and the sandbox), sync (evaluator copy), update (TRL's loss,
backward and optimizer step). The cold
start is built first, once, and not counted (it is cached). One line per step, then the means:

    real step <n> generation=<s> grading=<s> sync=<s> update=<s> total=<s> policy_tokens=<n> tokens/s=<r>
    real_step generation=<s> grading=<s> update=<s> total=<s> tokens/s=<r> (mean of <n> steps)

    python benchmarks/real_step.py [--steps 2] [--out DIR] [overrides ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from smith.entry import train_config  # noqa: E402
from smith.train import resolve_run_dir  # noqa: E402
from smith.train.run import train  # noqa: E402

PHASES = ("generation", "grading", "sync", "update")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--out", default=None, help="the run directory (default: a temporary one)")
    ap.add_argument("overrides", nargs="*", help="more train.py overrides, e.g. dapo.num_generations=4")
    a = ap.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="real-step-"))
    cfg = train_config(["recipe=smollm2-135m", f"max_steps={a.steps}", f"save_every={a.steps}",
                             f"output_dir={out}", *a.overrides])
    train(cfg, resolve_run_dir(cfg))
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    samples = cfg.dapo.prompts_per_step * cfg.dapo.num_generations
    totals = {p: 0.0 for p in (*PHASES, "total", "tokens")}
    for row in rows:
        phases = {p: float(row.get(f"time/{p}", 0.0)) for p in PHASES}
        tokens = float(row["tokens/completion"]) * samples  # the policy's own tokens (tool outputs excluded)
        total = sum(phases.values())
        for p, v in phases.items():
            totals[p] += v
        totals["total"] += total
        totals["tokens"] += tokens
        print(f"real step {row['step']} " + " ".join(f"{p}={v:.1f}" for p, v in phases.items())
              + f" total={total:.1f} policy_tokens={tokens:.0f} tokens/s={tokens / phases['generation']:.1f}",
              flush=True)
    n = len(rows)
    print(f"real_step generation={totals['generation'] / n:.1f} grading={totals['grading'] / n:.1f} "
          f"update={totals['update'] / n:.1f} total={totals['total'] / n:.1f} "
          f"tokens/s={totals['tokens'] / totals['generation']:.1f} (mean of {n} steps)")


if __name__ == "__main__":
    main()
