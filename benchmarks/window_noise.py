"""How often a policy that never changes fails the collapse check by chance (issue 42: the use reward over a run's
last 5 steps at most 0.15 below its best 5-step mean), as a function of the use tasks a step draws.

A learning-rate-0 run's policy is fixed, so its use reward moves only with the task stream. This reads the use
episodes of such runs (their `rollouts.jsonl`), takes each use task's mean reward over its G episodes, and replays
`--runs` runs of `--steps` steps with N tasks a step drawn from those tasks (with replacement, N / categories from
each category, as the training stream's stratified order draws them): per N, the share of
runs that pass and the chance that 5 independent seeds all pass. It prints each given run's own drop first.

    python benchmarks/window_noise.py RUN [RUN ...] [--tasks 2 4 8 16 32 64] [--steps 30] [--runs 2000]

Last line: `window_noise tasks=<the smallest N> pass=<share> pass5=<share^5> tasks_for_pass5=<the smallest N whose
5-seed pass chance is at least --target, or none>`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from smith.curves import number, read_metrics  # noqa: E402
from smith.train.progress import late_drop, use_drop  # noqa: E402

LIMIT = 0.15  # issue 42's collapse threshold


def task_means(run: Path) -> dict[str, list[float]]:
    """Per category, per use task of the run (a step's prompt key), the mean use reward of its scored episodes."""
    groups: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    for line in (run / "rollouts.jsonl").read_text().splitlines():
        row = json.loads(line)
        reward = number(row["rewards"].get("use")) if row.get("kind") == "use" else None
        if reward is not None:
            groups[(row["category"], row["step"], row["key"])].append(reward)
    out: dict[str, list[float]] = defaultdict(list)
    for (category, _, _), v in groups.items():
        out[category].append(sum(v) / len(v))
    return dict(out)


def pass_share(tasks: dict[str, list[float]], per_step: int, steps: int, runs: int, rng: random.Random) -> float:
    """The share of `runs` simulated runs whose use reward's late drop is at most LIMIT; a step draws `per_step` tasks,
    the same number from every category (as the training stream's stratified order does)."""
    per_category = max(per_step // len(tasks), 1)
    passed = 0
    for _ in range(runs):
        rewards = []
        for _ in range(steps):
            drawn = [t for pool in tasks.values() for t in rng.choices(pool, k=per_category)]
            rewards.append(sum(drawn) / len(drawn))
        passed += late_drop(rewards) <= LIMIT
    return passed / runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories of learning-rate-0 (control) runs")
    ap.add_argument("--tasks", type=int, nargs="+", default=[2, 4, 8, 16, 32, 64], help="use tasks a step")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--runs", type=int, default=2000, dest="n_runs", help="simulated runs per N")
    ap.add_argument("--target", type=float, default=0.9, help="the 5-seed pass chance asked for")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    tasks: dict[str, list[float]] = defaultdict(list)
    for run in a.runs:
        if not (run / "rollouts.jsonl").is_file():
            raise SystemExit(f"error: {run} has no rollouts.jsonl (a train.py run directory)")
        own = task_means(run)
        drop = use_drop(read_metrics(run))
        counts = ", ".join(f"{c} {len(v)} (mean {sum(v) / len(v):.2f})" for c, v in sorted(own.items()))
        print(f"{run}: use tasks {counts or 'none'}; its own use reward: best 5-step mean minus the last 5 {drop:.2f} "
              f"({'passes' if drop <= LIMIT else 'fails'})")
        for category, values in own.items():
            tasks[category] += values
    if not tasks:
        raise SystemExit("error: the runs hold no scored use episodes")
    rng = random.Random(a.seed)
    print(f"\n{sum(map(len, tasks.values()))} use tasks of {len(tasks)} categories; {a.n_runs} simulated runs of "
          f"{a.steps} steps per row")
    print("| use tasks a step | runs passing | 5 seeds all passing |\n|---|---|---|")
    shares = {}
    for n in a.tasks:
        shares[n] = pass_share(tasks, n, a.steps, a.n_runs, rng)
        print(f"| {n} | {shares[n]:.2f} | {shares[n] ** 5:.2f} |")
    enough = next((n for n in a.tasks if shares[n] ** 5 >= a.target), None)
    first = a.tasks[0]
    print(f"window_noise tasks={first} pass={shares[first]:.3f} pass5={shares[first] ** 5:.3f} "
          f"tasks_for_pass5={enough if enough is not None else 'none'}")


if __name__ == "__main__":
    main()
