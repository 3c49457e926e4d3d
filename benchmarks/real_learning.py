"""Does SMITH make real weights better? `recipe=smollm2-135m` (SmolLM2-135M-Instruct after its cold start) trained
per seed twice from the one cold start, side by side (one thread each): smith with the paper's loop (the self
evaluator re-synced every step, refill) and a learning-rate-0 control on the same task stream, with the same random
draws for the same sample (the rollout's common random numbers, `smith.models.base.row_streams`). Then held-out
`build_use` accuracy (`eval.py suite=rg mode=build_use`, 2 distractor tools as in training) of both final
checkpoints and of the cold start alone, on the trained (seen) categories and on `--unseen` ones, with Wilson 95%
intervals. The held-out builds are greedy by default. `eval.py`'s build_use mode builds one tool per category and
asks all of the category's questions with it, so a cold start whose greedy tools are already right (SmolLM2's on the
seen categories) leaves no room to be beaten. `--heldout-temperature 0.7 --heldout-samples R` samples instead, at the
training temperature: every held-out evaluation runs R times, run i with eval seed i and question seed 1000 + i
(`suite.seed`), so each run has its own sampled tools, easy examples and questions (R x `--eval-items` fresh questions
a category; the arms' run i share theirs), and the counts are pooled. A sampled tool is right or wrong on nearly all
of its questions, so the tool is the unit of chance: besides the Wilson interval over answers (which treats them as
independent) every accuracy has a bootstrap interval over its tools, and many samples of few questions each
measure more than few of many. Since the arms' run i share their questions, each seed also prints a sign test over
the tools, run by run (how often smith's tool answered more of them than the cold start's, how often fewer), and
the end one over all the seeds' tools (approximate: every seed's pairs share the cold start's one set of tools).
The unseen categories are reported, not a target: they are evaluated once. A control whose final adapter is still
zero (learning rate 0 leaves the fresh LoRA's B matrices at 0) holds the cold start's weights, so it is not evaluated
again: it takes the cold start's counts (the script checks the adapter and says so). The evaluations run two at a
time, one thread each.

The judge is off by default (`judge.kind=none`): after the cold start its scores barely separate right from
wrong tools (AUC 0.56, docs/training.md, "Real weights"), so its axis would add noise. Per seed it prints the
per-axis first / last 5 steps of both arms and the accuracies, then the per-seed table of docs/training.md, and
as its last line

    real learning paired_min=<x> heldout_smith=<a> heldout_control=<b> heldout_cold=<c> seeds=<n>

paired = mean over the last 5 steps of smith's (evaluation + use reward) minus the control's, its minimum over
the seeds; heldout_* = right / asked on the seen categories, pooled over the seeds (the cold start's once).
Not run in CI: on 2 CPU cores a seed of 20 steps takes about 2 hours (smith's arm; the control is faster).

    python benchmarks/real_learning.py [--seeds 501 502 503] [--steps 20] [--eval-items 20] [--unseen-items 10]
        [--unseen CATEGORY ...] [--heldout-temperature 0] [--heldout-samples 1] [--recipe smollm2-135m]
        [--cold-demos 96] [--out DIR] [overrides ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from learning import held_out_cells, total, train_arms  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from scipy.stats import binomtest, bootstrap  # noqa: E402

from smith.curves import read_metrics  # noqa: E402
from smith.entry import train_config  # noqa: E402
from smith.evals.rg.config import RgConfig  # noqa: E402
from smith.train.progress import paired_gap, window_means  # noqa: E402

# the judge off (above); refill; the self evaluator re-synced every step, graded on the output of the call it makes
# in its first turn (an answer turn would only repeat it); K = 4; no KL term (DAPO's, and a quarter of a CPU update);
# the update in micro-batches of 2 completions (8 at once held 22 GB of activations and was killed on a 24 GB machine)
LOOP = ["judge.kind=none", "dapo.dynamic_sampling=refill", "evaluator.kind=self", "evaluator.sync_every=1",
        "evaluator.max_turns=1", "build.k_heldout=4", "dapo.beta=0", "dapo.gradient_accumulation_steps=4"]


QUESTION_SEED = RgConfig().seed  # held-out run i draws its questions and examples with QUESTION_SEED + i


def rate(cells: list[tuple[int, int]]) -> float:
    right, n = total(cells)
    return right / max(n, 1)


def accuracy(cells: list[tuple[int, int]]) -> str:
    """Right / asked with its Wilson 95% interval (answers as independent), then a percentile bootstrap 95%
    interval that resamples the tools (`cells`: one tool's (right, asked) each)."""
    right, n = total(cells)
    if n == 0:
        return "- (0 asked)"
    ci = binomtest(right, n).proportion_ci(confidence_level=0.95, method="wilson")
    text = f"{right / n:.2f} [{ci.low:.2f}, {ci.high:.2f}] ({right}/{n})"
    if len({r / max(k, 1) for r, k in cells}) > 1:  # one tool, or all alike: nothing to resample
        boot = bootstrap(tuple(zip(*cells, strict=True)), lambda r, k: r.sum() / k.sum(), paired=True,
                         vectorized=False, method="percentile", random_state=0)
        text += f", by tool [{boot.confidence_interval.low:.2f}, {boot.confidence_interval.high:.2f}]"
    return text + f" over {len(cells)} tool{'s' * (len(cells) != 1)}"


def sampled_cells(pool: ThreadPoolExecutor, run: Path, steps: int, items: int, out: Path,
                  categories: list[str] | None, name: str, temperature: float, samples: int,
                  model: str | None = None) -> list:
    """`held_out_cells` at `temperature` over `samples` runs submitted to `pool`: run i with eval seed i and
    question seed QUESTION_SEED + i, its own sampled tools, examples and questions; `tools` lists their cells."""
    return [pool.submit(held_out_cells, run, steps, items, out, model, categories,
                        name + (f"-s{i}" if samples > 1 else ""),
                        [f"suite.temperature={temperature}", f"seed={i}", f"suite.seed={QUESTION_SEED + i}"])
            for i in range(samples)]


def sign_test(mine: list[tuple[int, int]], theirs: list[tuple[int, int]]) -> str:
    """Tool by tool (run i's category c in both arms: the same questions and examples), how often the first arm's
    tool answered more of them and how often fewer, with the exact two-sided sign test's p over those pairs (ties
    dropped): the held-out comparison with the tool as the unit, since the arms' tools mostly coincide."""
    if len(mine) != len(theirs):
        raise ValueError(f"{len(mine)} tools against {len(theirs)}: the arms' runs do not pair up")
    more = sum(a > b for (a, _), (b, _) in zip(mine, theirs, strict=True))
    fewer = sum(a < b for (a, _), (b, _) in zip(mine, theirs, strict=True))
    p = binomtest(more, more + fewer).pvalue if more + fewer else 1.0
    shown = f"={p:.2f}" if p >= 0.01 else f"={p:.3f}" if p >= 0.001 else "<0.001"
    return f"more right on {more} of {len(mine)} tools, fewer on {fewer}, sign test p{shown}"


def tools(futures: list) -> list[tuple[int, int]]:
    """Every (right, asked) cell of the runs: one per tool built."""
    return [cell for f in futures for cell in f.result().values()]


def unchanged(run: Path, steps: int) -> bool:
    """Whether the run's final policy adapter is still the identity (every LoRA B matrix zero): its weights are then
    the starting model's."""
    path = run / f"checkpoint-{steps}" / "adapter_model.safetensors"
    return path.exists() and all(not t.any() for k, t in load_file(path).items() if "lora_B" in k)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[501, 502, 503])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--eval-items", type=int, default=20, help="held-out questions per seen category")
    ap.add_argument("--unseen-items", type=int, default=10, help="held-out questions per unseen category")
    ap.add_argument("--unseen", nargs="*", default=["count_bits", "bitwise_arithmetic"],
                    help="unseen categories to report")
    ap.add_argument("--heldout-temperature", type=float, default=0.0,
                    help="the held-out evaluations' sampling temperature (0: greedy)")
    ap.add_argument("--heldout-samples", type=int, default=1,
                    help="runs of each held-out evaluation, each with its own sampled tools (needs a temperature)")
    ap.add_argument("--recipe", default="smollm2-135m")
    ap.add_argument("--cold-demos", type=int, default=96,
                    help="the cold start's size (its own cold.dir): 96 leaves RL room, 192 writes the tools already; "
                         "0: the recipe's own")
    ap.add_argument("--out", default=None, help="where runs go (default: a temporary directory)")
    ap.add_argument("overrides", nargs="*", help="train.py overrides for both arms, after the loop's own")
    a = ap.parse_args()
    if a.heldout_samples < 1 or (a.heldout_samples > 1 and a.heldout_temperature == 0):
        raise SystemExit("error: --heldout-samples must be 1, or more with a --heldout-temperature above 0 (greedy "
                         "evaluations repeat the same tools)")
    out = Path(a.out or tempfile.mkdtemp(prefix="smith-real-learning-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"runs in {out}", flush=True)
    own = [f"cold.demos={a.cold_demos}", f"cold.dir=checkpoints/.cold-start-{a.cold_demos}"] if a.cold_demos else []
    extra = [*LOOP, *own, *a.overrides]
    conf = train_config([f"recipe={a.recipe}", *extra])
    start = str(Path(conf.cold.dir).resolve()) if conf.cold.demos > 0 else conf.model.name_or_path
    totals: dict[str, list[tuple[int, int]]] = {arm: [] for arm in ("smith", "control", "cold")}
    cold_beside: list[tuple[int, int]] = []  # the cold start's cells again for each seed, beside smith's
    paired, table = [], []
    cold: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for seed in a.seeds:
        runs = train_arms(seed, a.steps, out, extra, recipe=a.recipe)
        rows = {arm: read_metrics(run) for arm, run in runs.items()}
        paired.append(paired_gap(rows["smith"], rows["control"]))
        print(f"\nseed {seed}: mean of the first / last 5 steps (smith | control)")
        for key in ("rewards/format/mean", "rewards/evaluation/mean", "rewards/use/mean", "use/correct", "kl"):
            cells = [f"{window_means(rows[arm], key, True) or 0:.2f} -> {window_means(rows[arm], key, False) or 0:.2f}"
                     for arm in rows]
            print(f"  {key:<26} {cells[0]:>14} | {cells[1]:>14}")
        same = unchanged(runs["control"], a.steps)
        if same:
            print("  the control's adapter is still zero: its held-out counts are the cold start's")
        acc, jobs = {}, {}
        splits = {"seen": (None, a.eval_items, a.heldout_samples), "unseen": (a.unseen, a.unseen_items, 1)}
        with ThreadPoolExecutor(2) as pool:
            for split, (categories, items, samples) in splits.items():
                sampling = (a.heldout_temperature, samples)
                for arm, run in runs.items():
                    if not (arm == "control" and same):
                        jobs[arm, split] = sampled_cells(pool, run, a.steps, items, out, categories,
                                                         f"{run.name}-{split}", *sampling)
                if ("cold", split) not in cold:  # the cold start's own, once
                    jobs["cold", split] = sampled_cells(pool, runs["smith"], a.steps, items, out, categories,
                                                        f"cold-{split}", *sampling, model=start)
            for key, futures in jobs.items():
                (cold if key[0] == "cold" else acc)[key] = tools(futures)
        for split in splits:
            acc["cold", split] = cold["cold", split]
            if same:
                acc["control", split] = cold["cold", split]
        for arm in ("smith", "control"):
            totals[arm] += acc[arm, "seen"]
        cold_beside += acc["cold", "seen"]
        print(f"  paired (smith - control, evaluation + use, last 5): {paired[-1]:+.3f}")
        for split in ("seen", "unseen"):
            print(f"  held-out build_use, {split}: " + "  ".join(f"{arm} {accuracy(acc[arm, split])}"
                                                                for arm in ("smith", "control", "cold")))
        for arm in ("cold",) if same else ("control", "cold"):
            print(f"  held-out seen, smith against {arm}, run by run: "
                  + sign_test(acc["smith", "seen"], acc[arm, "seen"]))
        table.append(f"| {seed} | {paired[-1]:+.2f} | " + " | ".join(
            " / ".join(f"{rate(acc[arm, split]):.2f}" for arm in ("smith", "control", "cold"))
            for split in ("seen", "unseen")) + " |")
    print("\nheld-out seen, smith against the cold start, run by run over the seeds: "
          + sign_test(totals["smith"], cold_beside))
    totals["cold"] = cold["cold", "seen"]
    print("\n| seed | paired (smith - control, last 5) | held-out seen (smith / control / cold) | "
          "held-out unseen (smith / control / cold) |")
    print("|---|---|---|---|")
    print("\n".join(table))
    print("\nheld-out build_use on the seen categories, pooled: "
          + "  ".join(f"{arm} {accuracy(totals[arm])}" for arm in totals))
    rates = {arm: rate(cells) for arm, cells in totals.items()}
    print(f"real learning paired_min={min(paired):.3f} heldout_smith={rates['smith']:.3f} "
          f"heldout_control={rates['control']:.3f} heldout_cold={rates['cold']:.3f} seeds={len(a.seeds)}")


if __name__ == "__main__":
    main()
