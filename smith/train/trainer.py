"""The SMITH trainer: TRL's GRPOTrainer (loss_type="dapo") with build/use rollouts, per-axis advantages,
dynamic sampling, and a frozen evaluator/judge adapter re-synced to the policy every `sync_every` steps.

docs/architecture.md, "TRL": TRL gives DAPO, clip-higher, truncation masking, PEFT, vLLM and accelerate; smith
adds `rollout_func` episodes, normalise-then-sum with a std floor per axis, zero-signal groups refilled with
fresh ones (DAPO's dynamic sampling, `_refill`) or dropped, and the synced copy, and the paper's loss split
(`_compute_loss`: build and use DAPO terms, each over its own tokens). Only `_generate_and_score_completions`
and `_compute_loss` are overridden.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import torch
from trl import GRPOTrainer

# smith uses rollout_func on purpose (docs/architecture.md, "TRL"); the pinned trl marks it experimental
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from smith.rewards import AXES
from smith.rollout.episodes import EpisodeKind, Rollout, Sample
from smith.train.adapters import EVALUATOR_ADAPTER, POLICY_ADAPTER, sync_evaluator
from smith.train.advantages import ADVANTAGES

REFILL_ORDINAL = 10**9  # refill keys (`build:N`, `use:N`) start here, far past the dataset's rows


def _axis_reward(axis: str) -> Any:
    """TRL reward function for one axis: reads the value the rollout computed (NaN -> None: not applicable)."""

    def reward(prompts: list, completions: list, **kwargs: Any) -> list[float | None]:
        return [None if v is None or math.isnan(v) else float(v) for v in kwargs[f"r_{axis}"]]

    reward.__name__ = axis
    return reward


AXIS_REWARDS = [_axis_reward(a) for a in AXES]

# TRL losses that sum over kept tokens and divide by a count a row without kept tokens does not change
TOKEN_SUM_LOSSES = ("dapo", "bnpo", "cispo")


def has_kept_token(inputs: dict[str, Any]) -> torch.Tensor:
    """Per row of the micro-batch: whether any completion token of it is trained on."""
    return (inputs["completion_mask"] * inputs.get("tool_mask", 1)).sum(-1) > 0


def kept_rows(inputs: dict[str, Any], rows: int) -> dict[str, Any]:
    """`rows` rows of the micro-batch, those with a kept token first (in order), then fully masked ones (a dropped
    group's). Under a token-sum loss a masked row adds nothing to the loss, its gradient or TRL's masked metrics, so
    no forward or backward need be spent on it. The trainer asks every rank for as many rows (TRL gathers per-row
    tensors across ranks), at least one: a zero loss whose backward still reaches every parameter."""
    if rows >= len(inputs["completion_mask"]):
        return inputs
    kept = has_kept_token(inputs)
    index = torch.argsort((~kept).int(), stable=True)[:rows].sort().values
    return {k: v[index] if isinstance(v, torch.Tensor) and v.ndim and v.shape[0] == len(kept) else v
            for k, v in inputs.items()}


class SmithTrainer(GRPOTrainer):
    """GRPOTrainer whose rollout_func runs SMITH episodes and whose advantages come from `args.advantage`."""

    def __init__(self, *args: Any, session: Any = None, tasks: Any = None, policy: Any = None, copy: Any = None,
                 make_rollout: Callable[[Any, Any], Rollout] | None = None, **kwargs: Any) -> None:
        """`session` (smith.train.session.Session): pool, admissions, sync, logs; `tasks.task(key)` turns a prompt
        key into a task; `make_rollout(policy, copy)` builds the episode runner around the policy and the frozen
        evaluator/judge copy the trainer settles on: `policy` and `copy` themselves, or both as adapters on TRL's
        colocated vLLM engine (`args.use_vllm`; the engine exists only once TRL is set up) or on a LoRA server
        (`args.lora_server_url`), or the policy on TRL's server. Without them the trainer computes losses only."""
        self.session = session
        self.tasks = tasks
        self.engine = None  # the adapters on vLLM (smith.train.vllm_policy: a colocated engine or a LoRA server)
        colocated = kwargs["args"].use_vllm and kwargs["args"].vllm_mode == "colocate"
        if colocated:
            from smith.train.vllm_policy import AdapterEngine, lora_engine

            model = kwargs["model"]
        with lora_engine(model.peft_config[POLICY_ADAPTER].r, model.dtype) if colocated else nullcontext():
            super().__init__(*args, rollout_func=self._rollout, **kwargs)
        if colocated:
            self.engine = AdapterEngine(self, self.processing_class)
            policy, copy = self.engine.policy, self.engine.copy
        elif self.args.lora_server_url:
            from smith.train.vllm_policy import AdapterServer

            self.engine = AdapterServer(self, self.processing_class, self.args.lora_server_url)
            policy, copy = self.engine.policy, self.engine.copy
            # TRL corrects for the vLLM sampler only when it generates with vLLM: it does, through this object
            self.use_vllm, self.vllm_generation, self._last_loaded_step = True, self.engine, -1
        elif self.use_vllm:
            from smith.train.vllm_policy import TRLVLLMPolicy

            policy = TRLVLLMPolicy(self, self.processing_class)
            if copy is not None and self.accelerator.is_main_process:
                print("warning: generation.vllm_mode=server serves the policy only: the evaluator/judge copy "
                      "generates on the trainer's HF loop (docs/training.md, \"GPU paths\")")
        self.rollout = make_rollout(policy, copy) if make_rollout is not None else None
        self.estimate = ADVANTAGES[self.args.advantage]
        self._generated: list[Sample] = []  # every episode of the step, in the order the rollout returned them
        self._scored_rows: torch.Tensor | None = None  # the step's rows its no-grad forwards must score (`_rollout`)

    @property
    def frozen(self) -> bool:
        """A learning-rate-0 run (the learning benchmarks' control): no step of it can change a weight, so it computes
        no loss and its no-grad forwards score no row."""
        return self.args.learning_rate == 0

    def sync_copy(self) -> None:
        """The evaluator/judge copy := the policy (every rank), and into vLLM when it serves the adapters."""
        sync_evaluator(self.accelerator.unwrap_model(self.model))
        if self.engine is not None:
            self.engine.push(EVALUATOR_ADAPTER)

    # -- rollouts ------------------------------------------------------------------------------------
    def _rollout(self, prompts: list[str], trainer: Any) -> dict[str, Any]:
        """Per-process prompts (keys repeated G times) -> samples of build and use episodes; with
        `dapo.dynamic_sampling=refill`, groups without signal replaced first (`_refill`)."""
        sess = self.session
        step = self.state.global_step
        if self.use_vllm and self.vllm_generation.mode == "server":
            self.accelerator.wait_for_everyone()  # the main process has pushed this step's weights to the server
        timing = {"sync": self._maybe_sync(step), "generation": 0.0, "grading": 0.0}
        self._generated = []
        if self.engine is not None:  # the policy adapter TRL had pushed before this rollout
            timing["sync"] += self.engine.take_seconds()
        keys = list(prompts)
        ordered = self._episodes(keys, step, "", timing)
        discarded: list[tuple[str, Sample]] = []
        if self.args.dynamic_sampling == "refill":
            counts = self._refill(keys, ordered, step, timing, discarded)
        else:
            counts = {"dynamic_sampling/groups_generated": float(len(keys) * self.accelerator.num_processes
                                                                 // self.num_generations),  # groups may span ranks
                      "dynamic_sampling/extra_rounds": 0.0}
        self._admit({id(s) for s in ordered})
        counts.update(self.rollout.take_meters())  # tokens/<role>/<engine>, time/<role>
        sess.record(ordered, self.accelerator.process_index, step + 1, keys, timing, counts, discarded)
        out: dict[str, Any] = {
            "prompt_ids": [s.prompt_ids for s in ordered],
            "completion_ids": [s.completion_ids for s in ordered],
            "logprobs": [s.logprobs for s in ordered],
            "env_mask": [s.mask for s in ordered],
        }
        for axis in AXES:
            out[f"r_{axis}"] = [s.rewards[axis] for s in ordered]
        # a group may span ranks, and vLLM's importance-sampling metrics read every row: there every row is scored
        if self.accelerator.num_processes == 1 and not (self.use_vllm and self.vllm_importance_sampling_correction):
            self._scored_rows = (torch.zeros(len(ordered), dtype=torch.bool) if self.frozen
                                 else self._estimate(ordered, self.args.dynamic_sampling).keep)
        return out

    def _maybe_sync(self, step: int) -> float:
        """Re-sync the frozen copy to the policy every `args.sync_every` steps (0: never, the No-Sync ablation): at
        the first rollout at or past each multiple (with `dapo.updates_per_batch` > 1 rollouts do not start every
        step). Returns the seconds it took (logged as `time/sync`)."""
        every, sess = self.args.sync_every, self.session
        if not sess.has_evaluator_copy or every <= 0 or step // every <= sess.last_sync // every:
            return 0.0
        t0 = time.perf_counter()
        self.sync_copy()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        sess.last_sync = step
        return time.perf_counter() - t0

    def _admit(self, kept: set[int]) -> None:
        """Pool admissions of the step: only episodes the update sees (ids in `kept`) admit their candidates; a
        discarded one's trace says `admitted: false`. Every rank admits every rank's candidates in one order (a
        collective, once per step), so the pools stay identical; each trace says whether the pool took its tool."""
        from accelerate.utils import gather_object

        mine = []
        for s in self._generated:
            if s.candidate is not None:
                if id(s) in kept:
                    mine.append(s)
                else:
                    s.trace["admitted"] = False
        entries = [s.candidate for s in mine]
        world, rank = self.accelerator.num_processes, self.accelerator.process_index
        everyone = gather_object([entries]) if world > 1 else [entries]
        everyone[rank] = entries  # the same entries, as this rank's samples hold them
        verdicts = {id(e): self.session.pool.admit(e) for theirs in everyone for e in theirs}
        for s in mine:
            s.trace["admitted"] = verdicts[id(s.candidate)]

    def _episodes(self, keys: list[str], step: int, tag: str, timing: dict[str, float]) -> list[Sample]:
        """One generation round: the episodes of `keys` (each repeated G times), in their order; seconds added to
        `timing`. Their tools are candidates only: `_admit` admits those of the groups the update sees."""
        sess = self.session
        samples: list[Sample] = []
        if keys:
            tasks: dict[str, Any] = {}
            for key in keys:  # the G repeats of a key share one task object (one GRPO group)
                if key not in tasks:
                    tasks[key] = self.tasks.task(key)
            build = [tasks[k] for k in keys if EpisodeKind.of(k) is EpisodeKind.BUILD]
            use = [tasks[k] for k in keys if EpisodeKind.of(k) is EpisodeKind.USE]
            rng = random.Random(f"{sess.seed}:{step}:{self.accelerator.process_index}{tag}")
            t0 = time.perf_counter()
            samples = self.rollout.run(build, use, rng, step)
            self._generated += samples
            grading = self.rollout.last_grading_seconds
            timing["generation"] += time.perf_counter() - t0 - grading
            timing["grading"] += grading
        by_kind = {kind: iter([s for s in samples if s.kind == kind]) for kind in EpisodeKind}
        return [next(by_kind[EpisodeKind.of(k)]) for k in keys]  # back to TRL's order

    def _estimate(self, samples: list[Sample], dynamic_sampling: str) -> Any:
        """The step's own estimator on these samples' rewards (groups of G consecutive samples)."""
        rewards = torch.tensor([[math.nan if s.rewards[a] is None else float(s.rewards[a]) for a in AXES]
                                for s in samples], dtype=torch.float32)
        return self.estimate(rewards, self.num_generations, self.reward_weights.cpu(), std_floor=self.args.std_floor,
                             dynamic_sampling=dynamic_sampling)

    def _signal(self, samples: list[Sample]) -> list[bool]:
        """Per group of G consecutive samples: whether its rewards carry signal, by the step's own estimator."""
        return self._estimate(samples, "drop").signal[::self.num_generations].tolist() if samples else []

    def _refill(self, keys: list[str], samples: list[Sample], step: int, timing: dict[str, float],
                discarded: list[tuple[str, Sample]]) -> dict[str, float]:
        """DAPO's dynamic sampling: each group of this process without signal is replaced, in place (`keys` and
        `samples`), by a fresh group of the same kind and category that has it, so build:use and the batch's
        category stratification stay as sampled. Each round draws `refill_oversample` fresh keys per missing group
        (`kind:N:category`, ordinals past the dataset's, fixed by step, round, rank and position: a resumed run
        draws the same) and runs them; at most `refill_rounds` rounds, as many on every rank (they agree on the
        missing count); groups still tied after the last are dropped as under `drop`. The groups replaced or not
        used go to `discarded` (logged, never trained on, admitting nothing). Returns the counts logged for the
        step (groups generated over all ranks, extra rounds)."""
        g, rank, world = self.num_generations, self.accelerator.process_index, self.accelerator.num_processes
        rounds, cap = self.args.refill_rounds, len(keys) // g * self.args.refill_oversample

        def slot(key: str) -> tuple[str, str]:
            return key.split(":")[0], self.tasks.category_of(key)

        tied = [j for j, ok in enumerate(self._signal(samples)) if not ok]
        generated, extra = len(keys) // g, 0
        for r in range(1, rounds + 1):
            missing = self.accelerator.gather(torch.tensor([len(tied)], device=self.accelerator.device)).sum()
            if missing.item() == 0:
                break
            extra = r
            first = REFILL_ORDINAL + ((step * (rounds + 1) + r) * world + rank) * cap
            slots = [slot(keys[j * g]) for j in tied for _ in range(self.args.refill_oversample)]
            fresh = [f"{kind}:{first + i}:{category}" for i, (kind, category) in enumerate(slots)]
            new = self._episodes([k for k in fresh for _ in range(g)], step, f":refill{r}", timing)
            generated += len(fresh)
            found = [i for i, ok in enumerate(self._signal(new)) if ok]
            used, still = set(), []
            for j in tied:
                i = next((i for i in found if slots[i] == slot(keys[j * g])), None)
                if i is None:
                    still.append(j)
                    continue
                found.remove(i)
                used.add(i)
                discarded += [(keys[j * g], s) for s in samples[j * g:(j + 1) * g]]
                keys[j * g:(j + 1) * g] = [fresh[i]] * g
                samples[j * g:(j + 1) * g] = new[i * g:(i + 1) * g]
            discarded += [(fresh[i], s) for i in range(len(fresh)) if i not in used for s in new[i * g:(i + 1) * g]]
            tied = still
        total = self.accelerator.gather(torch.tensor([generated], device=self.accelerator.device)).sum().item()
        return {"dynamic_sampling/groups_generated": float(total), "dynamic_sampling/extra_rounds": float(extra)}

    # -- advantages ----------------------------------------------------------------------------------
    def _all_rewards(self, inputs: list[dict[str, Any]]) -> torch.Tensor:
        """(samples of all processes, axes), NaN where an axis does not apply: the `r_<axis>` columns the rollout
        returned (TRL merges them into `inputs`), gathered in process order like TRL's own reward matrix."""
        local = torch.tensor([[math.nan if x[f"r_{axis}"] is None else float(x[f"r_{axis}"]) for axis in AXES]
                              for x in inputs], dtype=torch.float32, device=self.accelerator.device)
        return self.accelerator.gather(local)

    def _generate_and_score_completions(self, inputs):  # noqa: ANN001
        """TRL's step with smith's advantages in place of its own. TRL has already logged statistics of its
        discarded advantages: `frac_reward_zero_std` and the completions table's advantages are rewritten to
        describe the ones trained with."""
        try:
            out = super()._generate_and_score_completions(inputs)
        finally:
            self._scored_rows = None
        mode = "train" if self.model.training else "eval"
        rewards = self._all_rewards(inputs)
        adv = self.estimate(rewards, self.num_generations, self.reward_weights,
                            std_floor=self.args.std_floor, dynamic_sampling=self.args.dynamic_sampling)
        n_local = out["advantages"].shape[0]
        local = slice(self.accelerator.process_index * n_local, (self.accelerator.process_index + 1) * n_local)
        out["advantages"] = adv.advantages[local].to(out["advantages"])
        keep = adv.keep[local].to(out["completion_mask"].device)
        # dropped groups leave the loss and the DAPO token denominator
        mask = out.get("tool_mask", torch.ones_like(out["completion_mask"]))
        out["tool_mask"] = mask * keep.unsqueeze(1).to(mask.dtype)
        kept = out["completion_mask"] * out["tool_mask"]
        out["num_items_in_batch"] = self.accelerator.gather(kept.sum()).sum()
        is_build = torch.tensor([EpisodeKind.of(x["prompt"]) is EpisodeKind.BUILD for x in inputs], device=kept.device)
        out["is_build"] = is_build  # split with the batch by TRL, like every (B, ...) tensor
        out["num_items_build"] = self.accelerator.gather(kept[is_build].sum()).sum()
        out["num_items_use"] = self.accelerator.gather(kept[~is_build].sum()).sum()
        metrics = self._metrics[mode]
        metrics["frac_reward_zero_std"][-1] = 1.0 - adv.signal.float().mean().item()
        logged = self._logs["advantages"]  # a bounded deque: TRL's values for this batch are its tail
        for _ in range(min(len(adv.advantages), len(logged))):
            logged.pop()
        logged.extend(adv.advantages.tolist())
        metrics["dynamic_sampling/frac_dropped"].append(1.0 - adv.keep.float().mean().item())
        metrics["dynamic_sampling/groups_kept"].append(adv.keep.sum().item() / self.num_generations)
        for i, axis in enumerate(AXES):
            applies = ~torch.isnan(rewards[:, i])
            if applies.any():
                metrics[f"adv/{axis}/mean_abs"].append(adv.per_axis[applies, i].abs().mean().item())
        metrics["adv/total/mean_abs"].append(adv.advantages.abs().mean().item())
        for name, value in self.session.step_metrics.items():
            metrics[name].append(value)
        if self.accelerator.num_processes > 1:  # what every rank must agree on, for multi-rank checks
            self.session.log_rank(self.accelerator.process_index, self.state.global_step, adv.advantages.tolist())
        return out

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep,  # noqa: ANN001
                                           *args, **kwargs):
        """TRL's no-grad forwards of the step (the reference's log-probs for the KL term, old log-probs when the
        batch is reused) run on the rows the loss keeps only: a dropped group's rows are masked out of the loss,
        so their values (zeros here) are never read."""
        rows = self._scored_rows
        if torch.is_grad_enabled() or rows is None or len(rows) != len(input_ids) or bool(rows.all()):
            return super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep,
                                                              *args, **kwargs)
        index = rows.nonzero().squeeze(1).to(input_ids.device)
        if not len(index):  # every group dropped: nothing to score
            zeros = torch.zeros(len(input_ids), logits_to_keep, device=input_ids.device)
            return zeros, zeros if kwargs.get("compute_entropy") else None, None
        logps, entropies, aux = super()._get_per_token_logps_and_entropies(
            model, input_ids[index], attention_mask[index], logits_to_keep, *args, **kwargs)
        full = logps.new_zeros(len(input_ids), logps.shape[1]).index_copy(0, index, logps)
        if entropies is not None:
            entropies = entropies.new_zeros(full.shape).index_copy(0, index, entropies)
        return full, entropies, aux

    # -- loss ----------------------------------------------------------------------------------------
    def _compute_loss(self, model, inputs):  # noqa: ANN001
        """SMITH's L = L_DAPO(B_build) + L_DAPO(B_use), each normalised by its own kept-token count (all ranks),
        one backward pass. With one denominator (`dapo.loss_norm=batch`) the longer build completions would
        down-weight the use half. One call to TRL's loss, so its metrics are logged once per micro-step: each
        token's mask weight is N / N_kind (N = N_build + N_use), which over TRL's DAPO denominator N gives each
        kind's sum over its own count; TRL's masked means (entropy, clip ratios) are weighted the same way.
        Under a token-sum loss the rows without a kept token (a dropped group's) are left out first. A `frozen`
        run computes none."""
        if self.frozen:
            return torch.zeros((), device=self.accelerator.device, requires_grad=True)
        if self.loss_type in TOKEN_SUM_LOSSES:
            kept = has_kept_token(inputs)
            rows = torch.tensor([max(int(kept.sum()), 1)], device=kept.device)
            inputs = kept_rows(inputs, int(self.accelerator.gather(rows).max()))
        if self.args.loss_norm != "per_kind":
            return super()._compute_loss(model, inputs)
        build, use = inputs["num_items_build"], inputs["num_items_use"]
        total = build + use
        weight = torch.where(inputs["is_build"], total / build.clamp(min=1), total / use.clamp(min=1))
        mask = inputs["tool_mask"].float() * weight.unsqueeze(1).float()
        return super()._compute_loss(model, {**inputs, "tool_mask": mask, "num_items_in_batch": total})
