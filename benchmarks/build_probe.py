"""Where can RL learn to build? Per category, a model's sampled builds (the rollout's build prompt, 4 easy examples,
temperature 0.7) and one greedy build, each graded directly (the tool called on 8 hard questions, no evaluator
model). A category where every sample scores 0 gives a build group no evaluation signal; one where every sample
is right gives none either. Used to choose the real-weights learning run's categories and cold start
(docs/training.md, "Real weights").

    python benchmarks/build_probe.py MODEL CATEGORY [CATEGORY ...] [--samples 8] [--questions 8]

MODEL is anything `eval.py model=` takes. Per category one line, `CATEGORY sampled [r_eval or None per sample]
greedy <r_eval>` (None: the reply did not parse), then as the last line

    build_probe right=<right on every question / samples> parsed=<parsed / samples> greedy_right=<n / categories>
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandbox import Sandbox  # noqa: E402
from smith.models import load_backend  # noqa: E402
from smith.models.base import SamplingParams  # noqa: E402
from smith.rewards.evaluation import evaluate_direct  # noqa: E402
from smith.rollout.prompts import build_messages  # noqa: E402
from smith.tasks import items  # noqa: E402
from smith.toolspec import parse_response  # noqa: E402

SEED = 7


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="model SPEC")
    ap.add_argument("categories", nargs="+")
    ap.add_argument("--samples", type=int, default=8, help="sampled builds per category")
    ap.add_argument("--questions", type=int, default=8, help="hard questions each build is graded on")
    ap.add_argument("--max-new-tokens", type=int, default=400)
    a = ap.parse_args()
    cache = str(ROOT / "checkpoints" / ".task-cache")
    policy = load_backend(a.model)
    rng = random.Random(SEED)  # one stream over the categories, in the order given
    right = parsed = greedy_right = 0
    with Sandbox(isolation="strict") as sb:
        for category in a.categories:
            t0 = time.perf_counter()
            easy = items(category, "easy", 64, seed=SEED, cache_dir=cache)
            hard = items(category, "hard", 64, seed=SEED, cache_dir=cache)
            prompts = [build_messages(rng.sample(easy, 4)) for _ in range(a.samples)]
            questions = rng.sample(hard, a.questions)
            sampled = policy.chat(prompts, params=SamplingParams(max_new_tokens=a.max_new_tokens, temperature=0.7,
                                                                 seed=SEED))
            greedy = policy.chat(prompts[:1], params=SamplingParams(max_new_tokens=a.max_new_tokens, temperature=0.0))
            scores = []
            for reply in [*sampled, *greedy]:
                p = parse_response(reply.text)
                scores.append(round(evaluate_direct(p.spec, questions, sb).r_eval, 2) if p.ok else None)
            right += sum(s == 1.0 for s in scores[:-1])
            parsed += sum(s is not None for s in scores[:-1])
            greedy_right += scores[-1] == 1.0
            print(f"{category} sampled {scores[:-1]} greedy {scores[-1]} {time.perf_counter() - t0:.0f}s", flush=True)
    n = a.samples * len(a.categories)
    print(f"build_probe right={right}/{n} parsed={parsed}/{n} greedy_right={greedy_right}/{len(a.categories)}")


if __name__ == "__main__":
    main()
