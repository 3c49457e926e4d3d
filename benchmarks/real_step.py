"""Where a SMITH step's seconds go on real weights, and how much faster the step is than the code before it:
`recipe=smollm2-135m` (SmolLM2-135M-Instruct after its cold start, self evaluator and judge) for a few steps on
this machine, per step the seconds of each phase and the policy's tokens per second, read back from the run's
metrics.jsonl.

Phases: generation (the policy's build and use episodes), grading (every build's, inner builds included: the self
evaluator's and judge's turns and the sandbox), sync (evaluator copy), update (TRL's
no-grad forwards, loss, backward and optimizer step). The cold start is built first, once, and not counted (it is
cached; both arms use the same one).

`--baseline REV` (default: bf01012, the code before the decode and update speed-ups) runs the same command at that
git revision first, in a temporary worktree, in the same run, so both arms see the same machine. The two arms
sample different episodes once their floats differ, so the per-arm tokens and tokens/s are printed beside the
seconds. Last, smith's decode loop against transformers `generate` on the same batch (the recipe's G rows of one
build prompt, greedy, the same tokens in both; each of smith's rounds on a fresh backend, so no earlier reply feeds its
drafts and no kept prefix its prefill): `decode_vs_generate` is generate's seconds over smith's.

    real step <arm> <n> generation=<s> grading=<s> sync=<s> update=<s> total=<s> policy_tokens=<n> tokens/s=<r>
    real_step generation=<s> grading=<s> update=<s> total=<s> tokens/s=<r> speedup=<step> generation_speedup=<x> \
decode_vs_generate=<x>

    python benchmarks/real_step.py [--steps 2] [--baseline REV | --baseline none] [--out DIR] [overrides ...]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from smith.entry import train_config  # noqa: E402
from smith.train import resolve_run_dir  # noqa: E402
from smith.train.run import train  # noqa: E402

PHASES = ("generation", "grading", "sync", "update")
BASELINE = "bf01012"


def read_steps(out: Path, samples: int, arm: str) -> dict[str, float]:
    """Print each step's phases from `out`/metrics.jsonl; return the means over the steps."""
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    totals = {p: 0.0 for p in (*PHASES, "total", "tokens")}
    for row in rows:
        phases = {p: float(row.get(f"time/{p}", 0.0)) for p in PHASES}
        tokens = float(row["tokens/completion"]) * samples  # the policy's own tokens (tool outputs excluded)
        for p, v in phases.items():
            totals[p] += v
        totals["total"] += sum(phases.values())
        totals["tokens"] += tokens
        print(f"real step {arm} {row['step']} " + " ".join(f"{p}={v:.1f}" for p, v in phases.items())
              + f" total={sum(phases.values()):.1f} policy_tokens={tokens:.0f}"
              + f" tokens/s={tokens / max(phases['generation'], 1e-9):.1f}", flush=True)
    means = {k: v / len(rows) for k, v in totals.items()}
    means["tokens/s"] = totals["tokens"] / max(totals["generation"], 1e-9)
    return means


def run_baseline(rev: str, steps: int, out: Path, overrides: list[str]) -> Path:
    """The same command with the code at `rev`, in a temporary git worktree of this repository, without a baseline
    of its own; the directory its run wrote (the script at `rev` may write its run to `out` or to `out`/now)."""
    tree = Path(tempfile.mkdtemp(prefix="real-step-baseline-")) / "tree"
    if subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), rev]).returncode:
        raise SystemExit(f"error: no git revision {rev} here to compare with (a shallow clone?); "
                         "give --baseline REV or --baseline none")
    script = tree / "benchmarks" / "real_step.py"
    alone = ["--baseline", "none"] if "--baseline" in script.read_text() else []
    try:
        subprocess.run([sys.executable, str(script), "--steps", str(steps), *alone, "--out", str(out), *overrides],
                       cwd=tree, check=True)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True)
    return out / "now" if (out / "now" / "metrics.jsonl").exists() else out


def decode_vs_generate(model_dir: str, rows: int, new_tokens: int) -> float:
    """generate's seconds over smith's loop on `rows` copies of one build prompt (greedy, the same tokens)."""
    import torch

    from smith.models.base import SamplingParams
    from smith.models.hf import HFBackend, transformers_generate
    from smith.rollout.prompts import build_messages
    from smith.tasks import items

    backend = HFBackend.from_pretrained(model_dir, progress=False)
    examples = random.Random(0).sample(items("lcm", "easy", 16, seed=0), 4)
    prompts = [backend.render(build_messages(examples))] * rows
    params = SamplingParams(max_new_tokens=new_tokens, temperature=0.0)
    ours = theirs = float("inf")
    for _ in range(2):  # the faster of two rounds each, alternating
        fresh = HFBackend(backend.model, backend.tokenizer, progress=False)  # no earlier replies, no kept prefixes
        t0 = time.perf_counter()
        mine = [g.completion_ids for g in fresh.continue_ids(prompts, params)]
        ours = min(ours, time.perf_counter() - t0)
        t0 = time.perf_counter()
        with torch.no_grad():
            reference = transformers_generate(backend, prompts, new_tokens)
        theirs = min(theirs, time.perf_counter() - t0)
        if mine != reference:
            raise SystemExit("smith's decode loop and generate disagree on the greedy tokens")
    print(f"decode {rows} rows x up to {new_tokens} tokens: smith {ours:.1f} s, generate {theirs:.1f} s", flush=True)
    return theirs / ours


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--baseline", default=BASELINE, help="a git revision to compare with, or 'none'")
    ap.add_argument("--out", default=None, help="where the runs go (default: a temporary directory)")
    ap.add_argument("overrides", nargs="*", help="more train.py overrides, e.g. dapo.num_generations=4")
    a = ap.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="real-step-"))
    # both arms share the built model and its cold start (paths relative to this checkout)
    shared = [f"model.real_dir={ROOT / 'checkpoints/.smollm2-135m'}", f"cold.dir={ROOT / 'checkpoints/.cold-start'}"]
    overrides = [*shared, *a.overrides]
    cfg = train_config(["recipe=smollm2-135m", f"max_steps={a.steps}", f"save_every={a.steps}",
                        f"output_dir={out / 'now'}", *overrides])
    samples = cfg.dapo.prompts_per_step * cfg.dapo.num_generations
    ran = run_baseline(a.baseline, a.steps, out / "before", overrides) if a.baseline != "none" else None
    train(cfg, resolve_run_dir(cfg))
    before = read_steps(ran, samples, "before") if ran is not None else None
    now = read_steps(out / "now", samples, "now")
    ratio = decode_vs_generate(cfg.cold.dir, cfg.dapo.num_generations, 128)
    line = (f"real_step generation={now['generation']:.1f} grading={now['grading']:.1f} update={now['update']:.1f} "
            f"total={now['total']:.1f} tokens/s={now['tokens/s']:.1f}")
    if before is not None:
        print(f"before ({a.baseline}): generation={before['generation']:.1f} grading={before['grading']:.1f} "
              f"update={before['update']:.1f} total={before['total']:.1f} tokens/s={before['tokens/s']:.1f} "
              f"(mean of {a.steps} steps)")
        line += (f" speedup={before['total'] / now['total']:.2f}"
                 f" generation_speedup={before['generation'] / now['generation']:.2f}")
    print(f"{line} decode_vs_generate={ratio:.2f}")


if __name__ == "__main__":
    main()
