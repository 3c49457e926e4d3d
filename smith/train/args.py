"""`SmithGRPOConfig`: TRL's GRPOConfig plus the smith settings that reach the trainer, the way TRL's own extensions
subclass it (trl/experimental/gmpo/gmpo_config.py). smith.train.run.grpo_args builds it from the typed config;
SmithTrainer reads these fields from `self.args`. Defaults come from smith.config, their one home."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig

from smith.config import DapoConfig


@dataclass
class SmithGRPOConfig(GRPOConfig):
    advantage: str = field(default=DapoConfig.advantage, metadata={
        "help": "Name of the advantage estimator (`dapo.advantage`): per_axis normalises each reward axis within "
                "its group and takes the weighted sum; sum_then_normalize (smith.train.advantages)."})
    std_floor: float = field(default=DapoConfig.std_floor, metadata={
        "help": "Floor on each axis' within-group std in per-axis advantages (`dapo.std_floor`)."})
    dynamic_sampling: bool = field(default=DapoConfig.dynamic_sampling, metadata={
        "help": "Drop groups whose every reward axis has zero variance (DAPO's dynamic sampling; "
                "`dapo.dynamic_sampling`)."})
    loss_norm: str = field(default=DapoConfig.loss_norm, metadata={
        "help": "per_kind: L_DAPO(build) + L_DAPO(use), each normalised by its own token count (the paper); "
                "batch: TRL's one token count (`dapo.loss_norm`).",
        "choices": ["per_kind", "batch"]})
