"""Evaluation reward r_eval = correct / K (SMITH paper, "Evaluation reward"; docs/architecture.md, "Rewards").

A built tool is graded on K hard-band questions its writer never saw answered. Two evaluators:

- `evaluate_with_model`: the paper's. An evaluator model gets the tool's schema and each question and
  must answer by calling the tool; calls run in the sandbox and their outputs are fed back. A question
  counts as correct exactly when (1) the evaluator made at least one call of the tool that ran to
  completion (sandbox status "ok", arguments valid against the schema) and (2) the output of the LAST such
  call, as text, scores 1.0 with the dataset's scorer. The evaluator's own prose is never graded, so an
  answer reasoned out in text without the tool counts for nothing. `evaluate_many` grades the tools of a
  step's builds in shared generation batches.
- `evaluate_direct`: no model. Calls the tool's function once per question with the question text as its
  single string parameter; the call's output is graded the same way. Deterministic; used by
  `smith grade` (smith.evals.grade) and for fast CPU runs.

A sandbox fault (the sandbox's own failure, status "fault", never the tool's) is not a reward: grading calls
are pure functions of the question, so a faulted call is run once more (`sandbox.run_pure`), and a question
whose call faults again is left out of r_eval's denominator (`EvalResult.faults` counts it; r_eval is NaN,
an axis that does not apply, when every question was left out).

Per-question traces (status, graded answer, expected answer, error, calls) are returned for logs only;
nothing in them reaches the policy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from sandbox import FAULT, run_pure
from smith.config import EvaluatorConfig
from smith.episodes import Episode, Executor, MenuTool, play
from smith.models.base import ChatBackend, SamplingParams
from smith.tasks import Catalog, Item, load_catalog, score
from smith.toolspec import ToolSpec

EVALUATOR_SYSTEM = (
    "You answer questions by calling the tool you are given. Call it with the arguments its schema asks "
    "for; its output is your answer. Do not solve the question yourself. When the tool has answered, "
    "reply with that answer and nothing else."
)
MAX_TOOL_OUTPUT_CHARS = 4000  # what is fed back to the evaluator (the graded output is never truncated)


@dataclass
class QuestionTrace:
    """How one question went. status: correct | wrong | error | timeout | limit | no_tool_call | unsupported |
    fault (the sandbox failed twice: left out of r_eval)."""

    item_id: str
    status: str
    answer: str | None = None
    expected: str | None = None
    error: str | None = None
    seconds: float = 0.0
    calls: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class EvalResult:
    r_eval: float
    correct: int
    k: int  # the questions graded: r_eval's denominator, without those `faults` left out
    traces: list[QuestionTrace]
    faults: int = 0


def output_text(value: Any) -> str:
    """A tool's return value as the answer text: strings as they are, containers as JSON, else str()."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else str(value)


def direct_parameter(spec: ToolSpec) -> str | None:
    """The one parameter a direct evaluation fills with the question text, or None if the tool has
    anything but exactly one required, string-typed (or untyped) parameter."""
    params = spec.parameters
    required = params.get("required", [])
    if len(required) != 1:
        return None
    kind = params.get("properties", {}).get(required[0], {}).get("type", "string")
    return required[0] if kind == "string" else None


def _result(traces: list[QuestionTrace]) -> EvalResult:
    if not traces:
        raise ValueError("no questions to evaluate; pass at least one item")
    graded = [t for t in traces if t.status != FAULT]
    correct = sum(t.status == "correct" for t in graded)
    r_eval = correct / len(graded) if graded else math.nan
    return EvalResult(r_eval, correct, len(graded), traces, len(traces) - len(graded))


def _grade(item: Item, answer: str, trace: QuestionTrace, catalog: Catalog | None) -> None:
    trace.answer = answer
    category = (catalog or load_catalog()).get(item.category)
    trace.status = "correct" if score(category, answer, item) == 1.0 else "wrong"


def evaluate_direct(spec: ToolSpec, items: list[Item], sandbox: Any, limits: Any = None,
                    catalog: Catalog | None = None) -> EvalResult:
    """r_eval with the tool called once per question (question text -> its single string parameter).
    `sandbox` is a `sandbox.Sandbox` (or `RemoteSandbox`); `limits` a `sandbox.Limits` (None: its defaults);
    `catalog` scores the items (None: the packaged one)."""
    param = direct_parameter(spec)
    if param is None:
        why = "direct evaluation needs exactly one required string parameter"
        return _result([QuestionTrace(it.id, "unsupported", expected=it.answer, error=why) for it in items])
    results = run_pure(sandbox, spec.code, spec.function_name, [{param: it.question} for it in items], limits)
    traces = []
    for it, res in zip(items, results, strict=True):
        trace = QuestionTrace(it.id, res.status, expected=it.answer, error=res.error, seconds=res.seconds, turns=1)
        trace.calls.append({"arguments": {param: "<question>"}, "status": res.status, "error": res.error})
        if res.status == "ok":
            _grade(it, output_text(res.value), trace, catalog)
        traces.append(trace)
    return _result(traces)


def _schema_executor(tools: Sequence[tuple[ToolSpec, str]], sandbox: Any, limits: Any,
                     graded: dict[tuple[int, int], str]) -> Executor:
    """Runs a turn's calls, each episode (key (tool, question)) calling its own tool: each call checked against
    its schema first, all valid ones of a tool in one sandbox batch; the output of each question's last
    successful call lands in `graded`."""
    validators = [Draft202012Validator(spec.parameters) for spec, _ in tools]

    def run(batch: list[tuple[Episode, Any]]) -> list[list[str]]:
        outs: list[list[str]] = []
        pending: dict[int, list[tuple[list[str], int, Episode, dict[str, Any]]]] = {}
        for episode, parsed in batch:
            tool = episode.key[0]
            name = tools[tool][1]
            fed = [f"error: {e}" for e in parsed.errors]  # an unreadable call is told as such, not recorded
            for call in parsed.calls:
                record: dict[str, Any] = {"turn": episode.turns - 1, "name": call.name, "arguments": call.arguments}
                episode.calls.append(record)
                if call.name != name:
                    problem: str | None = f"unknown tool {call.name!r}; the tool is {name!r}"
                else:
                    problem = next((e.message for e in validators[tool].iter_errors(call.arguments)), None)
                if problem is None:
                    pending.setdefault(tool, []).append((fed, len(fed), episode, record))
                    fed.append("")
                else:
                    record.update(status="error", error=problem)
                    fed.append(f"error: {problem}")
            outs.append(fed)
        for tool, calls in pending.items():
            spec = tools[tool][0]
            results = run_pure(sandbox, spec.code, spec.function_name, [c[3]["arguments"] for c in calls], limits)
            for (fed, slot, episode, record), res in zip(calls, results, strict=True):
                record.update(status=res.status, error=res.error, seconds=res.seconds)
                if res.status == "ok":
                    graded[episode.key] = output_text(res.value)
                    fed[slot] = graded[episode.key][:MAX_TOOL_OUTPUT_CHARS]
                else:
                    fed[slot] = f"error ({res.status}): {res.error}"
        return outs

    return run


def evaluate_with_model(
    spec: ToolSpec,
    items: list[Item],
    backend: ChatBackend,
    sandbox: Any,
    limits: Any = None,
    max_turns: int = EvaluatorConfig.max_turns,
    params: SamplingParams | None = None,
    tool_name: str | None = None,
    catalog: Catalog | None = None,
) -> EvalResult:
    """r_eval with an evaluator model that must answer each question through the tool (see the module
    docstring for exactly what counts): `evaluate_many` with one tool."""
    return evaluate_many([(spec, items)], backend, sandbox, limits, max_turns, params, catalog,
                         tool_names=None if tool_name is None else [tool_name])[0]


def evaluate_many(
    jobs: Sequence[tuple[ToolSpec, list[Item]]],
    backend: ChatBackend,
    sandbox: Any,
    limits: Any = None,
    max_turns: int = EvaluatorConfig.max_turns,
    params: SamplingParams | None = None,
    catalog: Catalog | None = None,
    tool_names: Sequence[str] | None = None,
    beside: Sequence[Episode] = (),
) -> list[EvalResult]:
    """r_eval of several tools, each on its own questions, by one evaluator model: message-level episodes of
    the one tool loop (`smith.episodes.play`), all open questions of every tool in one `backend.chat` batch per
    turn (a step's builds share the evaluator's batches), each turn's valid calls of a tool in one sandbox `run`;
    calls made in the last turn still run (their output can be the graded one). `beside`: message-level episodes
    without tools of another role on the same model (the judge's), answered in the first turn's batch."""
    names = list(tool_names) if tool_names is not None else [spec.function_name for spec, _ in jobs]
    if len(names) != len(jobs):
        raise ValueError(f"{len(names)} tool names for {len(jobs)} tools")
    for _, items in jobs:
        if not items:
            raise ValueError("no questions to evaluate; pass at least one item")
    episodes = [[Episode([{"role": "system", "content": EVALUATOR_SYSTEM}, {"role": "user", "content": it.question}],
                         {name: MenuTool(spec)}, key=(j, i)) for i, it in enumerate(items)]
                for j, ((spec, items), name) in enumerate(zip(jobs, names, strict=True))]
    graded: dict[tuple[int, int], str] = {}
    if jobs or beside:
        play([*(e for tool in episodes for e in tool), *beside], backend, params or SamplingParams(), max_turns,
             _schema_executor([(spec, name) for (spec, _), name in zip(jobs, names, strict=True)], sandbox, limits,
                              graded), last_turn="run")
    return [_result([_trace(it, e, graded.get(e.key), catalog) for it, e in zip(items, tool, strict=True)])
            for (_, items), tool in zip(jobs, episodes, strict=True)]


def _trace(item: Item, e: Episode, answer: str | None, catalog: Catalog | None) -> QuestionTrace:
    """How one evaluator episode went; `answer` is the output of its last successful call, if any."""
    trace = QuestionTrace(item.id, "no_tool_call", expected=item.answer, calls=e.calls, turns=e.turns,
                          seconds=sum(c.get("seconds", 0.0) for c in e.calls))
    faulted = [c for c in e.calls if c.get("status") == FAULT]
    if answer is not None:  # graded on its last call that ran, even if an earlier one faulted
        _grade(item, answer, trace, catalog)
    elif faulted:  # the evaluator saw the sandbox fail and no call ran: the question cannot be graded
        trace.status, trace.error = FAULT, faulted[0]["error"]
    elif e.calls:
        trace.status = "error"
        trace.error = next((c["error"] for c in reversed(e.calls) if c.get("error")), None)
    return trace
