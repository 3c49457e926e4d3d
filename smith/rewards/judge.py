"""Judge reward (SMITH paper, "Judge reward"): an LLM judge rates code correctness, schema quality and
overall quality in [0, 1], kept as its own axis, and

    r_judge = -0.5            on a syntax error
              0.5 s_overall   when schema and code disagree
              s_overall       otherwise.

An unparseable judge reply is logged and gives `JUDGE_NEUTRAL` = NaN: "no judgement", which the
per-axis advantage (docs/architecture.md, "Rewards") ignores like an axis that does not apply, so a broken reply
neither rewards nor punishes the tool. A malformed build zeroes every other axis; these two branches are
the judge axis of such a build (smith.rollout.episodes.Rollout.grade_build).
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass
from typing import Any

from smith.models.chat_format import without_reasoning
from smith.toolspec import ParseResult, Reason, ToolSpec

log = logging.getLogger(__name__)

JUDGE_NEUTRAL = float("nan")
SYNTAX_ERROR_REWARD = -0.5
MISMATCH_FACTOR = 0.5
_KEYS = ("code_correctness", "schema_quality", "overall")

SYSTEM = (
    "You review Python tools written for an LLM to call. Each tool is a Python function plus the OpenAI "
    "function schema that describes it. Be strict and concrete."
)
INSTRUCTIONS = """Rate the tool below on three scores, each a number from 0 to 1:
- code_correctness: does the code run and compute what its description promises for every valid input?
- schema_quality: do the name, description and parameter descriptions tell a caller exactly when and how
  to use it, and do they match the code's signature?
- overall: how useful and reusable is this tool for the whole family of questions it targets?

Reply with one JSON object and nothing else, for example:
{"code_correctness": 0.8, "schema_quality": 0.6, "overall": 0.7}"""


@dataclass(frozen=True)
class JudgeScores:
    code_correctness: float
    schema_quality: float
    overall: float


def judge_prompt(tool: ToolSpec | str) -> list[dict[str, Any]]:
    """Chat messages asking the judge to rate `tool` (a ToolSpec, or a raw build response)."""
    if isinstance(tool, ToolSpec):
        body = f"```python\n{tool.code}\n```\n```json\n{json.dumps(tool.schema, indent=2)}\n```"
    else:
        body = tool
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"{INSTRUCTIONS}\n\nTool:\n{body}"},
    ]


_NUMBER = r"(-?\d+(?:\.\d+)?)(?:\s*/\s*(\d+(?:\.\d+)?))?"
_ALIASES = {
    "code_correctness": r"code[ _-]?correctness",
    "schema_quality": r"schema[ _-]?quality",
    "overall": r"overall(?:[ _-]?(?:quality|score))?",
}
_FIELD = {k: re.compile(rf"{a}[\"'*\s]*[:=]\s*[\"*]*{_NUMBER}", re.I) for k, a in _ALIASES.items()}


def _unit(value: float, denominator: float | None) -> float | None:
    """A score as a fraction in [0, 1]: "7/10" and a bare 7 (0-10 scale) or 70 (0-100) are rescaled."""
    if denominator:
        value = value / denominator
    elif 1 < value <= 10:
        value = value / 10
    elif 10 < value <= 100:
        value = value / 100
    return value if 0.0 <= value <= 1.0 and math.isfinite(value) else None


def parse_judge_reply(text: str) -> JudgeScores | None:
    """The three scores from a judge reply (a JSON object, or `key: value` lines; the last occurrence of
    each key wins, the judge's reasoning is skipped), or None if any score is missing or out of range."""
    if not isinstance(text, str):
        return None
    text = without_reasoning(text)
    found: dict[str, float] = {}
    for key, pattern in _FIELD.items():
        matches = pattern.findall(text)
        if not matches:
            return None
        num, den = matches[-1]
        value = _unit(float(num), float(den) if den else None)
        if value is None:
            return None
        found[key] = value
    return JudgeScores(**found)


def judge_reward(parse_result: ParseResult, scores: JudgeScores | None) -> float:
    """r_judge from the build's parse result and the judge's scores (None: the reply did not parse)."""
    if parse_result.reason == Reason.SYNTAX_ERROR:
        return SYNTAX_ERROR_REWARD
    if scores is None:
        log.warning("judge reply did not parse; judge axis set to the neutral value (NaN)")
        return JUDGE_NEUTRAL
    if parse_result.reason in (Reason.NAME_NOT_IN_CODE, Reason.PARAM_MISMATCH):
        return MISMATCH_FACTOR * scores.overall
    return scores.overall
