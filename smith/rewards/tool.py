"""Use-episode tool execution, its own axis (the reference code's `use_exec` reward; the paper's use episodes
have "up to T = 5 turns to call the tool and answer"):

    r_tool = (0.3 [the answer uses the output of a call of the task's own tool] - 0.2 failed_calls
              - 0.5 [no answer]) / 1.5

Without it the use axis pays more for a lucky guess in one turn (eta counts every assistant turn) than for calling
the tool and answering. Deviation from the reference, which pays 0.3 for each call that ran: the credit is paid
once, and only for a call of the task's category tool whose output the final answer carries; calling every menu
tool, distractors included, and answering from one of them earns nothing, and repeating calls earns nothing. A
call the sandbox itself faulted on (twice) is the machine's failure: the episode carries no signal at all
(smith.rollout.episodes.Rollout._score_use), so it never reaches this function.
"""

from __future__ import annotations

import re

RAN, FAILED, NO_ANSWER, SCALE = 0.3, 0.2, 0.5, 1.5
_SPACE = re.compile(r"\s+")


def answer_uses(answer: str | None, output: str) -> bool:
    """Whether a final answer carries a call's output (whitespace and case aside): `12` uses `12`, `The LCM is 12`
    does too; an empty output is used by nothing."""
    out = _SPACE.sub("", output).lower()
    return bool(out) and answer is not None and out in _SPACE.sub("", answer).lower()


def tool_execution_reward(used: bool, failed: int, answered: bool) -> float:
    """r_tool for an episode whose answer does or does not use its own tool's output (`used`, answer_uses), with
    `failed` calls that raised, timed out, named no menu tool or had bad arguments, and a final answer or none."""
    if failed < 0:
        raise ValueError(f"failed calls must be >= 0, got {failed}")
    return (RAN * used - FAILED * failed - NO_ANSWER * (not answered)) / SCALE
