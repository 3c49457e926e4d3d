"""SmithGRPOConfig: TRL's GRPOConfig plus the settings of smith's own steps inside the trainer."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig


@dataclass
class SmithGRPOConfig(GRPOConfig):
    advantage: str = field(default="per_axis", metadata={"help": "advantage estimator (smith.train.advantages)"})
    std_floor: float = field(default=0.1, metadata={"help": "per-axis std floor"})
    dynamic_sampling: bool = field(default=True, metadata={"help": "drop groups with no reward variance"})
    loss_norm: str = field(default="per_kind", metadata={"help": "per_kind | batch"})
