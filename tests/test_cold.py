"""Issue 29 item 5: the cold start (smith.train.cold) before SMITH on real weights, and `recipe=smollm2-135m` end to
end: the real model, its real template, the tool fallback, sandbox grading, the pool and a real update."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from smith.config import ColdConfig
from smith.models.chat_format import chat_format
from smith.rewards.judge import parse_judge_reply
from smith.train.cold import MARKER, build_cold_start, cold_rows
from smith.train.warm import demonstrations, render

from .conftest import ROOT


def test_demonstrations_mark_what_the_rollout_would_reward(rg_cache):
    from smith.rewards.evaluation import EVALUATOR_SYSTEM
    from smith.rewards.judge import SYSTEM as JUDGE

    demos, right = demonstrations(200, seed=3, cache_dir=str(rg_cache))
    system = {EVALUATOR_SYSTEM: "evaluator", JUDGE: "judge"}

    def kind(d) -> str:
        if d.messages[0]["content"] in system:
            return system[d.messages[0]["content"]]
        return "inner" if d.then is not None else "use" if d.tools is not None else "build"

    for k, rate in right.items():
        marked = [d.right for d in demos if kind(d) == k]
        assert marked and sum(marked) / len(marked) == pytest.approx(rate)
        if k in ("evaluator", "judge"):  # the graders' protocols are only demonstrated done right
            assert all(marked)
        else:  # the policy's own replies: right and wrong ones, only the right ones are cold-start rows
            assert 0 < sum(marked) < len(marked)


def test_cold_rows_hold_rewarded_replies_in_the_real_models_fallback_format(real_model_dir, rg_cache):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(real_model_dir)
    assert not chat_format(tok).native_tools  # SmolLM2's template has no tool support: smith's fallback renders
    rows = cold_rows(tok, ColdConfig(demos=24, max_tokens=600), cache_dir=str(rg_cache))
    assert len(rows) == 24
    replies = []
    for row in rows:
        assert len(row["input_ids"]) <= 600 and len(row["labels"]) == len(row["input_ids"])
        learnt = [t for t, label in zip(row["input_ids"], row["labels"], strict=True) if label != -100]
        assert row["labels"][0] == -100 and learnt  # the prompt is context, the replies are learnt
        replies.append(tok.decode(learnt))
    builds = [r for r in replies if "```python" in r]
    calls = [r for r in replies if "<tool_call>" in r]
    verdicts = [r for r in replies if parse_judge_reply(r) is not None]
    # no guess without a call is taught: every row is a build, a call (use or evaluator) or a judge's verdict
    assert builds and calls and len(builds) + len(calls) + len(verdicts) >= len(rows)
    demos, _ = demonstrations(96, seed=0, cache_dir=str(rg_cache))
    kept = [render(d, tok)[0] for d in demos if d.right and len(render(d, tok)[0]) <= 600]
    assert [r["input_ids"] for r in rows] == kept[:24]  # exactly the rewarded ones, in order


def test_cold_start_is_merged_cached_and_rebuilt_when_its_settings_change(tiny_model_dir, rg_cache, tmp_path):
    settings = ColdConfig(demos=4, batch_size=2, max_tokens=4096, learning_rate=1e-2)
    path, built = build_cold_start(tiny_model_dir, tmp_path / "cold", settings, cache_dir=str(rg_cache),
                                   progress=False)
    assert built and not (path / "adapter_config.json").exists()  # a plain checkpoint: RL adds its own adapter
    info = json.loads((path / MARKER).read_text())
    assert info["rows"] == 4 and info["key"]["demos"] == 4 and info["learnt_tokens"] > 0
    base, cold = (load_file(p / "model.safetensors") for p in (tiny_model_dir, path))
    assert base.keys() == cold.keys()
    assert any(not torch.equal(base[k], cold[k]) for k in base)  # the merged LoRA changed the weights
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert build_cold_start(tiny_model_dir, path, settings, cache_dir=str(rg_cache), progress=False) == (path, False)
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp
    again = ColdConfig(demos=4, batch_size=2, max_tokens=4096, learning_rate=2e-2)
    assert build_cold_start(tiny_model_dir, path, again, cache_dir=str(rg_cache), progress=False)[1]
    # its own seed is part of the key; the run's seed is not (load_policy passes only `cold.*`)
    reseeded = ColdConfig(demos=4, batch_size=2, max_tokens=4096, learning_rate=2e-2, seed=1)
    assert build_cold_start(tiny_model_dir, path, reseeded, cache_dir=str(rg_cache), progress=False)[1]
    assert json.loads((path / MARKER).read_text())["key"]["seed"] == 1


def test_no_demonstration_that_fits_is_a_clear_error(tiny_model_dir, rg_cache, tmp_path):
    with pytest.raises(ValueError, match=r"cold\.max_tokens=8"):
        build_cold_start(tiny_model_dir, tmp_path / "cold", ColdConfig(demos=2, max_tokens=8),
                         cache_dir=str(rg_cache), progress=False)


@pytest.mark.timeout(3600)
@pytest.mark.slow  # the cold start (192 demonstrations) and 2 SMITH steps of a real 135M model on 2 CPU cores
def test_real_weights_smoke_run(real_model_dir, tmp_path):
    """`recipe=smollm2-135m` as benchmarks/real_step.py runs it (the recipe's 2 steps), then the run it left."""
    run = tmp_path / "now"  # the run of this checkout's code (no baseline run here)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "benchmarks/real_step.py", "--steps", "2", "--baseline", "none", "--out",
                           str(tmp_path), "device=cpu"], cwd=ROOT, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [x for x in proc.stdout.splitlines() if x.startswith("real step now ")]
    last = r"^real_step generation=[0-9.]+ .* tokens/s=[0-9.]+ decode_vs_generate=[0-9.]+$"
    assert len(lines) == 2 and re.search(last, proc.stdout, re.M)
    cold = json.loads((ROOT / "checkpoints" / ".cold-start" / MARKER).read_text())
    assert cold["rows"] == 192 and cold["base_path"] == str(real_model_dir.resolve())
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    episodes = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and {e["kind"] for e in episodes} == {"build", "use"}
    for axis in ("format", "evaluation", "judge", "use", "tool"):
        assert any(f"rewards/{axis}/mean" in r for r in rows), axis
    assert (run / "tool_pool.json").is_file() and any(r["dynamic_sampling/frac_dropped"] < 1 for r in rows)
    lora_b = [w for k, w in load_file(run / "adapter_model.safetensors").items() if "lora_B" in k]
    assert lora_b and any(w.abs().max() > 0 for w in lora_b)  # a group with signal moved the policy (B starts at 0)
    print(f"real-weights smoke run: {seconds:.0f} s, cold start {cold['seconds']} s")
