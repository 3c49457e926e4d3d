"""The SMITH paper's ablation table in miniature, on the warm-started tiny policy (`recipe=tiny`): each arm is the
recipe with one part of the method changed, trained at every seed on the same task stream (`seed` = `tasks.seed`),
two arms side by side, one thread each; then `eval.py suite=rg mode=build_use` on fresh items of the trained
(seen) categories with each final checkpoint.

    full        the recipe: self evaluator re-synced every `evaluator.sync_every` steps, its judge setting
    no-sync     evaluator.sync_every=0: the evaluator (and a self judge) stay the warm model
    no-judge    judge.kind=none
    k1          build.k_heldout=1: r_eval from one held-out question
    direct      evaluator.kind=direct: no evaluator model, the tool called with the question text
    build-only  build.fraction=1.0: no use rollouts (the paper's "Tool Create")

Prints per arm the learning gain (mean of the last 5 steps minus the first 5) of every reward axis, averaged over
seeds with their range, and the pooled held-out accuracy with n and a 95% Wilson interval, beside the paper's
rows (Qwen3-4B, RG seen / unseen); the last line:

    ablations seeds=<n> <arm>=<held-out accuracy> ...

    python benchmarks/ablations.py [--seeds 31 32 33] [--arms full no-sync ...] [--steps 30] [--eval-items 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from scipy.stats import binomtest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.learning import held_out_counts, train_arms  # noqa: E402
from smith.curves import read_metrics  # noqa: E402
from smith.rewards import AXES  # noqa: E402
from smith.train.progress import window_means  # noqa: E402

ARMS = {
    "full": [],
    "no-sync": ["evaluator.sync_every=0"],
    "no-judge": ["judge.kind=none"],
    "k1": ["build.k_heldout=1"],
    "direct": ["evaluator.kind=direct"],
    "build-only": ["build.fraction=1.0"],
}
PAPER = {  # the paper's ablation table, Qwen3-4B-Instruct: RG seen / unseen accuracy (%)
    "full": "86.6 / 78.3", "no-sync": "80.3 / 66.9", "no-judge": "82.6 / 67.8", "k1": "78.6 / 73.9",
    "direct": "-", "build-only": "73.9 / 68.8 (Tool Create, 4B evaluator)",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[31, 32, 33])
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--eval-items", type=int, default=10, help="held-out questions per category")
    ap.add_argument("--out", default=None, help="where runs go (default: a temporary directory)")
    ap.add_argument("overrides", nargs="*", help="extra train.py overrides for every arm")
    a = ap.parse_args()
    if a.steps < 10 or a.eval_items < 1:
        ap.error("--steps must be at least 10 (two 5-step windows) and --eval-items at least 1")
    out = Path(a.out or tempfile.mkdtemp(prefix="smith-ablations-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"runs in {out}")
    gains: dict[str, dict[str, list[float]]] = {arm: {axis: [] for axis in AXES} for arm in a.arms}
    held: dict[str, list[int]] = {arm: [0, 0] for arm in a.arms}
    for seed in a.seeds:
        for pair in (a.arms[i:i + 2] for i in range(0, len(a.arms), 2)):
            runs = train_arms(seed, a.steps, out, a.overrides, {arm: ARMS[arm] for arm in pair})
            for arm, run in runs.items():
                rows = read_metrics(run)
                for axis in AXES:
                    key = f"rewards/{axis}/mean"
                    first, last = window_means(rows, key, True), window_means(rows, key, False)
                    if first is not None and last is not None:
                        gains[arm][axis].append(last - first)
                correct, n = held_out_counts(run, a.steps, a.eval_items, out)
                held[arm][0] += correct
                held[arm][1] += n
                print(f"seed {seed} {arm}: held-out {correct}/{n}; gains "
                      + " ".join(f"{axis} {g[-1]:+.2f}" for axis, g in gains[arm].items() if g), flush=True)

    def gain(values: list[float]) -> str:
        if not values:
            return "-"
        return f"{sum(values) / len(values):+.2f} ({min(values):+.2f} .. {max(values):+.2f})"

    print(f"\n{len(a.seeds)} seeds ({', '.join(map(str, a.seeds))}), {a.steps} steps; gain = last 5 - first 5 steps, "
          "mean over seeds (range); held-out = build_use accuracy on the seen categories, pooled over seeds\n")
    print("| arm | " + " | ".join(f"{axis} gain" for axis in AXES) + " | held-out (n) [95% Wilson] | paper RG seen / "
          "unseen (Qwen3-4B) |")
    print("|---|" + "---|" * (len(AXES) + 2))
    for arm in a.arms:
        correct, n = held[arm]
        ci = binomtest(correct, n).proportion_ci(method="wilson")
        print(f"| {arm} | " + " | ".join(gain(gains[arm][axis]) for axis in AXES)
              + f" | {correct / n:.2f} ({n}) [{ci.low:.2f}, {ci.high:.2f}] | {PAPER[arm]} |")
    print(f"\nablations seeds={len(a.seeds)} " + " ".join(f"{arm}={held[arm][0] / held[arm][1]:.3f}" for arm in a.arms))


if __name__ == "__main__":
    main()
