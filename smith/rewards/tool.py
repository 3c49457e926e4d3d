"""Use-episode tool execution, its own axis (the reference code's `use_exec` reward; the paper's use episodes
have "up to T = 5 turns to call the tool and answer"):

    r_tool = (0.3 [a call ran] - 0.2 failed_calls - 0.5 [no answer]) / 1.5

Without it the use axis pays more for a lucky guess in one turn (eta counts every assistant turn) than for calling
the tool and answering. A call that ran is paid once, not per call as in the reference, so repeating calls earns
nothing; a call the sandbox itself faulted on is the machine's failure and counts neither way.
"""

from __future__ import annotations

RAN, FAILED, NO_ANSWER, SCALE = 0.3, 0.2, 0.5, 1.5


def tool_execution_reward(ran: int, failed: int, answered: bool) -> float:
    """r_tool for an episode with `ran` calls that returned, `failed` that raised, timed out, named no menu tool or
    had bad arguments, and a final answer or none."""
    if ran < 0 or failed < 0:
        raise ValueError(f"call counts must be >= 0, got ran={ran} failed={failed}")
    return (RAN * (ran > 0) - FAILED * failed - NO_ANSWER * (not answered)) / SCALE
