"""The model evaluator of one SMITH step: each build's 16 held-out questions in batches of their own (one
`evaluate_with_model` per build, as smith graded up to this benchmark), against every build's questions in
shared batches (`evaluate_many`, what `Rollout.grade_builds` runs now). Then the decode loop alone on the
shared batch's first turn: smith's HF loop, whose finished rows leave the batch, against transformers
`generate` (greedy, the same prompts), which decodes every row until the last one ends. The evaluator is the
warm-started tiny policy on smith's HF decode loop, the tools are real demonstrated tools of `lcm` and
`prime_factorization` graded in the real sandbox on real hard-band items.

Both evaluator arms run the same episodes greedily, so only the batching differs (printed: the episodes must
match); rounds alternate the arms to cancel machine noise, medians are compared. Last two lines:

    decode loop rows=<n> smith_s=<a> generate_s=<b> speedup=<b/a> same_tokens=<share of identical rows>
    evaluator batch builds=<n> questions=<k> per_build_s=<a> shared_s=<b> speedup=<a/b>

    python benchmarks/evaluator_batch.py [--builds 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandbox import Limits, Sandbox  # noqa: E402
from smith.models.base import SamplingParams  # noqa: E402
from smith.models.hf import HFBackend  # noqa: E402
from smith.models.hf import transformers_generate as hf_generate  # noqa: E402
from smith.rewards.evaluation import EVALUATOR_SYSTEM, evaluate_many, evaluate_with_model  # noqa: E402
from smith.tasks import items  # noqa: E402
from smith.train.warm import build_warm_model, demo_tool  # noqa: E402

CATEGORIES = ("lcm", "prime_factorization")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--builds", type=int, default=8, help="builds in the step (recipe=qwen3-4b shape: 8 a rank)")
    ap.add_argument("--questions", type=int, default=16, help="held-out questions per build (K)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=SamplingParams.max_new_tokens, help="as the rollout's")
    a = ap.parse_args()
    if min(a.builds, a.questions, a.rounds, a.max_new_tokens) < 1:
        ap.error("--builds, --questions, --rounds and --max-new-tokens must be at least 1")
    cache = str(ROOT / "checkpoints" / ".task-cache")
    warm = build_warm_model(cache_dir=cache)[0]
    backend = HFBackend.from_pretrained(warm, progress=False)
    rng = random.Random(0)
    bank = {c: items(c, "hard", a.questions * a.builds, seed=1, cache_dir=cache) for c in CATEGORIES}
    jobs = []
    for b in range(a.builds):
        category = CATEGORIES[b % len(CATEGORIES)]
        spec = demo_tool(category, rng)[1].tool
        jobs.append((spec, bank[category][b * a.questions:(b + 1) * a.questions]))
    params = SamplingParams(max_new_tokens=a.max_new_tokens, temperature=0.0)
    limits = Limits(timeout_s=5.0, memory_mb=512)

    def per_build(sb: Sandbox) -> list:
        return [evaluate_with_model(spec, its, backend, sb, limits, params=params) for spec, its in jobs]

    def shared(sb: Sandbox) -> list:
        return evaluate_many(jobs, backend, sb, limits, params=params)

    prompts = [backend.render([{"role": "system", "content": EVALUATOR_SYSTEM},
                               {"role": "user", "content": it.question}], [spec.openai_tool()])
               for spec, its in jobs for it in its]

    def smith_loop() -> list[list[int]]:
        return [g.completion_ids for g in backend.continue_ids(prompts, params)]

    def transformers_generate() -> list[list[int]]:
        return hf_generate(backend, prompts, a.max_new_tokens)

    times: dict[str, list[float]] = {"smith_loop": [], "generate": [], "per_build": [], "shared": []}
    decoded = {}
    for _ in range(a.rounds):
        for name, arm in (("smith_loop", smith_loop), ("generate", transformers_generate)):
            t0 = time.perf_counter()
            decoded[name] = arm()
            times[name].append(time.perf_counter() - t0)
    same_tokens = sum(x == y for x, y in zip(decoded["smith_loop"], decoded["generate"], strict=True)) / len(prompts)
    outcomes = {}
    with Sandbox(isolation="strict") as sb:
        for _ in range(a.rounds):
            for name, arm in (("per_build", per_build), ("shared", shared)):
                t0 = time.perf_counter()
                results = arm(sb)
                times[name].append(time.perf_counter() - t0)
                outcomes[name] = [[(t.status, t.turns, len(t.calls)) for t in r.traces] for r in results]
    same = outcomes["per_build"] == outcomes["shared"]
    print(f"same episodes in both arms (status, turns, calls of every question): {same}")
    calls = sum(c for r in outcomes["shared"] for _, _, c in r)
    print(f"{a.builds} builds x {a.questions} questions, {calls} tool calls; seconds per round: "
          + "; ".join(f"{k} {' '.join(f'{t:.1f}' for t in v)}" for k, v in times.items()))
    loop, gen = (statistics.median(times[k]) for k in ("smith_loop", "generate"))
    print(f"decode loop rows={len(prompts)} smith_s={loop:.2f} generate_s={gen:.2f} speedup={gen / loop:.2f} "
          f"same_tokens={same_tokens:.2f}")
    slow, fast = (statistics.median(times[k]) for k in ("per_build", "shared"))
    print(f"evaluator batch builds={a.builds} questions={a.questions} per_build_s={slow:.2f} shared_s={fast:.2f} "
          f"speedup={slow / fast:.2f}")


if __name__ == "__main__":
    main()
