"""Format reward r_fmt in {0, 0.5} (SMITH paper, "Format reward"; docs/architecture.md, "Rewards").

The response must hold exactly one Python block and one JSON block whose function name and parameters
match (smith.toolspec.parse_response). A malformed pair ends the episode with zero on every axis except
the judge's own branches (smith.rollout.episodes.Rollout.grade_build applies that rule).
"""

from __future__ import annotations

from smith.toolspec import ParseResult

FORMAT_REWARD = 0.5


def format_reward(parse_result: ParseResult) -> float:
    """0.5 for a well-formed (python, json) pair, else 0."""
    return FORMAT_REWARD if parse_result.ok else 0.0
