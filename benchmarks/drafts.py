"""Speculative decoding from n-gram drafts (smith.models.hf, `_Drafts`) against one token a step, on the roles' real
prompts: `HFBackend.continue_ids` on the cold start (SmolLM2-135M-Instruct after smith's cold start; build it with
`benchmarks/real_step.py` or `python train.py recipe=smollm2-135m`), each arm on a fresh backend (no earlier replies)
playing the same calls in the same order, as a step plays them:

- build: three calls of G rows of one build prompt (`lcm`, `spell_backward`, `lcm`; 4 easy examples each),
  temperature 0.7, top-p 0.95, 320 tokens, as the recipe samples builds;
- evaluator: two calls of 8 rows, each a demonstrated tool's schema and a held-out question, greedy, 128 tokens,
  as the self evaluator answers.

The baseline (`draft_tokens=0`) runs in the same process first. Both arms must give the same tokens (each token is
drawn from its own uniform, so the drafts change the number of forwards, not the tokens):

    drafts phase=<build|evaluator> plain_s=<a> drafted_s=<b> tokens=<n> forwards=<plain>/<drafted> speedup=<a/b>
    drafts same_tokens=<bool> plain_s=<a> drafted_s=<b> speedup=<a/b>

    python benchmarks/drafts.py [--model checkpoints/.cold-start] [--rows 4] [--draft-tokens 4]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from smith.errors import ConfigError, guarded  # noqa: E402
from smith.models import resolve_model  # noqa: E402
from smith.models.base import SamplingParams  # noqa: E402
from smith.models.hf import HFBackend  # noqa: E402
from smith.rewards.evaluation import EVALUATOR_SYSTEM  # noqa: E402
from smith.rollout.prompts import build_messages  # noqa: E402
from smith.tasks import items  # noqa: E402
from smith.train.warm import demo_tool  # noqa: E402


def calls(backend: HFBackend, rows: int) -> dict[str, list[tuple[list[list[int]], SamplingParams]]]:
    """Each phase's calls: (prompts, sampling)."""
    build = SamplingParams(max_new_tokens=320, temperature=0.7, top_p=0.95)
    out: dict[str, list[tuple[list[list[int]], SamplingParams]]] = {"build": [], "evaluator": []}
    for i, category in enumerate(("lcm", "spell_backward", "lcm")):
        examples = random.Random(i).sample(items(category, "easy", 16, seed=i), 4)
        out["build"].append(([backend.render(build_messages(examples))] * rows,
                             SamplingParams(build.max_new_tokens, build.temperature, build.top_p, seed=i)))
    rng = random.Random(0)
    for i in range(2):
        prompts = []
        for category in ("lcm", "spell_backward", "prime_factorization", "lcm") * 2:
            _, entry, _ = demo_tool(category, rng)
            question = items(category, "hard", 8, seed=10 + i)[len(prompts)].question
            prompts.append(backend.render([{"role": "system", "content": EVALUATOR_SYSTEM},
                                           {"role": "user", "content": question}], [entry.tool.openai_tool()]))
        out["evaluator"].append((prompts, SamplingParams(max_new_tokens=128, temperature=0.0)))
    return out


def play(model_dir: str, draft_tokens: int, rows: int) -> dict[str, tuple[float, int, list[list[int]]]]:
    """Per phase: (seconds, forwards, every reply's tokens)."""
    backend = HFBackend.from_pretrained(model_dir, progress=False, draft_tokens=draft_tokens)
    forwards = [0]
    backend.model.register_forward_pre_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))
    out = {}
    for phase, phase_calls in calls(backend, rows).items():
        forwards[0], replies = 0, []
        t0 = time.perf_counter()
        for prompts, params in phase_calls:
            replies += [g.completion_ids for g in backend.continue_ids(prompts, params)]
        out[phase] = (time.perf_counter() - t0, forwards[0], replies)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "checkpoints" / ".cold-start"),
                    help="a model SPEC (smith.models); default: the cold start's directory")
    ap.add_argument("--rows", type=int, default=4, help="the recipe's G")
    ap.add_argument("--draft-tokens", type=int, default=4)
    a = ap.parse_args()
    model_dir = cold_start(a.model)
    compare("drafts", ("plain", "drafted"), "forwards", play(model_dir, 0, a.rows),
            play(model_dir, a.draft_tokens, a.rows))


def cold_start(spec: str) -> str:
    """The model directory of `--model` (a SPEC, by default the cold start's directory, which must be built)."""
    if "/" in spec and not (Path(spec) / "config.json").is_file():
        raise ConfigError(f"no model at {spec}: build the cold start first (python benchmarks/real_step.py)")
    return str(resolve_model(spec)[0])


def compare(name: str, arms: tuple[str, str], counted: str, base: dict[str, tuple[float, int, list[list[int]]]],
            other: dict[str, tuple[float, int, list[list[int]]]]) -> None:
    """Two arms that played the same calls (per phase: seconds, a count, every reply's tokens): a line per phase,
    then whether the tokens are the same and the whole ratio."""
    for phase in base:
        (s0, n0, r0), (s1, n1, _) = base[phase], other[phase]
        print(f"{name} phase={phase} {arms[0]}_s={s0:.1f} {arms[1]}_s={s1:.1f} tokens={sum(map(len, r0))} "
              f"{counted}={n0}/{n1} speedup={s0 / s1:.2f}", flush=True)
    same = all(base[p][2] == other[p][2] for p in base)
    s0, s1 = sum(v[0] for v in base.values()), sum(v[0] for v in other.values())
    print(f"{name} same_tokens={same} {arms[0]}_s={s0:.1f} {arms[1]}_s={s1:.1f} speedup={s0 / s1:.2f}")


if __name__ == "__main__":
    guarded(main)
