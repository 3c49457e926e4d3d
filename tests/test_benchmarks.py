"""The benchmark scripts run: each performance claim in the docs is one of them, so a script that no longer starts
(the trainer one did, after the prompt keys changed) would leave a claim nobody can re-measure. Small sizes; the
numbers are not asserted (these machines are noisy), only that each prints its ratio line. generation.py,
warm_sft.py and learning.py take minutes even at small sizes (learning.py runs under tests/test_learning.py)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("script", "args", "ratio"), [
    ("trainer_overhead.py", ["--steps", "2", "--rounds", "1"], r"trainer step ratio smith/trl=([0-9.]+)"),
    ("sandbox_throughput.py", ["--calls", "40", "--workers", "2"], r"speedup=([0-9.]+)"),
    ("lots_scoring.py", ["--requests", "1", "--repeats", "1"], r"lots scoring speedup=([0-9.]+)"),
    ("evaluator_batch.py", ["--builds", "2", "--questions", "4", "--rounds", "1", "--max-new-tokens", "64"],
     r"speedup=([0-9.]+)"),
    ("kv_cache.py", ["--model", "tiny", "--batch", "2", "--context", "32", "--steps", "4", "--rounds", "1"],
     r"kv_cache batch=2 context=32 dynamic_ms=[0-9.]+ in_place_ms=[0-9.]+ ratio=([0-9.]+)"),
    ("decode_width.py", ["--model", "tiny", "--batch", "1", "2", "--context", "16", "--steps", "2", "--rounds", "1"],
     r"decode_width weights_mb=[0-9]+ stream_ms=[0-9.]+ widest=2 step_ratio=[0-9.]+ rows_ratio=([0-9.]+) "
     r"lora_overhead=[0-9.]+$"),
    ("use_ahead.py", ["--model", "tiny", "--rows", "2", "--build-tokens", "24", "--turn-tokens", "8", "--rounds", "1"],
     r"use_ahead rows=2\+2 separate_s=[0-9.]+ together_s=[0-9.]+ speedup=([0-9.]+)$"),
    ("attention.py", ["--model", "tiny", "--batch", "2", "3", "--context", "16", "--steps", "2", "--rounds", "1"],
     r"attention batches=2,3 speedup=[0-9.]+ speedup_widest=[0-9.]+ update_speedup=([0-9.]+)$"),
    ("merged_lora.py", ["--model", "tiny", "--rows", "2", "--new-tokens", "8", "--rounds", "1"],
     r"merged_lora rows=2 unmerged_s=[0-9.]+ merged_s=[0-9.]+ tokens=[0-9]+ same_tokens=True copy_s=[0-9.]+ "
     r"rewrite_s=[0-9.]+ speedup=([0-9.]+)$"),
    ("drafts.py", ["--model", "tiny", "--rows", "2"],
     r"drafts same_tokens=True plain_s=[0-9.]+ drafted_s=[0-9.]+ speedup=([0-9.]+)$"),
    ("shared_prefix.py", ["--model", "tiny", "--tools", "2", "--questions", "2"],
     r"shared_prefix same_tokens=True whole_s=[0-9.]+ shared_s=[0-9.]+ speedup=([0-9.]+)$"),
    ("startup.py", ["--module", "smith.errors", "--rounds", "1"],
     r"startup module=smith.errors compiled_s=[0-9.]+ from_source_s=[0-9.]+ speedup=([0-9.]+)"),
])
def test_benchmark_prints_its_ratio(script, args, ratio):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.findall(ratio, proc.stdout)
    assert found, proc.stdout[-2000:]
    assert all(math.isfinite(float(x)) and float(x) > 0 for x in found)


def test_step_tokens_prints_each_roles_tokens():
    """benchmarks/step_tokens.py at a small shape, HF backend: a row per role and the last line."""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "step_tokens.py"), "--backends", "hf", "--steps",
                           "1", "dapo.prompts_per_step=2", "dapo.num_generations=2", "build.k_heldout=2",
                           "use.max_turns=2", "judge.max_new_tokens=16", "dapo.max_completion_length=256"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "hf | policy | hf |" in proc.stdout and "hf | step | - | - |" in proc.stdout
    last = re.fullmatch(r"step_tokens policy=(\d+) evaluator=(\d+) judge=(\d+)", proc.stdout.strip().splitlines()[-1])
    assert last and int(last.group(1)) > 0, proc.stdout[-2000:]


def test_roles_prints_each_roles_row():
    """benchmarks/roles.py (the per-role table of docs/training.md) on the shipped warm model, at a small size."""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "roles.py"), "--tools", "1", "--questions", "2",
                           "--categories", "lcm"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| evaluator questions ending in a call of the tool | " in proc.stdout
    assert "| use answers right | " in proc.stdout and "| use answers without a tool call | " in proc.stdout
    last = proc.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"roles build_parsed=\S+ build_right=\S+ use_right=\S+ use_no_call=\S+ evaluator_called=\S+ "
                        r"evaluator_agrees=\S+ judge_parsed=\S+ judge_auc=\S+", last), last


def test_build_probe_prints_a_row_per_category():
    """benchmarks/build_probe.py (the per-category build table of docs/training.md) on the shipped warm model."""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "build_probe.py"), "tiny-warm", "lcm",
                           "spell_backward", "--samples", "2", "--questions", "2", "--max-new-tokens", "160"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = proc.stdout.strip().splitlines()
    assert [r.split()[0] for r in rows[:2]] == ["lcm", "spell_backward"] and " greedy " in rows[0]
    assert re.fullmatch(r"build_probe right=\d/4 parsed=\d/4 greedy_right=\d/2", rows[-1]), rows[-1]


def test_ablations_starts_and_refuses_a_run_too_short_to_compare():
    """benchmarks/ablations.py imports its arms and learning.py's runner; a run without two 5-step windows is a
    usage error, not a table of NaNs (the table itself is docs/training.md's, an hour on 2 cores)."""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ablations.py"), "--steps", "5"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--steps must be at least 10" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.slow  # two 2-step runs, six held-out evaluations: about 4 minutes on 2 cores
def test_real_learning_runs_both_arms_and_the_held_out_evaluations(tmp_path):
    """benchmarks/real_learning.py's whole pipeline on the tiny random model (its numbers mean nothing there): both
    arms, the held-out accuracies of smith and the starting model (seen categories sampled twice at 0.7, as asked,
    each run with its own questions, and pooled; unseen once), with intervals over answers and over tools, the
    learning-rate-0 control's taken from the starting model's (its adapter is still zero), the table and the last
    line."""
    args = ["--recipe", "tiny-random", "--seeds", "1", "--steps", "2", "--eval-items", "1", "--unseen", "count_bits",
            "--cold-demos", "0", "--heldout-temperature", "0.7", "--heldout-samples", "2", "--out", str(tmp_path),
            "tasks.categories=[lcm,spell_backward]"]
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "real_learning.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=1200, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"^\| 1 \| [-+][0-9.]+ \|", proc.stdout, re.M)
    assert "held-out build_use, unseen: smith" in proc.stdout
    assert re.search(r"^real learning paired_min=[-0-9.]+ heldout_smith=[0-9.]+ heldout_control=[0-9.]+ "
                     r"heldout_cold=[0-9.]+ seeds=1$", proc.stdout.splitlines()[-1])
    assert "the control's adapter is still zero" in proc.stdout
    last = dict(kv.split("=") for kv in proc.stdout.splitlines()[-1].split()[2:])
    assert last["heldout_control"] == last["heldout_cold"]
    configs = [json.loads(p.read_text())["config"] for p in tmp_path.glob("*-rg/summary.json")]
    assert not list(tmp_path.glob("*control*-rg"))
    assert len(configs) == 6  # smith and the cold start: seen twice, unseen once
    assert {c["suite"]["temperature"] for c in configs} == {0.7}
    assert sorted(c["seed"] for c in configs) == [0] * 4 + [1] * 2
    assert sorted(c["suite"]["seed"] for c in configs) == [1000] * 4 + [1001] * 2  # run i: its own questions
    seen = re.search(r"held-out build_use, seen: smith [0-9.]+ \[[0-9., ]+\] \(\d+/(\d+)\)(, by tool \[[0-9., ]+\])? "
                     r"over (\d+) tools", proc.stdout)
    assert seen and seen.group(1) == "4", proc.stdout[-3000:]  # 2 runs x 1 question x 2 categories, pooled
    assert seen.group(3) == "4"  # a tool per category and run
    assert re.search(r"^  held-out seen, smith against cold, run by run: more right on \d of 4 tools, fewer on \d, "
                     r"sign test p[=<][0-9.]+$", proc.stdout, re.M), proc.stdout[-3000:]
    assert "smith against control" not in proc.stdout  # the same model as the cold start: one comparison
    assert re.search(r"^held-out seen, smith against the cold start, run by run over the seeds: more right on \d of 4 "
                     r"tools", proc.stdout, re.M)


def _control_run(path: Path, outcomes: list[tuple[str, float]]) -> Path:
    """A run directory with one use task per (category, reward) a step (its 2 episodes both earn the reward), and
    the metrics rows of those steps."""
    path.mkdir()
    rollouts, metrics = [], []
    for step, pair in enumerate(zip(outcomes[::2], outcomes[1::2], strict=True), start=1):
        for i, (category, reward) in enumerate(pair):
            rollouts += [{"step": step, "key": f"use:{2 * step + i}", "kind": "use", "category": category,
                          "rewards": {"use": reward}}] * 2
        metrics.append({"step": step, "loss": 0.0, "reward": 0.0,
                        "rewards/use/mean": sum(r for _, r in pair) / 2})
    (path / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rollouts))
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics))
    return path


def test_window_noise_separates_a_fixed_task_stream_from_a_noisy_one(tmp_path):
    """benchmarks/window_noise.py: tasks that all earn the same reward never fail the collapse check; all-or-nothing
    tasks (half 0, half 1.5) fail it at 2 tasks a step and pass it more often with more tasks; a run's own drop is
    read from its metrics (here 1.5: its best windows earn 1.5, its last 0)."""
    def run(*dirs):
        proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "window_noise.py"), *map(str, dirs),
                               "--tasks", "2", "32", "--runs", "100"], cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout

    flat = _control_run(tmp_path / "flat", [("lcm", 1.0), ("prime_factorization", 1.0)] * 30)
    assert run(flat).splitlines()[-1] == "window_noise tasks=2 pass=1.000 pass5=1.000 tasks_for_pass5=2"
    noisy = _control_run(tmp_path / "noisy", [("lcm", 1.5), ("prime_factorization", 1.5)] * 15
                         + [("lcm", 0.0), ("prime_factorization", 0.0)] * 15)
    out = run(noisy)
    assert "best 5-step mean minus the last 5 1.50 (fails)" in out
    shares = re.search(r"\| 2 \| ([0-9.]+) \|.*\n\| 32 \| ([0-9.]+) \|", out)
    assert shares and float(shares.group(1)) < 0.5 < float(shares.group(2)), out
    assert re.search(r"window_noise tasks=2 pass=0\.[0-4]\d* pass5=[0-9.]+ tasks_for_pass5=(32|none)$", out), out


def test_a_finished_run_is_reused_only_with_its_own_settings(tmp_path):
    """benchmarks/learning.py's train_arms skips an arm whose directory holds its final checkpoint trained with the
    same settings (a rerun for another held-out evaluation trains nothing again), resumes one that started and did
    not finish (a session's end); a finished run with other settings is an error."""
    from benchmarks.learning import state_of
    from smith.entry import train_config
    from smith.train.resume import save_config

    run = tmp_path / "seed1-smith"
    run.mkdir()
    overrides = ["recipe=tiny-random", "seed=1", "max_steps=2", f"output_dir={run}"]
    assert state_of(run, 2, overrides) == "new"
    save_config(train_config(overrides), run)
    assert state_of(run, 2, overrides) == "stopped"  # started, no final checkpoint yet
    (run / "checkpoint-2").mkdir()
    assert state_of(run, 2, [*overrides[:-1], f"output_dir={tmp_path / 'elsewhere'}"]) == "finished"  # may move
    with pytest.raises(SystemExit, match=r"other settings \(dapo.learning_rate"):
        state_of(run, 2, [*overrides, "dapo.learning_rate=0"])


def test_the_sign_test_pairs_the_arms_tools_run_by_run():
    """benchmarks/real_learning.py's held-out comparison with the tool as the unit: ties are dropped, p is the exact
    two-sided sign test's, and arms whose runs do not pair up are an error, not a comparison."""
    from benchmarks.real_learning import sign_test

    smith = [(6, 6), (5, 6), (0, 6), (6, 6), (6, 6), (6, 6), (6, 6)]
    cold = [(0, 6), (5, 6), (6, 6), (0, 6), (0, 6), (0, 6), (0, 6)]
    assert sign_test(smith, cold) == "more right on 5 of 7 tools, fewer on 1, sign test p=0.22"
    assert sign_test(smith[1:2], cold[1:2]) == "more right on 0 of 1 tools, fewer on 0, sign test p=1.00"
    assert sign_test([(6, 6)] * 9, [(0, 6)] * 9) == "more right on 9 of 9 tools, fewer on 0, sign test p=0.004"
    assert sign_test([(6, 6)] * 12, [(0, 6)] * 12).endswith("sign test p<0.001")
    with pytest.raises(ValueError, match="do not pair up"):
        sign_test(smith, cold[:3])
