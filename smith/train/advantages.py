"""Advantage estimators, chosen by name (`dapo.advantage`) from a small registry, as verl's `register_adv_est`.

docs/architecture.md, "Rewards". `per_axis` is SMITH's (GDPO-style "normalize then sum"): each reward axis is
standardised within its GRPO group on its own, with a floor on the std so a near-constant noisy axis (a judge
score) is not blown up to unit variance; an axis that does not apply to a sample is NaN and contributes
nothing. `sum_then_normalize` is plain GRPO on the weighted sum of the axes (the ablation the per-axis split is
measured against). Both apply DAPO's dynamic sampling: a group with no reward variance carries no signal and is
dropped (`dapo.dynamic_sampling` refill or drop; the trainer has already replaced what refill could,
`SmithTrainer._rollout`), or kept with advantage 0 (off).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from smith.config import DapoConfig


@dataclass
class Advantages:
    advantages: torch.Tensor  # (N,) the advantage each sample is trained with
    per_axis: torch.Tensor  # (N, A) each axis' share of it before weighting (0 where the axis does not apply)
    keep: torch.Tensor  # (N,) bool: False for samples of dropped groups
    signal: torch.Tensor  # (N,) bool: the sample's group has reward variance (dropped or not)


Estimator = Callable[..., Advantages]
ADVANTAGES: dict[str, Estimator] = {}


def register_advantage(name: str) -> Callable[[Estimator], Estimator]:
    """Add an estimator `f(rewards (N, A) with NaN where an axis does not apply, num_generations, weights (A,),
    std_floor, dynamic_sampling) -> Advantages` under `name` (the value of `dapo.advantage`); `dynamic_sampling`
    is `dapo.dynamic_sampling`: any value but "off" drops the groups without signal."""

    def add(f: Estimator) -> Estimator:
        ADVANTAGES[name] = f
        return f

    return add


def _grouped(rewards: torch.Tensor, num_generations: int) -> tuple[torch.Tensor, torch.Tensor]:
    n, a = rewards.shape
    if n % num_generations:
        raise ValueError(f"{n} rewards do not split into groups of {num_generations}")
    grouped = rewards.view(-1, num_generations, a)
    return grouped, ~torch.isnan(grouped)


def _finish(adv: torch.Tensor, per_axis: torch.Tensor, signal: torch.Tensor, dynamic_sampling: str,
            shape: tuple[int, int]) -> Advantages:
    """(groups, G) advantages, (groups, G, A) per-axis parts, (groups,) signal -> flat Advantages, dropped zeroed."""
    n, a = shape
    keep = torch.ones_like(signal) if dynamic_sampling == "off" else signal
    g = adv.shape[1]
    return Advantages((adv * keep.unsqueeze(1)).reshape(n), per_axis.reshape(n, a), keep.repeat_interleave(g),
                      signal.repeat_interleave(g))


@register_advantage("per_axis")
def per_axis_advantages(rewards: torch.Tensor, num_generations: int, weights: torch.Tensor,
                        std_floor: float = DapoConfig.std_floor, dynamic_sampling: str = DapoConfig.dynamic_sampling,
                        eps: float = 1e-6) -> Advantages:
    """Standardise each axis within its group (std floored at `std_floor`), then take the weighted sum."""
    grouped, present = _grouped(rewards, num_generations)
    count = present.sum(dim=1, keepdim=True).clamp(min=1)
    filled = torch.where(present, grouped, torch.zeros_like(grouped))
    mean = filled.sum(dim=1, keepdim=True) / count
    var = (torch.where(present, grouped - mean, torch.zeros_like(grouped)) ** 2).sum(dim=1, keepdim=True) / count
    std = var.sqrt()
    z = torch.where(present, (grouped - mean) / std.clamp(min=std_floor), torch.zeros_like(grouped))
    adv = (z * weights.to(z).view(1, 1, -1)).sum(dim=-1)
    weighted = weights.to(z).view(1, 1, -1) != 0  # an axis weighted 0 moves no advantage: its variance is no signal
    signal = ((std > eps) & (present.sum(dim=1, keepdim=True) > 1) & weighted).any(dim=-1).squeeze(1)  # (groups,)
    return _finish(adv, z, signal, dynamic_sampling, rewards.shape)


@register_advantage("sum_then_normalize")
def summed_advantages(rewards: torch.Tensor, num_generations: int, weights: torch.Tensor,
                      std_floor: float = DapoConfig.std_floor, dynamic_sampling: str = DapoConfig.dynamic_sampling,
                      eps: float = 1e-6) -> Advantages:
    """GRPO on the weighted sum of the axes, standardised within the group. An axis that does not apply to a
    sample (NaN: a faulted r_eval, an unparsed verdict) counts as its group's mean on that axis, so it moves the
    sample's advantage neither way (a 0 there would be a penalty); an axis absent from the whole group counts 0."""
    grouped, present = _grouped(rewards, num_generations)
    count = present.sum(dim=1, keepdim=True)
    mean = torch.where(present, grouped, torch.zeros_like(grouped)).sum(dim=1, keepdim=True) / count.clamp(min=1)
    filled = torch.where(present, grouped, mean.expand_as(grouped))
    total = (filled * weights.to(filled).view(1, 1, -1)).sum(dim=-1)  # (groups, G)
    mean, std = total.mean(dim=1, keepdim=True), total.std(dim=1, unbiased=False, keepdim=True)
    scale = std.clamp(min=std_floor)
    adv = (total - mean) / scale
    per_axis = torch.where(present, (filled - filled.mean(dim=1, keepdim=True)) / scale.unsqueeze(-1),
                           torch.zeros_like(filled))
    return _finish(adv, per_axis, std.squeeze(1) > eps, dynamic_sampling, rewards.shape)
