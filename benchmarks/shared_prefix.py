"""A prefix that prompts of one call share, forwarded once (smith.models.hf, `HFBackend._share`), against each prompt
prefilled whole, on the grading calls of a step: `HFBackend.continue_ids` on the cold start (SmolLM2-135M-Instruct
after smith's cold start; build it with `benchmarks/real_step.py` or `python train.py recipe=smollm2-135m`), each arm
on a fresh backend playing the same calls in the same order:

- evaluator: one call of `--tools` demonstrated tools x `--questions` held-out questions each (the self evaluator's
  first turn: its system, the tool's schema, a question; questions to one tool share all but the question), greedy,
  128 tokens;
- judge: one call of the same tools' judge prompts (they share the judge's instructions), greedy, the judge's 256.

The baseline (sharing off) runs in the same process first. Both arms must give the same tokens:

    shared_prefix phase=<evaluator|judge> whole_s=<a> shared_s=<b> tokens=<n> forwarded=<whole>/<shared> speedup=<a/b>
    shared_prefix same_tokens=<bool> whole_s=<a> shared_s=<b> speedup=<a/b>

    python benchmarks/shared_prefix.py [--model checkpoints/.cold-start] [--tools 4] [--questions 4]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from drafts import cold_start, compare  # noqa: E402

from smith.config import JudgeConfig  # noqa: E402
from smith.errors import guarded  # noqa: E402
from smith.models.base import SamplingParams  # noqa: E402
from smith.models.hf import HFBackend  # noqa: E402
from smith.rewards.evaluation import EVALUATOR_SYSTEM  # noqa: E402
from smith.rewards.judge import judge_prompt  # noqa: E402
from smith.tasks import items  # noqa: E402
from smith.train.warm import demo_tool  # noqa: E402

CATEGORIES = ("lcm", "spell_backward", "prime_factorization")


def calls(backend: HFBackend, tools: int, questions: int) -> dict[str, tuple[list[list[int]], SamplingParams]]:
    """Each phase's call: (prompts, sampling)."""
    rng = random.Random(0)
    evaluator, judge = [], []
    for i in range(tools):
        category = CATEGORIES[i % len(CATEGORIES)]
        _, entry, _ = demo_tool(category, rng)
        for item in items(category, "hard", 8 + questions, seed=10 + i)[:questions]:
            evaluator.append(backend.render([{"role": "system", "content": EVALUATOR_SYSTEM},
                                             {"role": "user", "content": item.question}], [entry.tool.openai_tool()]))
        judge.append(backend.render(judge_prompt(entry.tool)))
    return {"evaluator": (evaluator, SamplingParams(max_new_tokens=128, temperature=0.0)),
            "judge": (judge, SamplingParams(max_new_tokens=JudgeConfig().max_new_tokens, temperature=0.0))}


def play(model_dir: str, share: bool, tools: int, questions: int) -> dict[str, tuple[float, int, list[list[int]]]]:
    """Per phase: (seconds, tokens forwarded, every reply's tokens)."""
    backend = HFBackend.from_pretrained(model_dir, progress=False)
    if not share:
        backend._prefixes.MIN_TRUNK = 10**9
    forwarded = [0]
    backend.model.register_forward_pre_hook(
        lambda _m, _a, kw: forwarded.__setitem__(0, forwarded[0] + kw["input_ids"].numel()), with_kwargs=True)
    out = {}
    for phase, (prompts, params) in calls(backend, tools, questions).items():
        forwarded[0] = 0
        t0 = time.perf_counter()
        replies = [g.completion_ids for g in backend.continue_ids(prompts, params)]
        out[phase] = (time.perf_counter() - t0, forwarded[0], replies)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "checkpoints" / ".cold-start"),
                    help="a model SPEC (smith.models); default: the cold start's directory")
    ap.add_argument("--tools", type=int, default=4, help="distinct tools a step grades")
    ap.add_argument("--questions", type=int, default=4, help="held-out questions per tool (K)")
    a = ap.parse_args()
    model_dir = cold_start(a.model)
    compare("shared_prefix", ("whole", "shared"), "forwarded", play(model_dir, False, a.tools, a.questions),
            play(model_dir, True, a.tools, a.questions))

if __name__ == "__main__":
    guarded(main)
