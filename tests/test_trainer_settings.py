"""`trainer.<field>=value` reaches TRL's GRPOConfig (checked before any model loads) and smith's config reaches
wandb's run config."""

from __future__ import annotations

import pytest

from smith.entry import ConfigError, train_config
from smith.train.args import OWNED, grpo_args
from smith.train.checks import check_config


@pytest.mark.parametrize(("override", "message"), [
    ("trainer.save_totl_limit=2", "not a GRPOConfig field (trl 1.16); did you mean trainer.save_total_limit?"),
    ("trainer.learning_rate=0.1", "trainer.learning_rate is set by smith from dapo.learning_rate"),
    ("trainer.save_total_limit=two", "trainer.save_total_limit='two' does not fit"),
    ("trainer.log_completions=3", "trainer.log_completions=3 does not fit"),
    ("trainer.optim=not_an_optimizer", "GRPOConfig refused the settings: .*not_an_optimizer"),
])
def test_bad_trainer_settings_fail_in_one_line(override, message):
    with pytest.raises(ConfigError, match=message.replace("(trl 1.16)", r"\(trl 1\.16\)").replace("?", r"\?")):
        check_config(train_config(["recipe=tiny", override]))


def test_trainer_settings_land_in_grpo_config(tmp_path):
    cfg = train_config(["recipe=tiny", "trainer.save_total_limit=1", "trainer.log_completions=true",
                             "trainer.run_name=mine", "trainer.max_grad_norm=0.5", "trainer.optim=adamw_torch",
                             "trainer.report_to=[tensorboard]", "trainer.lr_scheduler_type=cosine"])
    check_config(cfg)
    args = grpo_args(cfg, tmp_path, on_gpu=False, num_processes=1)
    assert (args.save_total_limit, args.log_completions, args.run_name, args.max_grad_norm) == (1, True, "mine", 0.5)
    assert args.optim == "adamw_torch" and args.report_to == ["tensorboard"] and args.lr_scheduler_type == "cosine"
    plain = grpo_args(train_config(["recipe=tiny"]), tmp_path, on_gpu=False, num_processes=1)
    assert plain.lr_scheduler_type == "constant_with_warmup" and plain.save_total_limit is None


@pytest.mark.parametrize("recipe", ["qwen3-4b", "tiny"])
def test_vllm_importance_weights_are_per_token(recipe, tmp_path):
    """A multi-turn episode of up to 1,024 tokens gets a clipped ratio per token, not TRL's one per sequence."""
    args = grpo_args(train_config([f"recipe={recipe}"]), tmp_path, on_gpu=False, num_processes=1)
    assert args.vllm_importance_sampling_mode == "token_truncate" and args.vllm_importance_sampling_correction
    with pytest.raises(ConfigError, match=r"trainer\.vllm_importance_sampling_mode is set by smith"):
        check_config(train_config(["recipe=tiny", "trainer.vllm_importance_sampling_mode=sequence_mask"]))
    other = train_config([f"recipe={recipe}", "dapo.vllm_importance_sampling=sequence_mask"])
    assert grpo_args(other, tmp_path, on_gpu=False, num_processes=1).vllm_importance_sampling_mode == "sequence_mask"


def test_owned_fields_are_exactly_those_smith_sets(tmp_path):
    """OWNED names every field grpo_args derives from smith's keys (vLLM server URL only when set)."""
    import dataclasses

    from trl import GRPOConfig

    cfg = train_config(["recipe=tiny", "generation.backend=vllm", "generation.vllm_server_url=http://x:1"])
    args = grpo_args(cfg, tmp_path, on_gpu=False, num_processes=1)
    default = GRPOConfig(output_dir=str(tmp_path), use_cpu=True)
    changed = {f.name for f in dataclasses.fields(GRPOConfig) if f.name not in ("logging_dir",)
               and getattr(args, f.name) != getattr(default, f.name)}
    assert changed - {"lr_scheduler_type", "report_to", "disable_tqdm"} <= set(OWNED)


@pytest.mark.timeout(600)
def test_wandb_gets_smiths_config_and_trainer_settings_apply(warm_model_dir, tmp_path):
    """One 2-step run, wandb offline: save_total_limit keeps one checkpoint, wandb's config holds `smith`."""
    import os
    import subprocess
    import sys

    from .conftest import ROOT

    run = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    env.pop("WANDB_DIR", None)
    p = subprocess.run([sys.executable, "train.py", "recipe=tiny", f"model.warm_dir={warm_model_dir}", "max_steps=2",
                        "save_every=1", f"output_dir={run}", "logging.wandb=offline", "trainer.save_total_limit=1",
                        "trainer.run_name=settings-check"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert sorted(x.name for x in run.glob("checkpoint-*")) == ["checkpoint-2"]
    # wandb 0.31 keeps an offline run's config only in its binary log (no Python reader ships): look for the JSON
    logs = list(run.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(logs) == 1, sorted(str(x) for x in run.rglob("*"))[:40]
    data = logs[0].read_bytes()
    assert b'"trainer":{"save_total_limit":1,"run_name":"settings-check"}' in data  # smith's config, under `smith`
    assert b'"max_steps":2,' in data and b'"run_name"' in data


def test_updates_per_batch_is_trls_num_iterations(tmp_path):
    """`dapo.updates_per_batch` optimizer steps on each generated batch; 1 (the reference run's) by default."""
    paper = grpo_args(train_config(["recipe=qwen3-4b"]), tmp_path, on_gpu=False, num_processes=1)
    assert paper.num_iterations == 1 and paper.dynamic_sampling == "refill"
    args = grpo_args(train_config(["recipe=tiny", "dapo.updates_per_batch=2"]), tmp_path, on_gpu=False,
                     num_processes=1)
    assert args.num_iterations == 2 and args.steps_per_generation == args.gradient_accumulation_steps
    with pytest.raises(ConfigError, match=r"trainer\.num_iterations is set by smith from dapo\.updates_per_batch"):
        check_config(train_config(["recipe=tiny", "trainer.num_iterations=2"]))
    for key in ("save_every", "max_steps"):
        with pytest.raises(ConfigError, match=rf"^{key}=5 must be a multiple of dapo\.updates_per_batch=2: "):
            grpo_args(train_config(["recipe=tiny", "dapo.updates_per_batch=2", "save_every=10", "max_steps=10",
                                         f"{key}=5"]), tmp_path, on_gpu=False, num_processes=1)
