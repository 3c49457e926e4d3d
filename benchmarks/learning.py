"""Does SMITH's trainer improve the policy? `recipe=tiny` trained twice per seed: smith, and a control
whose update is disabled (learning rate 0). Both arms of a seed see the same task stream (`seed` and
`tasks.seed` both set to the seed), so they are compared step by step; the two arms of a seed run side by
side, one thread each, so they share the machine's conditions.

Prints per seed the per-axis means over the first and last 5 steps of both arms, then the held-out
accuracy of each final checkpoint on fresh items of the trained categories (`eval.py suite=rg
mode=build_use`, 2 distractor tools as in training), and as its last line

    learning gain smith=<x> control=<y> paired=<z> use_min=<w>

gain = mean (evaluation + use reward) over the last 5 steps minus over the first 5; paired = mean over the
last 5 steps of (smith - control); each averaged over seeds; use_min = the lowest per-seed use reward of smith's
last 5 steps; use_drop_max = the largest per-seed fall of smith's use reward from its best 5-step mean to its last
5 steps (a late collapse); kl_max = the largest per-seed mean KL to the reference over smith's last 5 steps.
Before it, the per-seed table of docs/training.md.

    python benchmarks/learning.py [--seeds 0 1 2] [--steps 30] [--eval-items 10] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from smith.curves import (  # noqa: E402
    read_metrics,
)
from smith.entry import train_config  # noqa: E402
from smith.train.progress import COLUMNS, learning_gain, paired_gap, use_drop, window_means  # noqa: E402
from smith.train.resume import CONFIG, config_changes  # noqa: E402


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}


def train_arms(seed: int, steps: int, out: Path, extra: list[str],
               arms: dict[str, list[str]] | None = None, recipe: str = "tiny") -> dict[str, Path]:
    """`recipe` once per arm (its own overrides after `extra`), the arms side by side, one thread each; by
    default smith and its learning-rate-0 control. An arm already finished there is reused, one stopped part way is
    resumed (train.py refuses either if its settings differ)."""
    arms = arms if arms is not None else {"smith": [], "control": ["dapo.learning_rate=0"]}
    runs = {arm: out / f"seed{seed}-{arm}" for arm in arms}
    procs = {}
    for arm, run in runs.items():
        overrides = [f"recipe={recipe}", f"seed={seed}", f"tasks.seed={seed}", f"max_steps={steps}",
                     f"save_every={steps}", f"output_dir={run}", *extra, *arms[arm]]
        state = state_of(run, steps, overrides)
        if state == "finished":
            print(f"seed {seed}, {arm}: reusing the finished run in {run}", flush=True)
            continue
        if state == "stopped":
            print(f"seed {seed}, {arm}: resuming the unfinished run in {run}", flush=True)
        args = [sys.executable, "train.py", *overrides, *([f"resume={run}"] if state == "stopped" else [])]
        log = (out / f"seed{seed}-{arm}.log").open("a" if state == "stopped" else "w")
        procs[arm] = subprocess.Popen(args, cwd=ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT)
    for arm, p in procs.items():
        if p.wait():
            raise SystemExit(f"error: training {arm} for seed {seed} failed; see {out / f'seed{seed}-{arm}.log'}")
    return runs


def state_of(run: Path, steps: int, overrides: list[str]) -> str:
    """"finished": `run` holds its final checkpoint, trained with these settings (a rerun, say for another held-out
    evaluation, reuses it; one trained with other settings is an error, not a silent reuse); "stopped": started and
    not finished (a session's end; it resumes from its last checkpoint, train.py checking its settings); "new"."""
    if not (run / f"checkpoint-{steps}").is_dir():
        return "stopped" if (run / CONFIG).exists() else "new"
    if diff := config_changes(train_config(overrides), run):
        raise SystemExit(f"error: {run} holds a finished run with other settings ({'; '.join(diff[:3])}); "
                         "use another --out")
    return "finished"


def held_out_accuracy(run: Path, steps: int, items: int, out: Path) -> float:
    correct, n = held_out_counts(run, steps, items, out)
    return correct / n


def held_out_counts(run: Path, steps: int, items: int, out: Path, model: str | None = None,
                    categories: list[str] | None = None, name: str = "",
                    overrides: list[str] | None = None) -> tuple[int, int]:
    """(right, asked) of `held_out_cells`, summed over the categories."""
    return total(held_out_cells(run, steps, items, out, model, categories, name, overrides).values())


def total(cells: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """(right, asked) summed over (right, asked) cells."""
    cells = list(cells)
    return sum(r for r, _ in cells), sum(n for _, n in cells)


def held_out_cells(run: Path, steps: int, items: int, out: Path, model: str | None = None,
                   categories: list[str] | None = None, name: str = "",
                   overrides: list[str] | None = None) -> dict[str, tuple[int, int]]:
    """{category: (right, asked)} on the run's own categories (or `categories`), with as many distractors as its use
    menus had (at most 2), of the run's final checkpoint (or `model`); `overrides` go to eval.py last. build_use
    builds one tool per category, so a category's cell is one tool's."""
    dest = out / f"{name or run.name}-rg"
    # null: every seen category (smith.train.data)
    trained = yaml.safe_load((run / "config.yaml").read_text())["tasks"]["categories"] or []
    categories = categories or trained
    args = [sys.executable, "eval.py", "suite=rg", "mode=build_use", f"model={model or run / f'checkpoint-{steps}'}",
            f"suite.categories=[{','.join(categories)}]" if categories else "suite.categories=null",
            "suite.splits=[seen,unseen]" if categories else "suite.splits=[seen]",
            f"suite.n_distractors={min(2, len(trained) - 1) if trained else 2}", f"limit={items}", f"output_dir={dest}",
            *(overrides or [])]
    subprocess.run(args, cwd=ROOT, env=_env(), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cells = json.loads((dest / "summary.json").read_text())["details"]["categories"]
    return {cat: (c["correct"], c["n"]) for cat, c in cells.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--eval-items", type=int, default=10,
                    help="held-out questions per category (0: no held-out evaluation, its column reads nan)")
    ap.add_argument("--out", default=None, help="where runs go (default: a temporary directory)")
    ap.add_argument("overrides", nargs="*", help="extra train.py overrides for both arms")
    a = ap.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="smith-learning-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"runs in {out}")
    gains: dict[str, list[float]] = {"smith": [], "control": []}
    paired, use_last, drops, kls = [], {"smith": [], "control": []}, [], []
    table = []
    for seed in a.seeds:
        runs = train_arms(seed, a.steps, out, a.overrides)
        rows = {arm: read_metrics(run) for arm, run in runs.items()}
        print(f"\nseed {seed}: mean of the first / last 5 steps")
        print(f"  {'axis':<10}" + "".join(f"{arm:>22}" for arm in rows))
        for key, label in COLUMNS:
            cells = []
            for arm in rows:
                first, last = window_means(rows[arm], key, True), window_means(rows[arm], key, False)
                cells.append("-" if first is None else f"{first:.2f} -> {last:.2f}")
            print(f"  {label:<10}" + "".join(f"{c:>22}" for c in cells))
        for arm in rows:
            gains[arm].append(learning_gain(rows[arm]))
            use_last[arm].append(window_means(rows[arm], "rewards/use/mean", False) or 0.0)
        paired.append(paired_gap(rows["smith"], rows["control"]))
        drop = {arm: use_drop(rows[arm]) for arm in rows}
        drops.append(drop["smith"])
        kls.append(window_means(rows["smith"], "kl", False) or 0.0)
        acc = {arm: held_out_accuracy(run, a.steps, a.eval_items, out) if a.eval_items else float("nan")
               for arm, run in runs.items()}
        print(f"  gain (eval+use, last5 - first5): smith {gains['smith'][-1]:+.3f}  control "
              f"{gains['control'][-1]:+.3f}  paired (smith - control, last 5) {paired[-1]:+.3f}")
        print(f"  use reward, last 5: smith {use_last['smith'][-1]:.3f}  control {use_last['control'][-1]:.3f}; "
              f"best 5-step mean minus the last 5: smith {drop['smith']:.3f}  control {drop['control']:.3f} (the "
              f"task stream's share); KL, last 5: {kls[-1]:.3f}")
        print(f"  held-out build_use accuracy ({a.eval_items} per category): smith {acc['smith']:.3f}  "
              f"control {acc['control']:.3f}")
        table.append(f"| {seed} | {paired[-1]:+.2f} | {gains['smith'][-1]:+.2f} / {gains['control'][-1]:+.2f} | "
                     + " | ".join(" / ".join(f"{window_means(rows[arm], key, True):.2f} -> "
                                             f"{window_means(rows[arm], key, False):.2f}" for arm in rows)
                                  for key in ("rewards/evaluation/mean", "rewards/use/mean"))
                     + f" | {drop['smith']:.2f} / {drop['control']:.2f} | {kls[-1]:.3f} | {acc['smith']:.2f} / "
                       f"{acc['control']:.2f} |")

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs)

    print("\n| seed | paired (smith - control, last 5) | gain smith / control | evaluation, first -> last 5 "
          "(smith / control) | use, first -> last 5 (smith / control) | use, best 5 - last 5 (smith / control) | "
          "KL, last 5 | "
          "held-out accuracy (smith / control) |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(table))
    print(f"\nlearning gain smith={mean(gains['smith']):.3f} control={mean(gains['control']):.3f} "
          f"paired={mean(paired):.3f} use_min={min(use_last['smith']):.3f} use_drop_max={max(drops):.3f} "
          f"kl_max={max(kls):.3f}")


if __name__ == "__main__":
    main()
