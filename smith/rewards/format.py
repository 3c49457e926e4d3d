"""Format reward r_fmt in {0, 0.5} (SMITH paper, "Format reward"; DESIGN.md sections 2 and 7).

The response must hold exactly one Python block and one JSON block whose function name and parameters
match (smith.toolspec.parse_response). A malformed pair ends the episode with zero on every axis:
`gate` applies that rule to an episode's reward axes.
"""

from __future__ import annotations

from collections.abc import Mapping

from smith.toolspec import ParseResult

FORMAT_REWARD = 0.5


def format_reward(parse_result: ParseResult) -> float:
    """0.5 for a well-formed (python, json) pair, else 0."""
    return FORMAT_REWARD if parse_result.ok else 0.0


def gate(parse_result: ParseResult, rewards: Mapping[str, float]) -> dict[str, float]:
    """The episode's axes as they stand if the pair is well formed; every axis 0.0 if it is not."""
    return dict(rewards) if parse_result.ok else dict.fromkeys(rewards, 0.0)
