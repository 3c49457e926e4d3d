"""The SMITH trainer: TRL's GRPOTrainer (loss_type="dapo") with build/use rollouts, per-axis advantages,
dynamic sampling, and a frozen evaluator/judge adapter re-synced to the policy every `sync_every` steps.

docs/architecture.md, "TRL": TRL gives DAPO, clip-higher, truncation masking, PEFT, vLLM and accelerate; smith
adds `rollout_func` episodes, normalise-then-sum with a std floor per axis, dropped zero-signal groups,
and the synced copy, and the paper's loss split (`_compute_loss`: build and use DAPO terms, each over its own
tokens). Only `_calculate_rewards`, `_generate_and_score_completions` and `_compute_loss` are overridden.
"""

from __future__ import annotations

import math
import os
import random
import time
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from trl import GRPOTrainer

# smith uses rollout_func on purpose (docs/architecture.md, "TRL"); the pinned trl marks it experimental
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from smith.rewards import AXES
from smith.rollout.episodes import Rollout
from smith.train.advantages import per_axis_advantages

EVALUATOR_ADAPTER = "evaluator"
POLICY_ADAPTER = "default"


def _axis_reward(axis: str) -> Any:
    """TRL reward function for one axis: reads the value the rollout computed (NaN -> None: not applicable)."""

    def reward(prompts: list, completions: list, **kwargs: Any) -> list[float | None]:
        return [None if v is None or math.isnan(v) else float(v) for v in kwargs[f"r_{axis}"]]

    reward.__name__ = axis
    return reward


AXIS_REWARDS = [_axis_reward(a) for a in AXES]


def gathered(params: list[torch.Tensor], modify: bool = False) -> AbstractContextManager:
    """Under DeepSpeed ZeRO-3 each rank holds a shard of every parameter (a copy between them would touch empty
    tensors): gather the full tensors for the block, and with `modify` scatter rank 0's changes back after.
    A collective: every rank must enter it. Without ZeRO-3 it does nothing."""
    if not any(hasattr(p, "ds_id") for p in params):
        return nullcontext()
    import deepspeed

    return deepspeed.zero.GatheredParameters(params, modifier_rank=0 if modify else None)


def sync_evaluator(model: Any) -> None:
    """Copy the policy adapter into the frozen evaluator adapter (paper: periodic re-sync). On every rank."""
    params = dict(model.named_parameters())
    twin = {n: n.replace(f".{POLICY_ADAPTER}.", f".{EVALUATOR_ADAPTER}.") for n in params if f".{POLICY_ADAPTER}." in n}
    pairs = [(params[n], params[t]) for n, t in twin.items() if t in params]
    with torch.no_grad(), gathered([t for pair in pairs for t in pair], modify=True):
        for source, target in pairs:
            target.copy_(source)


def evaluator_state(model: Any) -> dict[str, torch.Tensor]:
    """The evaluator adapter's full tensors (gathered under ZeRO-3: call it on every rank)."""
    named = [(n, p) for n, p in model.named_parameters() if f".{EVALUATOR_ADAPTER}." in n]
    with gathered([p for _, p in named]):
        return {n: p.detach().cpu().clone() for n, p in named}


class SmithTrainer(GRPOTrainer):
    """GRPOTrainer whose rollout_func runs SMITH episodes and whose advantages are per-axis."""

    def __init__(self, *args: Any, smith: Any, **kwargs: Any) -> None:
        self.smith = smith  # smith.train.run.Session: task source, rollout, pool, settings
        self._gathered_rewards: torch.Tensor | None = None
        super().__init__(*args, rollout_func=self._rollout, **kwargs)
        if self.use_vllm:
            from smith.train.vllm_policy import reload_through_runner

            reload_through_runner(self.vllm_generation)

    # -- rollouts ------------------------------------------------------------------------------------
    def _rollout(self, prompts: list[str], trainer: Any) -> dict[str, Any]:
        """Per-process prompts (keys repeated G times) -> samples of build and use episodes."""
        sess = self.smith
        step = self.state.global_step
        if self.use_vllm and self.vllm_generation.mode == "server":
            self.accelerator.wait_for_everyone()  # the main process has pushed this step's weights to the server
        sess.maybe_sync(self, step)
        rollout: Rollout = sess.rollout
        rollout.s.step = step
        tasks: dict[str, Any] = {}
        for key in prompts:  # the G repeats of a key share one task object (one GRPO group)
            if key not in tasks:
                tasks[key] = sess.source.task(key)
        build = [tasks[k] for k in prompts if k.startswith("build:")]
        use = [tasks[k] for k in prompts if k.startswith("use:")]
        rng = random.Random(f"{sess.seed}:{step}:{self.accelerator.process_index}")
        t0 = time.perf_counter()
        samples = rollout.run(build, use, rng)
        sess.timing["generation"] = time.perf_counter() - t0 - rollout.last_grading_wait
        sess.timing["grading"] = rollout.last_grading_wait
        sess.share_admissions(self)
        by_kind = {"build": iter([s for s in samples if s.kind == "build"]),
                   "use": iter([s for s in samples if s.kind == "use"])}
        ordered = [next(by_kind[k.split(":")[0]]) for k in prompts]  # back to TRL's order
        sess.record(ordered, self.accelerator.process_index, step + 1, prompts)
        out: dict[str, Any] = {
            "prompt_ids": [s.prompt_ids for s in ordered],
            "completion_ids": [s.completion_ids for s in ordered],
            "logprobs": [s.logprobs for s in ordered],
            "env_mask": [s.mask for s in ordered],
        }
        for axis in AXES:
            out[f"r_{axis}"] = [s.rewards[axis] for s in ordered]
        return out

    # -- advantages ----------------------------------------------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):  # noqa: ANN001
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._gathered_rewards = rewards  # (all processes' samples, axes), gathered by TRL
        return rewards

    def _generate_and_score_completions(self, inputs):  # noqa: ANN001
        out = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        cfg = self.smith
        adv = per_axis_advantages(self._gathered_rewards, self.num_generations, self.reward_weights,
                                  std_floor=self.args.std_floor, drop_zero_variance=self.args.dynamic_sampling)
        n_local = out["advantages"].shape[0]
        local = slice(self.accelerator.process_index * n_local, (self.accelerator.process_index + 1) * n_local)
        out["advantages"] = adv.advantages[local].to(out["advantages"])
        keep = adv.keep[local].to(out["completion_mask"].device)
        # dropped groups leave the loss and the DAPO token denominator
        mask = out.get("tool_mask", torch.ones_like(out["completion_mask"]))
        out["tool_mask"] = mask * keep.unsqueeze(1).to(mask.dtype)
        kept = out["completion_mask"] * out["tool_mask"]
        out["num_items_in_batch"] = self.accelerator.gather(kept.sum()).sum()
        is_build = torch.tensor([x["prompt"].startswith("build:") for x in inputs], device=kept.device)
        out["is_build"] = is_build  # split with the batch by TRL, like every (B, ...) tensor
        out["num_items_build"] = self.accelerator.gather(kept[is_build].sum()).sum()
        out["num_items_use"] = self.accelerator.gather(kept[~is_build].sum()).sum()
        metrics = self._metrics[mode]
        metrics["dynamic_sampling/frac_dropped"].append(1.0 - adv.keep.float().mean().item())
        for i, axis in enumerate(AXES):
            applies = ~torch.isnan(self._gathered_rewards[:, i])
            if applies.any():
                metrics[f"adv/{axis}/mean_abs"].append(adv.per_axis[applies, i].abs().mean().item())
        metrics["adv/total/mean_abs"].append(adv.advantages.abs().mean().item())
        for name, value in cfg.step_metrics.items():
            metrics[name].append(value)
        if self.accelerator.num_processes > 1:  # what every rank must agree on, for multi-rank checks
            cfg.log_rank(self.accelerator.process_index, self.state.global_step, adv.advantages.tolist())
        return out

    # -- loss ----------------------------------------------------------------------------------------
    def _compute_loss(self, model, inputs):  # noqa: ANN001
        """SMITH's L = L_DAPO(B_build) + L_DAPO(B_use), each normalised by its own kept-token count (all ranks),
        one backward pass. With one denominator (`dapo.loss_norm=batch`) the longer build completions would
        down-weight the use half."""
        if self.args.loss_norm != "per_kind":
            return super()._compute_loss(model, inputs)
        is_build = inputs["is_build"]
        loss = 0.0
        for rows, count in ((is_build, inputs["num_items_build"]), (~is_build, inputs["num_items_use"])):
            if rows.any():
                part = {k: v[rows] if isinstance(v, torch.Tensor) and v.ndim and v.shape[0] == rows.shape[0] else v
                        for k, v in inputs.items()}
            else:  # no sample of this kind here: the term still runs (its metrics are collectives) and adds 0
                part = {**inputs, "tool_mask": torch.zeros_like(inputs["tool_mask"])}
            loss = loss + super()._compute_loss(model, {**part, "num_items_in_batch": count})
        return loss
