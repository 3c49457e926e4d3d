"""Step time of `recipe=tiny` with every model call on the rollout's own thread (smith's flow) against the flow it
replaced: the builds graded on a worker thread (the self evaluator generating there) while the use episodes are
played, the generation calls of the two threads serialized by a lock, as `Rollout` did before.

Torch ops from a second thread get an OpenMP team of their own; on a few cores the two teams' spinning workers
slow every small op of both. Each arm runs `train.py recipe=tiny` in a fresh process (torch's default threads),
the arms alternating over rounds to share the machine's conditions; both see the same seed and task stream. The
median step time of each run (its first step, with imports and the sandbox's start, left out) is compared.
Last line: `rollout_threads threaded=<s> calling_thread=<s> speedup=<threaded / calling_thread>`.

    python benchmarks/rollout_threads.py [--steps 6] [--rounds 2] [--seed 101]
"""

from __future__ import annotations

import argparse
import json
import runpy
import statistics
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def threaded_flow() -> None:
    """Patch `Rollout.run` back to the flow it replaced (grading on a worker thread, overlapping use)."""
    from smith.models.hf import HFBackend
    from smith.rollout.episodes import Rollout

    lock = threading.Lock()
    generate = HFBackend.continue_ids

    def locked(self, *args, **kwargs):  # the old `_model_lock`: one model, its generation calls never interleave
        with lock:
            return generate(self, *args, **kwargs)

    def run(self, build, use, rng, step=0):
        self._step = step
        uses, episodes = self._use_starts(use, rng)
        inner = [e for e in episodes if not e.menu]
        samples, replies = self._build_replies(build, inner)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="smith-grade") as grader:
            grading = grader.submit(self._grade, samples, replies)
            self._start_inner_uses(inner, replies[len(build):], rng)
            self._play_uses(uses, episodes)
            grading.result()
        return samples[: len(build)] + uses

    HFBackend.continue_ids = locked
    Rollout.run = run


def step_times(run: Path) -> list[float]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["step_time"] for r in rows if "step_time" in r][1:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=101)
    ap.add_argument("--arm", choices=["threaded", "calling_thread"], help=argparse.SUPPRESS)  # a child run
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    train = ["recipe=tiny", f"max_steps={args.steps}", f"save_every={args.steps}", f"seed={args.seed}",
             f"tasks.seed={args.seed}"]
    if args.arm:
        if args.arm == "threaded":
            threaded_flow()
        sys.argv = ["train.py", *train, f"output_dir={args.out}"]
        runpy.run_path(str(ROOT / "train.py"), run_name="__main__")
        return
    medians: dict[str, list[float]] = {"threaded": [], "calling_thread": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for arm in medians:
                out = Path(tmp) / f"{arm}-{r}"
                subprocess.run([sys.executable, __file__, "--arm", arm, "--out", str(out), "--steps", str(args.steps),
                                "--seed", str(args.seed)], cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                times = step_times(out)
                medians[arm].append(statistics.median(times))
                each = ", ".join(f"{t:.1f}" for t in times)
                print(f"round {r} {arm:>14}: median step {medians[arm][-1]:.2f} s ({each})", flush=True)
    threaded, calling = (statistics.median(medians[a]) for a in ("threaded", "calling_thread"))
    print(f"rollout_threads threaded={threaded:.2f} calling_thread={calling:.2f} speedup={threaded / calling:.2f}")


if __name__ == "__main__":
    main()
