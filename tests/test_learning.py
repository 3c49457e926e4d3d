"""Issue 14: the main job learns. `recipe=tiny` from the warm-started policy, smith against a control whose
update is disabled (learning rate 0), same seeds and task stream, compared step by step.

A sign error in the advantages, a wrong loss mask or advantages routed to the wrong samples all pass the
unit tests; they fail this one (flipping the advantage sign was checked to fail it: docs/training.md).
Part of the default run: two 30-step runs side by side, about 5 minutes on 2 cores.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from smith.curves import read_metrics
from smith.train.progress import learning_score, paired_gap, window_means

from .conftest import ROOT

SEED = 0
STEPS = 30
LAST = 5
# smith - control (evaluation + use reward, last 5 steps) with the float32 warm model v6 (benchmarks/learning.py,
# docs/training.md): seed 0 +0.32 in two runs, +0.33 once finished rows left the decode batch (other samples);
# seeds 3 / 4 / 5 +0.55 / +0.16 / +0.15 (runs are not bit-reproducible: pool admissions arrive in grading-thread
# order). Warm model v7 (output drills see the question), seed 0: +0.40, use 0.04 -> 0.34 (control 0.11 -> 0.19).
# Warm model v8 with the self evaluator (the recipe since then), seeds 201-205: +0.21 to +0.57, but seed 0 gave
# +0.29 and +0.07 in two runs: a step's use reward is mostly its two tasks' (docs/training.md). So the test holds
# the evaluation axis alone to the margin: smith - control over the last 5 steps was +0.13 to +0.29 at seeds
# 201-205 and +0.17, +0.15 at seed 0.
MARGIN = 0.05


def _train(run: Path, steps: int, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    args = [sys.executable, "train.py", "recipe=tiny", f"seed={SEED}", f"tasks.seed={SEED}", f"max_steps={steps}",
            f"save_every={steps}", f"output_dir={run}", *extra]
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.learning  # two 30-step runs, about 4 minutes: CI's learning stage (.ci/run), not the default suite
def test_smith_beats_a_frozen_control(warm_model_dir, tmp_path):
    runs = {"smith": tmp_path / "smith", "control": tmp_path / "control"}
    procs = {arm: _train(run, STEPS, f"model.warm_dir={warm_model_dir}", *(["dapo.learning_rate=0"] if arm == "control"
                                                                    else [])) for arm, run in runs.items()}
    logs = {arm: p.communicate()[0] for arm, p in procs.items()}
    for arm, p in procs.items():
        assert p.returncode == 0, logs[arm][-3000:]
    rows = {arm: read_metrics(run) for arm, run in runs.items()}
    assert [r["step"] for r in rows["smith"]] == list(range(1, STEPS + 1))
    gap = paired_gap(rows["smith"], rows["control"], LAST, keys=("rewards/evaluation/mean",))
    scores = {arm: [round(learning_score(r), 2) for r in rs] for arm, rs in rows.items()}
    assert gap >= MARGIN, f"evaluation, smith - control over the last {LAST} steps = {gap:.3f} < {MARGIN}; {scores}"
    # the README's promise: the evaluation reward rises and tools pool up. The use half is in the paired gap but
    # not asserted on its own: a step's use reward is mostly its two tasks' (docs/training.md, "The tiny run")
    first, last = (window_means(rows["smith"], "rewards/evaluation/mean", f) for f in (True, False))
    assert last > first, (first, last)
    assert rows["smith"][-1]["pool/size"] > 0
    # SMITH's own loop: the self evaluator (the policy's synced copy) generated every step's grading
    assert all(r.get("tokens/evaluator/hf", 0) > 0 for r in rows["smith"]), rows["smith"][-1]
    # what a user sees: one line per step, the summary, the plot
    assert f"step  {STEPS}/{STEPS}" in logs["smith"] and "before -> after" in logs["smith"]
    assert (runs["smith"] / "curves.png").stat().st_size > 10_000


def test_main_job_prints_a_line_per_step_a_summary_and_curves(warm_model_dir, tmp_path):
    """The README's main command, shortened to 2 steps: what it prints and writes."""
    p = _train(tmp_path / "run", 2, f"model.warm_dir={warm_model_dir}")
    out = p.communicate()[0]
    assert p.returncode == 0, out[-3000:]
    lines = [x for x in out.splitlines() if x.startswith("step ")]
    assert [x.split()[1] for x in lines] == ["1/2", "2/2"], out[-3000:]
    assert all(k in lines[0] for k in ("form", "eval", "use", "use_acc", "pool", "dropped"))
    assert "before -> after" in out and "'loss'" not in out  # TRL's raw dicts stay in metrics.jsonl
    run = tmp_path / "run"
    assert (run / "curves.png").stat().st_size > 10_000 and (run / "checkpoint-2" / "adapter_config.json").exists()
    assert len(read_metrics(run)) == 2
    # the final adapter loads with plain PEFT from another working directory, without smith
    load = ("import sys; from peft import AutoPeftModelForCausalLM; "
            "m = AutoPeftModelForCausalLM.from_pretrained(sys.argv[1]); print(sorted(m.peft_config), m.active_adapter)")
    other = tmp_path / "elsewhere"
    other.mkdir()
    res = subprocess.run([sys.executable, "-c", load, str(run)], cwd=other, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": ""})
    assert res.returncode == 0 and res.stdout.split() == ["['default']", "default"], res.stderr[-2000:]
    card = (run / "README.md").read_text()
    assert "library_name: peft" in card and str(warm_model_dir.resolve()) in card and "2 steps" in card
    assert "before -> after" in card and (run / "tokenizer_config.json").exists()
