"""smith.rewards: format, use (eta), judge (prompt, parser, mapping) as pure functions with
hand-computed values."""

from __future__ import annotations

import json
import logging
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from smith.rewards import efficiency
from smith.rewards.format import format_reward
from smith.rewards.judge import JUDGE_NEUTRAL, JudgeScores, judge_prompt, judge_reward, parse_judge_reply
from smith.rewards.tool import answer_uses, tool_execution_reward
from smith.rewards.use import correctness_reward
from smith.toolspec import ParseResult, Reason, ToolSpec

OK = ParseResult(True, Reason.OK, code="def solve(question):\n    return question", schema={}, function_name="solve")
SYNTAX = ParseResult(False, Reason.SYNTAX_ERROR, detail="line 1")
MISMATCH = ParseResult(False, Reason.PARAM_MISMATCH, detail="x")
MISSING = ParseResult(False, Reason.MISSING_JSON_BLOCK, detail="no json")


# ---------------------------------------------------------------- format


def test_format_reward_is_half_or_zero():
    assert format_reward(OK) == 0.5
    for bad in (SYNTAX, MISMATCH, MISSING):
        assert format_reward(bad) == 0.0


# ---------------------------------------------------------------- use: eta and r_correct


@pytest.mark.parametrize(
    ("rho", "eta"),
    [
        (0.0, 1.0),
        (0.2, 0.88),  # 1 - 2 * 0.3 * 0.2
        (0.25, 0.85),
        (0.4, 0.76),
        (0.5, 0.7),
        (0.6, 0.448),  # 0.7 * (1 - 0.2)^2
        (0.7, 0.3),  # 0.7 * 0.6^2 = 0.252 is under the floor 0.3
        (0.75, 0.3),
        (1.0, 0.3),
    ],
)
def test_efficiency_hand_values(rho, eta):
    assert efficiency(rho) == pytest.approx(eta)


def test_efficiency_parameters_and_clipping():
    assert efficiency(0.5, eta_mid=0.5) == pytest.approx(0.5)
    assert efficiency(0.55, eta_mid=0.8, eta_min=0.0) == pytest.approx(0.8 * 0.9**2)
    assert efficiency(-1.0) == 1.0 and efficiency(3.0) == 0.3


@given(st.floats(0, 1), st.floats(0, 1))
def test_efficiency_never_increases_with_turns_and_respects_the_floor(a, b):
    lo, hi = sorted((a, b))
    assert efficiency(hi) <= efficiency(lo) + 1e-12
    assert 0.3 - 1e-12 <= efficiency(hi) <= 1.0


@pytest.mark.parametrize(
    ("turns", "reward"),
    [(0, 2.0), (1, 1.76), (2, 1.52), (3, 0.896), (4, 0.6), (5, 0.6), (9, 0.6)],  # T = 5: rho = n / 5
)
def test_correctness_reward_hand_values(turns, reward):
    assert correctness_reward(True, turns) == pytest.approx(reward)
    assert correctness_reward(False, turns) == 0.0


@pytest.mark.parametrize(("used", "failed", "answered", "reward"), [
    (True, 0, True, 0.2), (False, 0, True, 0.0), (True, 1, True, 0.1 / 1.5), (False, 2, True, -0.4 / 1.5),
    (False, 0, False, -0.5 / 1.5), (True, 1, False, -0.4 / 1.5),
])
def test_tool_execution_reward_hand_values(used, failed, answered, reward):
    assert tool_execution_reward(used, failed, answered) == pytest.approx(reward)


def test_the_tool_axis_ranks_a_call_above_a_guess():
    """On the use axis alone a correct guess in one turn (1.76) beats calling the tool and then answering (1.52);
    the tool axis, normalised in its group like every axis, ranks the other way."""
    assert correctness_reward(True, 1) > correctness_reward(True, 2)
    assert tool_execution_reward(True, 0, True) > tool_execution_reward(False, 0, True)
    assert tool_execution_reward(True, 0, False) < tool_execution_reward(False, 0, True)
    with pytest.raises(ValueError):
        tool_execution_reward(True, -1, True)


@pytest.mark.parametrize(("answer", "output", "uses"), [
    ("12", "12", True), ("The LCM is 12.", "12", True), ("a b c", "ABC", True), ("12", "", False),
    (None, "12", False), ("3, 5", "[3, 5]", False), ("12", "24", False),
])
def test_an_answer_uses_a_calls_output_when_it_carries_it(answer, output, uses):
    assert answer_uses(answer, output) is uses


def test_correctness_reward_rejects_bad_turns():
    assert correctness_reward(True, 2, max_turns=2) == pytest.approx(0.6)
    with pytest.raises(ValueError, match="max_turns"):
        correctness_reward(True, 1, max_turns=0)
    with pytest.raises(ValueError, match="turns"):
        correctness_reward(True, -1)


# ---------------------------------------------------------------- judge


def test_judge_prompt_shows_code_and_schema():
    spec = ToolSpec("def solve(question):\n    return question", {"name": "solve", "description": "echo"}, "solve")
    msgs = judge_prompt(spec)
    assert [m["role"] for m in msgs] == ["system", "user"]
    user = msgs[1]["content"]
    assert "def solve(question)" in user and '"description": "echo"' in user
    for key in ("code_correctness", "schema_quality", "overall"):
        assert key in user
    assert "raw response text" in judge_prompt("raw response text")[1]["content"]


@pytest.mark.parametrize(
    ("reply", "scores"),
    [
        ('{"code_correctness": 0.8, "schema_quality": 0.6, "overall": 0.7}', (0.8, 0.6, 0.7)),
        (
            '<think>maybe "overall": 0.1</think>\n```json\n'
            '{"code_correctness": 1, "schema_quality": 0.5, "overall": 0.9}\n```',
            (1.0, 0.5, 0.9),
        ),
        ("Code correctness: 8/10\nSchema quality: 6/10\nOverall: 7/10", (0.8, 0.6, 0.7)),
        ("**code_correctness**: 9\n**schema_quality**: 4\n**overall_score**: 6", (0.9, 0.4, 0.6)),
        ("code_correctness = 75, schema_quality = 50, overall = 100", (0.75, 0.5, 1.0)),
        ('{"overall": 0.2, "code_correctness": 0.3, "schema_quality": 0.4} then {"overall": 0.5}', (0.3, 0.4, 0.5)),
    ],
)
def test_parse_judge_reply_reads_common_formats(reply, scores):
    parsed = parse_judge_reply(reply)
    assert parsed is not None
    assert (parsed.code_correctness, parsed.schema_quality, parsed.overall) == pytest.approx(scores)


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "looks great to me",
        '{"code_correctness": 0.8, "schema_quality": 0.6}',  # overall missing
        '{"code_correctness": 0.8, "schema_quality": 0.6, "overall": 250}',  # out of any scale
        '{"code_correctness": -0.2, "schema_quality": 0.6, "overall": 0.5}',
        None,
    ],
)
def test_parse_judge_reply_gives_none_when_unreadable(reply):
    assert parse_judge_reply(reply) is None


@given(st.text(max_size=300))
def test_parse_judge_reply_never_raises(text):
    parsed = parse_judge_reply(text)
    assert parsed is None or all(0 <= v <= 1 for v in (parsed.code_correctness, parsed.schema_quality, parsed.overall))


def test_judge_reward_mapping(caplog):
    s = JudgeScores(code_correctness=0.9, schema_quality=0.4, overall=0.8)
    assert judge_reward(OK, s) == pytest.approx(0.8)
    assert judge_reward(MISMATCH, s) == pytest.approx(0.4)
    assert judge_reward(ParseResult(False, Reason.NAME_NOT_IN_CODE), s) == pytest.approx(0.4)
    assert judge_reward(SYNTAX, s) == -0.5
    assert judge_reward(SYNTAX, None) == -0.5
    with caplog.at_level(logging.WARNING, logger="smith.rewards.judge"):
        value = judge_reward(OK, parse_judge_reply("no scores here"))
    assert math.isnan(value) and math.isnan(JUDGE_NEUTRAL)
    assert "neutral" in caplog.text


def test_judge_prompt_round_trip_through_a_scripted_reply():
    """A judge double that answers in the format the prompt asks for is parsed exactly."""
    example = judge_prompt("x")[1]["content"].split("for example:\n")[1].split("\n")[0]
    assert parse_judge_reply(example) == JudgeScores(**json.loads(example))
