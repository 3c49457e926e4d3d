"""Per-role protocol table of a policy (smith.train.roles): builds, the self evaluator, the judge, each on the
rollout's own code paths, on questions and tools of a stream of their own. Last line:

    roles build_parsed=<x> build_right=<x> use_right=<x> use_no_call=<x> evaluator_called=<x> evaluator_agrees=<x>
          judge_parsed=<x> judge_auc=<x>

    python benchmarks/roles.py [--model SPEC] [--tools 8] [--questions 8] [--categories lcm prime_factorization]

SPEC is anything `eval.py model=` takes (a model dir, a LoRA run dir, tiny, smollm2-135m); the default is the
shipped warm-started tiny policy.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandbox import Sandbox  # noqa: E402
from smith.models import load_backend  # noqa: E402
from smith.train.roles import role_table  # noqa: E402
from smith.train.warm import CATEGORIES, SHIPPED  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="model SPEC (default: the shipped warm model)")
    ap.add_argument("--tools", type=int, default=8, help="build prompts and demonstration tools per category")
    ap.add_argument("--questions", type=int, default=8, help="held-out questions per tool")
    ap.add_argument("--categories", nargs="+", default=list(CATEGORIES))
    ap.add_argument("--temperature", type=float, default=0.7, help="the builds' (the evaluator and judge: greedy)")
    a = ap.parse_args()
    if min(a.tools, a.questions) < 1:
        ap.error("--tools and --questions must be at least 1")
    spec = a.model or str(SHIPPED)
    t0 = time.perf_counter()
    with Sandbox(isolation="strict") as sb:
        table = role_table(load_backend(spec), sb, tuple(a.categories), str(ROOT / "checkpoints" / ".task-cache"),
                           a.tools, a.questions, a.temperature)
    print(f"{spec}, {', '.join(a.categories)}: {time.perf_counter() - t0:.0f} s")
    print("| role | share |\n|---|---|")
    for name, value in table.rows():
        print(f"| {name} | {value} |")
    print(f"roles build_parsed={table.build_parsed:.3f} build_right={table.build_right:.3f} "
          f"use_right={table.use_right:.3f} use_no_call={table.use_no_call:.3f} "
          f"evaluator_called={table.evaluator_called:.3f} evaluator_agrees={table.evaluator_agrees:.3f} "
          f"judge_parsed={table.judge_parsed:.3f} judge_auc={table.judge_auc:.3f}")


if __name__ == "__main__":
    main()
