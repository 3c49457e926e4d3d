"""Trainer step time: smith's SMITH trainer vs plain TRL GRPOTrainer on identical rollouts.

Both trainers get the same tiny model, the same prompts and the same fixed single-turn completions with the
same four reward columns; plain TRL aggregates them with its own normalize_then_sum, smith with per-axis
advantages, dynamic sampling and its session bookkeeping. Steps alternate between the two (interleaved
rounds) to cancel machine noise; the ratio of median step times is printed last.

    python benchmarks/trainer_overhead.py [--steps 6] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import TrainerCallback


class StepTimer(TrainerCallback):
    def __init__(self) -> None:
        self.times: list[float] = []
        self._t = 0.0

    def on_step_begin(self, args, state, control, **kw):
        self._t = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        self.times.append(time.perf_counter() - self._t)


def fixed_samples(tok, n_prompts: int, G: int, length: int, seed: int = 0):
    from smith.rollout.episodes import Sample

    rng = random.Random(seed)
    out = {}
    for i in range(n_prompts):
        kind = "build" if i % 2 == 0 else "use"
        prompt = tok(f"prompt {i}: " + "word " * 40)["input_ids"]
        group = []
        for g in range(G):
            ids = [rng.randrange(100, len(tok) - 20) for _ in range(length - 1)] + [tok.eos_token_id]
            s = Sample(kind, "lcm", prompt, ids, [-1.0] * length, [1] * length)
            if kind == "build":
                s.rewards.update(format=0.5 * (g % 2), evaluation=rng.random(), judge=rng.random())
            else:
                s.rewards.update(use=2 * rng.random())
            group.append(s)
        out[f"{kind}:{i // 2}"] = group  # prompt_rows' keys: build and use alternate, numbered within their kind
    return out


class FixedRollout:
    """Stands in for the episode runner only: hands out pre-made samples for each key's G repeats."""

    def __init__(self, samples) -> None:
        self.samples, self.last_grading_seconds = samples, 0.0

    def run(self, build, use, rng, step):
        return [s for t in build + use for s in self._take(t)]

    def _take(self, key):
        return [self.samples[key].pop(0)] if self.samples[key] else []

    def take_meters(self) -> dict:
        """No model generates here: no per-role counts."""
        return {}


class KeySource:
    def task(self, key):
        return key


def make_args(out: str, steps: int, G: int, per_device: int, **smith):
    from trl import GRPOConfig

    from smith.train.args import SmithGRPOConfig, mixed_precision

    return (SmithGRPOConfig if smith else GRPOConfig)(
        **smith, **mixed_precision("float32", on_gpu=False), output_dir=out, max_steps=steps,
        per_device_train_batch_size=per_device, num_generations=G,
        max_completion_length=64, loss_type="dapo", epsilon_high=0.28, beta=0.0, learning_rate=1e-4, logging_steps=1,
        report_to=[], use_cpu=True, shuffle_dataset=False, save_strategy="no", disable_tqdm=True, seed=0,
        multi_objective_aggregation="normalize_then_sum", remove_unused_columns=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--generations", type=int, default=4)
    ap.add_argument("--length", type=int, default=48)
    a = ap.parse_args()

    from datasets import Dataset
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    from smith.entry import train_config
    from smith.models.tiny import build_tiny_model
    from smith.pool import ToolPool
    from smith.rewards import AXES
    from smith.train.data import prompt_rows
    from smith.train.session import Session
    from smith.train.trainer import AXIS_REWARDS, SmithTrainer

    tmp = Path(tempfile.mkdtemp(prefix="smith-bench-"))
    path, _ = build_tiny_model(tmp / "tiny")
    tok = AutoTokenizer.from_pretrained(path)
    n_rows = a.steps * a.prompts
    G, per_device = a.generations, a.prompts * a.generations
    dataset = Dataset.from_list(prompt_rows(n_rows))

    def model():
        torch.manual_seed(0)
        m = AutoModelForCausalLM.from_pretrained(path)
        return get_peft_model(m, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"))

    def trl_run() -> list[float]:
        samples = fixed_samples(tok, n_rows, G, a.length)

        def rollout_func(prompts, trainer):
            ss = [samples[k].pop(0) for k in prompts]
            out = {"prompt_ids": [s.prompt_ids for s in ss], "completion_ids": [s.completion_ids for s in ss],
                   "logprobs": [s.logprobs for s in ss], "env_mask": [s.mask for s in ss]}
            for axis in AXES:
                out[f"r_{axis}"] = [s.rewards[axis] for s in ss]
            return out

        timer = StepTimer()
        t = GRPOTrainer(model=model(), reward_funcs=AXIS_REWARDS, args=make_args(str(tmp / "trl"), a.steps, G,
                        per_device), train_dataset=dataset, processing_class=tok, rollout_func=rollout_func,
                        callbacks=[timer])
        t.train()
        return timer.times[1:]  # first step warms up

    def smith_run() -> list[float]:
        cfg = train_config(["recipe=tiny-random", f"output_dir={tmp / 'smith'}", "judge.kind=none"])
        run_dir = tmp / "smith"
        run_dir.mkdir(exist_ok=True)
        samples = fixed_samples(tok, n_rows, G, a.length)
        session = Session(cfg, run_dir, ToolPool())
        timer = StepTimer()
        t = SmithTrainer(model=model(), reward_funcs=AXIS_REWARDS, args=make_args(str(run_dir), a.steps, G,
                         per_device, advantage="per_axis", std_floor=cfg.dapo.std_floor,
                         dynamic_sampling="drop", loss_norm="per_kind"), train_dataset=dataset, processing_class=tok,
                         session=session, tasks=KeySource(), make_rollout=lambda policy, copy: FixedRollout(samples),
                         callbacks=[timer])
        t.train()
        return timer.times[1:]

    trl_times, smith_times = [], []
    for _ in range(a.rounds):
        trl_times += trl_run()
        smith_times += smith_run()
    trl_med, smith_med = statistics.median(trl_times), statistics.median(smith_times)
    print(f"steps per trainer: {len(trl_times)}; median step trl={trl_med * 1000:.1f} ms "
          f"smith={smith_med * 1000:.1f} ms")
    print(f"trainer step ratio smith/trl={smith_med / trl_med:.3f}")


if __name__ == "__main__":
    main()
