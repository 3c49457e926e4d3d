"""A use episode's first turn decoded beside the step's builds (`Rollout.run`: one batch, each row to its own
limit) against the two batches one after the other (the builds to their longest reply, then the use turn), on the
same model, prompts and greedy tokens: B rows of a real build prompt (4 easy reasoning-gym items, up to
`--build-tokens`) and B rows of a use prompt offering a demonstrated tool (up to `--turn-tokens`). Rounds alternate
the arms, each on a fresh backend (no prefix kept from the previous round); medians are compared:

    use_ahead rows=<b>+<b> separate_s=<a> together_s=<c> speedup=<a/c>

    python benchmarks/use_ahead.py [--model checkpoints/.cold-start] [--category lcm] [--rows 4]
        [--build-tokens 640] [--turn-tokens 128] [--rounds 3]
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

from smith.errors import guarded  # noqa: E402
from smith.models import resolve_model  # noqa: E402
from smith.models.base import SamplingParams  # noqa: E402
from smith.models.hf import HFBackend  # noqa: E402
from smith.rollout.prompts import build_messages, use_messages  # noqa: E402
from smith.tasks import items  # noqa: E402
from smith.train.warm import demo_tool  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="checkpoints/.cold-start", help="a model directory or SPEC (smith.models)")
    ap.add_argument("--category", default="lcm")
    ap.add_argument("--rows", type=int, default=4, help="rows of each prompt (the recipe's G)")
    ap.add_argument("--build-tokens", type=int, default=640)
    ap.add_argument("--turn-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    backend = HFBackend.from_pretrained(resolve_model(a.model)[0])
    fresh = lambda: HFBackend(backend.model, backend.tokenizer, progress=False)  # noqa: E731
    tool = demo_tool(a.category, random.Random(0))[1].tool
    question = items(a.category, "hard", 1, seed=0)[0].question
    build = backend.render(build_messages(items(a.category, "easy", 4, seed=0)))
    use = backend.render(use_messages(question), [tool.openai_tool(tool.function_name)])
    greedy = SamplingParams(max_new_tokens=a.build_tokens, temperature=0.0)
    turn = SamplingParams(max_new_tokens=a.turn_tokens, temperature=0.0)
    times: dict[str, list[float]] = {"separate": [], "together": []}
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        b = fresh()
        separate = b.continue_ids([build] * a.rows, greedy) + b.continue_ids([use] * a.rows, turn)
        times["separate"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        together = fresh().continue_ids([build] * a.rows + [use] * a.rows, greedy,
                                        limits=[a.build_tokens] * a.rows + [a.turn_tokens] * a.rows)
        times["together"].append(time.perf_counter() - t0)
        if [g.completion_ids for g in separate] != [g.completion_ids for g in together]:
            raise SystemExit("the two arms decoded different tokens")
    lengths = sorted({len(g.completion_ids) for g in separate})
    print(f"tokens per row: {lengths} (builds and use turns)", flush=True)
    sep, tog = statistics.median(times["separate"]), statistics.median(times["together"])
    print(f"use_ahead rows={a.rows}+{a.rows} separate_s={sep:.1f} together_s={tog:.1f} speedup={sep / tog:.2f}")


if __name__ == "__main__":
    guarded(main)
