"""Per-axis advantages: normalise each reward axis within its group, then take the weighted sum.

docs/architecture.md, "Rewards" (GDPO-style "normalize then sum"): each axis is standardised within its GRPO
group on its own, with a floor on the std so a near-constant noisy axis (a judge score) is not blown
up to unit variance; an axis that does not apply to a sample is NaN and contributes nothing. DAPO's
dynamic sampling: a group whose every axis has zero variance carries no signal and is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from smith.config import DapoConfig


@dataclass
class Advantages:
    advantages: torch.Tensor  # (N,) weighted sum of per-axis standardised rewards
    per_axis: torch.Tensor  # (N, A) standardised rewards (0 where the axis does not apply)
    keep: torch.Tensor  # (N,) bool: False for samples of dropped groups


def per_axis_advantages(
    rewards: torch.Tensor,
    num_generations: int,
    weights: torch.Tensor,
    std_floor: float = DapoConfig.std_floor,
    drop_zero_variance: bool = DapoConfig.dynamic_sampling,
    eps: float = 1e-6,
) -> Advantages:
    """rewards: (N, A) with N = groups x num_generations, NaN where an axis does not apply."""
    n, a = rewards.shape
    if n % num_generations:
        raise ValueError(f"{n} rewards do not split into groups of {num_generations}")
    grouped = rewards.view(-1, num_generations, a)
    present = ~torch.isnan(grouped)
    count = present.sum(dim=1, keepdim=True).clamp(min=1)
    filled = torch.where(present, grouped, torch.zeros_like(grouped))
    mean = filled.sum(dim=1, keepdim=True) / count
    var = (torch.where(present, grouped - mean, torch.zeros_like(grouped)) ** 2).sum(dim=1, keepdim=True) / count
    std = var.sqrt()
    z = torch.where(present, (grouped - mean) / std.clamp(min=std_floor), torch.zeros_like(grouped))
    adv = (z * weights.to(z).view(1, 1, a)).sum(dim=-1)
    has_signal = ((std > eps) & (present.sum(dim=1, keepdim=True) > 1)).any(dim=-1).squeeze(1)  # (groups,)
    keep = has_signal if drop_zero_variance else torch.ones_like(has_signal)
    adv = adv * keep.unsqueeze(1)
    return Advantages(adv.reshape(n), z.reshape(n, a), keep.repeat_interleave(num_generations))
