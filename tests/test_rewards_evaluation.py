"""r_eval through the real strict sandbox: the direct evaluator, the model evaluator (a scripted chat
double stands in for the LLM's text), and `smith grade`."""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import Limits
from smith.evals.grade import grade_cli
from smith.models.base import Generation
from smith.rewards.evaluation import EVALUATOR_SYSTEM, evaluate_direct, evaluate_many, evaluate_with_model
from smith.tasks import items
from smith.toolspec import ToolSpec, spec_from_source

from .conftest import fork_server_killer, mark

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "tests" / "reference_tools"
K = 16
LIMITS = Limits(timeout_s=5, memory_mb=512)
SCHEMA = {
    "name": "solve",
    "description": "Counts the 1-bits of the number in the question.",
    "parameters": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]},
}


@pytest.fixture(scope="module")
def hard(rg_cache):
    return items("count_bits", "hard", K, 0, rg_cache)


def spec(code: str, schema: dict | None = None) -> ToolSpec:
    return ToolSpec(code, schema or SCHEMA, "solve")


REFERENCE_SPEC = spec((REFERENCE / "count_bits.py").read_text())


def memorising_tool(rg_cache) -> str:
    """What a writer that only pattern-matches its 4 easy examples produces: a lookup table."""
    table = {it.question: it.answer for it in items("count_bits", "easy", 4, 0, rg_cache)}
    return f"TABLE = {table!r}\n\n\ndef solve(question):\n    return TABLE.get(question, '1')\n"


# ---------------------------------------------------------------- direct evaluator


def test_direct_reference_tool_scores_k_of_k(hard, sandbox):
    res = evaluate_direct(REFERENCE_SPEC, hard, sandbox, LIMITS)
    assert (res.correct, res.k, res.r_eval) == (K, K, 1.0)
    assert all(t.status == "correct" and t.answer == t.expected for t in res.traces)


def test_direct_memorising_tool_scores_zero_on_the_hard_band(hard, sandbox, rg_cache):
    easy = items("count_bits", "easy", 4, 0, rg_cache)
    tool = spec(memorising_tool(rg_cache))
    assert evaluate_direct(tool, easy, sandbox, LIMITS).r_eval == 1.0  # perfect on what it memorised
    res = evaluate_direct(tool, hard, sandbox, LIMITS)
    assert res.r_eval == 0.0 and {t.status for t in res.traces} == {"wrong"}


def test_direct_failures_are_per_question_and_named(hard, sandbox):
    boom = evaluate_direct(spec("def solve(question):\n    raise ValueError('no digits')"), hard[:3], sandbox, LIMITS)
    assert boom.r_eval == 0.0 and all(t.status == "error" and "ValueError: no digits" in t.error for t in boom.traces)
    slow = evaluate_direct(spec("def solve(question):\n    while True:\n        pass"), hard[:2], sandbox, Limits(1))
    assert [t.status for t in slow.traces] == ["timeout", "timeout"]
    broken = evaluate_direct(spec("def solve(question:\n    return 1"), hard[:2], sandbox, LIMITS)
    assert all(t.status == "error" and "SyntaxError" in t.error for t in broken.traces)
    two = {**SCHEMA, "parameters": {**SCHEMA["parameters"], "required": ["question", "base"]}}
    unsupported = evaluate_direct(spec("def solve(question, base):\n    return 1", two), hard[:2], sandbox, LIMITS)
    assert unsupported.r_eval == 0.0 and {t.status for t in unsupported.traces} == {"unsupported"}


def test_the_tool_sees_the_question_text_and_nothing_else(hard, sandbox):
    spy = spec("import json\n\n\ndef solve(**kwargs):\n    return json.dumps(kwargs)")
    res = evaluate_direct(spy, hard[:4], sandbox, LIMITS)
    for it, t in zip(hard[:4], res.traces, strict=True):
        assert json.loads(t.answer) == {"question": it.question}


def test_non_string_return_values_are_graded_as_text(hard, sandbox):
    ints = spec(
        "import re\n\n\ndef solve(question):\n    return bin(int(re.findall(r'\\d+', question)[-1])).count('1')"
    )
    assert evaluate_direct(ints, hard[:4], sandbox, LIMITS).r_eval == 1.0


# ---------------------------------------------------------------- model evaluator


class ScriptedEvaluator:
    """A ChatBackend double: `policy(conversation) -> text` plays the evaluator model's part."""

    name = "scripted"

    def __init__(self, policy):
        self.policy = policy
        self.batches: list[tuple[int, list]] = []

    def chat(self, conversations, tools=None, params=None):
        self.batches.append((len(conversations), tools))
        return [Generation(self.policy(conv)) for conv in conversations]


def call(question: str, name: str = "solve", **extra) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': {'question': question, **extra}})}\n</tool_call>"


def question_of(conv) -> str:
    return next(m["content"] for m in conv if m["role"] == "user")


def caller(conv) -> str:
    """Calls the tool with the question, then repeats the tool's output."""
    return call(question_of(conv)) if conv[-1]["role"] == "user" else conv[-1]["content"]


def test_model_evaluator_counts_answers_that_came_through_the_tool(hard, sandbox):
    backend = ScriptedEvaluator(caller)
    res = evaluate_with_model(REFERENCE_SPEC, hard, backend, sandbox, LIMITS)
    assert (res.correct, res.r_eval) == (K, 1.0)
    assert [n for n, _ in backend.batches] == [K, K]  # one batched chat call per turn, all K questions
    assert backend.batches[0][1] == [[REFERENCE_SPEC.openai_tool()]] * K
    t = res.traces[0]
    assert t.turns == 2 and t.calls[0]["status"] == "ok" and t.calls[0]["arguments"] == {"question": hard[0].question}


def test_many_tools_share_the_evaluators_batches_and_each_is_graded_on_its_own(hard, sandbox):
    """A step's builds share the evaluator's batches (one chat call per turn for every question of every tool);
    each tool is graded on its own questions by its own code, under its own name, as it would be alone."""
    off_by_one = spec("import re\n\n\ndef solve(question):\n"
                      "    return str(bin(int(re.findall(r'\\d+', question)[-1])).count('1') + 1)")
    renamed = ToolSpec(REFERENCE_SPEC.code.replace("def solve", "def bits"), {**SCHEMA, "name": "bits"}, "bits")

    def by_name(conv):  # calls whichever tool the conversation offers: its name is in the question's tools
        return call(question_of(conv), name=names[question_of(conv)]) if conv[-1]["role"] == "user" \
            else conv[-1]["content"]

    jobs = [(REFERENCE_SPEC, hard[:6]), (off_by_one, hard[6:10]), (renamed, hard[10:])]
    names = {it.question: s.function_name for s, its in jobs for it in its}
    backend = ScriptedEvaluator(by_name)
    together = evaluate_many(jobs, backend, sandbox, LIMITS)
    assert [n for n, _ in backend.batches] == [K, K]  # 6 + 4 + 6 questions, two turns, one batch each
    assert backend.batches[0][1] == [[s.openai_tool()] for s, its in jobs for _ in its]
    assert [(r.correct, r.k, r.r_eval) for r in together] == [(6, 6, 1.0), (0, 4, 0.0), (6, 6, 1.0)]
    alone = [evaluate_with_model(s, its, ScriptedEvaluator(by_name), sandbox, LIMITS) for s, its in jobs]
    def shape(r):  # what happened to each question, without the timings
        return [(t.item_id, t.status, t.answer, t.turns, [(c["name"], c["arguments"], c["status"]) for c in t.calls])
                for t in r.traces]

    assert [shape(r) for r in together] == [shape(r) for r in alone]
    assert evaluate_many([], backend, sandbox, LIMITS) == []
    with pytest.raises(ValueError, match="no questions"):
        evaluate_many([(REFERENCE_SPEC, [])], backend, sandbox, LIMITS)


def test_model_evaluator_conversation_shape(hard, sandbox):
    seen = []

    def recorder(conv):
        seen.append([dict(m) for m in conv])
        return caller(conv)

    evaluate_with_model(REFERENCE_SPEC, hard[:1], ScriptedEvaluator(recorder), sandbox, LIMITS)
    first, second = seen
    assert first == [{"role": "system", "content": EVALUATOR_SYSTEM}, {"role": "user", "content": hard[0].question}]
    assistant, tool = second[2], second[3]
    assert assistant["tool_calls"][0]["function"] == {"name": "solve", "arguments": {"question": hard[0].question}}
    assert tool == {"role": "tool", "tool_call_id": assistant["tool_calls"][0]["id"], "content": hard[0].answer}


def test_answers_reasoned_out_in_text_count_for_nothing(hard, sandbox):
    truth = {it.question: it.answer for it in hard}
    res = evaluate_with_model(REFERENCE_SPEC, hard, ScriptedEvaluator(lambda c: truth[question_of(c)]), sandbox, LIMITS)
    assert res.r_eval == 0.0 and {t.status for t in res.traces} == {"no_tool_call"}


def test_the_last_successful_call_is_graded_not_the_prose(hard, sandbox):
    def retry_then_lie(conv):
        n_tool = sum(m["role"] == "tool" for m in conv)
        if n_tool == 0:
            return call("the number 0")  # a wrong first call
        if n_tool == 1:
            return call(question_of(conv))  # then the right one
        return "I think the answer is 3."  # prose is never graded

    res = evaluate_with_model(REFERENCE_SPEC, hard[:4], ScriptedEvaluator(retry_then_lie), sandbox, LIMITS)
    assert res.r_eval == 1.0 and all(len(t.calls) == 2 for t in res.traces)


def test_bad_calls_are_fed_back_and_fail_the_question(hard, sandbox):
    def wrong_name(conv):
        return call(question_of(conv), name="solver") if conv[-1]["role"] == "user" else "sorry"

    res = evaluate_with_model(REFERENCE_SPEC, hard[:2], ScriptedEvaluator(wrong_name), sandbox, LIMITS)
    assert res.r_eval == 0.0 and all(t.status == "error" and "unknown tool" in t.calls[0]["error"] for t in res.traces)

    def bad_args(conv):
        return '<tool_call>{"name": "solve", "arguments": {"q": "5"}}</tool_call>' if len(conv) == 2 else "done"

    res = evaluate_with_model(REFERENCE_SPEC, hard[:2], ScriptedEvaluator(bad_args), sandbox, LIMITS)
    assert res.r_eval == 0.0 and "'question' is a required property" in res.traces[0].calls[0]["error"]

    def unreadable(conv):
        return "<tool_call>{not json</tool_call>" if len(conv) == 2 else caller(conv[:2])

    backend = ScriptedEvaluator(unreadable)
    res = evaluate_with_model(REFERENCE_SPEC, hard[:2], backend, sandbox, LIMITS, max_turns=3)
    assert res.r_eval == 1.0  # the parse error went back as feedback and the evaluator recovered

    crash = spec("def solve(question):\n    raise KeyError('x')")
    res = evaluate_with_model(crash, hard[:2], ScriptedEvaluator(caller), sandbox, LIMITS)
    assert {t.status for t in res.traces} == {"error"} and "KeyError" in res.traces[0].error


def test_max_turns_bounds_the_conversation(hard, sandbox):
    backend = ScriptedEvaluator(lambda conv: call("the number 0"))  # never stops calling
    res = evaluate_with_model(REFERENCE_SPEC, hard[:3], backend, sandbox, LIMITS, max_turns=2)
    assert len(backend.batches) == 2 and all(t.turns == 2 and len(t.calls) == 2 for t in res.traces)
    with pytest.raises(ValueError, match="max_turns"):
        evaluate_with_model(REFERENCE_SPEC, hard[:1], backend, sandbox, LIMITS, max_turns=0)


# ---------------------------------------------------------------- sandbox faults are not rewards


def marked_tool(question: str) -> ToolSpec:
    """The reference tool, which on `question` marks its process and sleeps, so its fork server can be killed
    during that call."""
    code = (REFERENCE / "count_bits.py").read_text() + (
        "\n\nimport time\n_solve = solve\n\n\ndef solve(question):\n"
        f"    if question == {question!r}:\n" + mark(" " * 8)
        + "        time.sleep(3)\n    return _solve(question)\n"
    )
    return spec(code)


@pytest.mark.parametrize("evaluator", ["direct", "model"])
def test_a_fork_server_killed_mid_call_is_retried_once_then_left_out(evaluator, hard, sandbox):
    """Grading calls are pure: a call whose fork server dies (a real SIGKILL, mid-call) runs once more; when
    that one dies too, the question leaves r_eval's denominator instead of scoring 0."""
    questions = hard[:4]
    tool = marked_tool(questions[1].question)

    def evaluate():
        if evaluator == "direct":
            return evaluate_direct(tool, questions, sandbox, LIMITS)
        return evaluate_with_model(tool, questions, ScriptedEvaluator(caller), sandbox, LIMITS)

    with fork_server_killer(times=1) as killed:
        res = evaluate()
    assert len(killed) == 1
    assert (res.r_eval, res.correct, res.k, res.faults) == (1.0, 4, 4, 0)  # the retry answered
    with fork_server_killer(times=2) as killed:
        res = evaluate()
    assert len(killed) == 2
    assert (res.r_eval, res.correct, res.k, res.faults) == (1.0, 3, 3, 1)  # left out, not 0
    left_out = res.traces[1]
    assert left_out.status == "fault" and "sandbox worker failed during the call" in left_out.error
    assert [t.status for t in res.traces[::2]] == ["correct", "correct"]
    assert sandbox.quiesce()  # both workers replaced
    assert evaluate_direct(REFERENCE_SPEC, questions, sandbox, LIMITS).r_eval == 1.0


def test_a_question_whose_later_call_ran_is_graded_on_it(hard, sandbox):
    """Issue 44 (2): the evaluator's first call faults twice (killed mid-call, retried, killed again); it calls
    again and that call runs: the question is graded on that call, not left out."""
    tool = marked_tool(hard[0].question)

    def retrier(conv) -> str:  # calls the tool while its last message is not the tool's real output
        return call(question_of(conv)) if conv[-1]["role"] == "user" or "fault" in conv[-1]["content"] else "done"

    with fork_server_killer(times=2) as killed:
        res = evaluate_with_model(tool, hard[:1], ScriptedEvaluator(retrier), sandbox, LIMITS, max_turns=2)
    assert len(killed) == 2
    (trace,) = res.traces
    assert [c["status"] for c in trace.calls] == ["fault", "ok"]
    assert (trace.status, res.r_eval, res.k, res.faults) == ("correct", 1.0, 1, 0)
    assert sandbox.quiesce()


def test_every_question_left_out_gives_no_r_eval(hard, sandbox):
    """With every question left out the evaluation axis does not apply (NaN), like an unparsed judge reply."""
    tool = marked_tool(hard[0].question)
    with fork_server_killer(times=2):
        res = evaluate_direct(tool, hard[:1], sandbox, LIMITS)
    assert math.isnan(res.r_eval) and (res.correct, res.k, res.faults) == (0, 0, 1)
    assert sandbox.quiesce()


# ---------------------------------------------------------------- smith grade


def grade(capsys, tool: Path, **kw) -> dict:
    args = argparse.Namespace(category="count_bits", tool=str(tool), function=None, k=8, seed=0, band="hard")
    for key, value in kw.items():
        setattr(args, key, value)
    grade_cli(args)
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def home_cache(monkeypatch, rg_cache):
    monkeypatch.setattr("smith.tasks.store.DEFAULT_CACHE", rg_cache)


def test_grade_reference_memorising_and_broken_tools(capsys, tmp_path, home_cache, rg_cache):
    report = grade(capsys, REFERENCE / "count_bits.py")
    assert (report["category"], report["k"], report["correct"], report["r_eval"]) == ("count_bits", 8, 8, 1.0)
    assert [q["status"] for q in report["questions"]] == ["correct"] * 8
    memo = tmp_path / "memo.py"
    memo.write_text(memorising_tool(rg_cache))
    assert grade(capsys, memo)["r_eval"] == 0.0
    broken = tmp_path / "broken.py"
    broken.write_text("def solve(question):\n    return int(question.split()[-1].rstrip('?')) // 0\n")
    report = grade(capsys, broken, k=3)
    assert report["correct"] == 0
    assert all(q["status"] == "error" and "ZeroDivisionError" in q["error"] for q in report["questions"])


def test_grade_errors_name_the_problem(capsys, tmp_path, home_cache):
    with pytest.raises(FileNotFoundError, match="not found"):
        grade(capsys, tmp_path / "missing.py")
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    with pytest.raises(ValueError, match="no top-level function"):
        grade(capsys, empty)
    with pytest.raises(ValueError, match="not in the catalog"):
        grade(capsys, REFERENCE / "count_bits.py", category="bitcount")
    assert spec_from_source("def a(x):\n    pass\n\n\ndef b(q, n=2):\n    pass").schema["parameters"]["required"] == [
        "q"
    ]


def test_smith_grade_console_script(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "smith.cli", "grade", "--category", "spell_backward", "--k", "4", "--band", "hard",
         "--tool", str(REFERENCE / "spell_backward.py")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=True,
    )  # fmt: skip
    report = json.loads(out.stdout)
    assert (report["k"], report["correct"], report["r_eval"]) == (4, 4, 1.0)
    assert list((tmp_path / ".cache" / "smith" / "rg_items").glob("spell_backward-hard-seed0-*.jsonl"))


def test_evaluator_transcript_renders_with_the_real_qwen3_template(hard, sandbox, tiny_model_dir):
    """The messages the model evaluator builds (assistant tool_calls, tool replies) are what the Qwen3 chat
    template expects: the rendered prompt shows the call and the tool's output where the model will look."""
    from transformers import AutoTokenizer

    convs = []

    def recorder(conv):
        convs.append([dict(m) for m in conv])
        return caller(conv)

    evaluate_with_model(REFERENCE_SPEC, hard[:1], ScriptedEvaluator(recorder), sandbox, LIMITS)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = tok.apply_chat_template(
        convs[-1], tools=[REFERENCE_SPEC.openai_tool()], tokenize=False, add_generation_prompt=True
    )
    assert '"name": "solve"' in text and hard[0].question in text
    assert (
        f'<tool_call>\n{{"name": "solve", "arguments": {{"question": {json.dumps(hard[0].question)}}}}}\n</tool_call>'
        in text
    )
    assert f"<tool_response>\n{hard[0].answer}\n</tool_response>" in text
