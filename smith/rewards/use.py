"""Use-episode correctness with an efficiency multiplier (SMITH paper, "Use-task correctness"):

    r_correct = 2 c eta(rho),  rho = min(n / T, 1),
    eta(rho) = 1 - 2 (1 - eta_mid) rho                              for rho <= 0.5
             = max(eta_min, eta_mid (1 - 2 (rho - 0.5))^2)           for rho >  0.5

with the paper's eta_mid = 0.7 and eta_min = 0.3 (`use.eta_mid`, `use.eta_min` in smith.config, where the
defaults below come from), so eta(0) = 1, eta(0.5) = 0.7 and eta(rho >= 0.75) = 0.3: the floor keeps a correct
answer worth more than a wrong one even at the turn limit.
"""

from __future__ import annotations

from smith.config import UseConfig


def efficiency(rho: float, eta_mid: float = UseConfig.eta_mid, eta_min: float = UseConfig.eta_min) -> float:
    """eta(rho) for a turn fraction rho in [0, 1] (values outside are clipped)."""
    rho = min(max(rho, 0.0), 1.0)
    if rho <= 0.5:
        return 1.0 - 2.0 * (1.0 - eta_mid) * rho
    return max(eta_min, eta_mid * (1.0 - 2.0 * (rho - 0.5)) ** 2)


def correctness_reward(
    correct: bool,
    turns: int,
    max_turns: int = UseConfig.max_turns,
    eta_mid: float = UseConfig.eta_mid,
    eta_min: float = UseConfig.eta_min,
) -> float:
    """r_correct = 2 c eta(min(turns / max_turns, 1)); `turns` is the number of assistant turns used."""
    if max_turns <= 0:
        raise ValueError(f"max_turns must be positive, got {max_turns}")
    if turns < 0:
        raise ValueError(f"turns must be >= 0, got {turns}")
    if not correct:
        return 0.0
    return 2.0 * efficiency(min(turns / max_turns, 1.0), eta_mid, eta_min)
