"""Evaluation reward r_eval = correct / K (SMITH paper, "Evaluation reward"; docs/architecture.md, "Rewards").

A built tool is graded on K hard-band questions its writer never saw answered. Two evaluators:

- `evaluate_with_model`: the paper's. An evaluator model gets the tool's schema and each question and
  must answer by calling the tool; calls run in the sandbox and their outputs are fed back. A question
  counts as correct exactly when (1) the evaluator made at least one call of the tool that ran to
  completion (sandbox status "ok", arguments valid against the schema) and (2) the output of the LAST such
  call, as text, scores 1.0 with the dataset's scorer. The evaluator's own prose is never graded, so an
  answer reasoned out in text without the tool counts for nothing.
- `evaluate_direct`: no model. Calls the tool's function once per question with the question text as its
  single string parameter; the call's output is graded the same way. Deterministic; used by
  `smith grade` and for fast CPU runs.

Per-question traces (status, graded answer, expected answer, error, calls) are returned for logs only;
nothing in them reaches the policy.
"""

from __future__ import annotations

import argparse
import ast
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from smith.models.base import ChatBackend, Message, SamplingParams, parse_tool_calls
from smith.tasks import Item, items, load_catalog, score
from smith.toolspec import ToolSpec

EVALUATOR_SYSTEM = (
    "You answer questions by calling the tool you are given. Call it with the arguments its schema asks "
    "for; its output is your answer. Do not solve the question yourself. When the tool has answered, "
    "reply with that answer and nothing else."
)
MAX_TOOL_OUTPUT_CHARS = 4000  # what is fed back to the evaluator (the graded output is never truncated)


@dataclass
class QuestionTrace:
    """How one question went. status: correct | wrong | error | timeout | limit | no_tool_call | unsupported."""

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
    k: int
    traces: list[QuestionTrace]


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
    correct = sum(t.status == "correct" for t in traces)
    return EvalResult(correct / len(traces), correct, len(traces), traces)


def _grade(item: Item, answer: str, trace: QuestionTrace) -> None:
    trace.answer = answer
    trace.status = "correct" if score(item.category, answer, item) == 1.0 else "wrong"


def evaluate_direct(spec: ToolSpec, items: list[Item], sandbox: Any, limits: Any = None) -> EvalResult:
    """r_eval with the tool called once per question (question text -> its single string parameter).
    `sandbox` is a `sandbox.Sandbox` (or `RemoteSandbox`); `limits` a `sandbox.Limits` (None: its defaults)."""
    param = direct_parameter(spec)
    if param is None:
        why = "direct evaluation needs exactly one required string parameter"
        return _result([QuestionTrace(it.id, "unsupported", expected=it.answer, error=why) for it in items])
    results = sandbox.run(spec.code, spec.function_name, [{param: it.question} for it in items], limits=limits)
    traces = []
    for it, res in zip(items, results, strict=True):
        trace = QuestionTrace(it.id, res.status, expected=it.answer, error=res.error, seconds=res.seconds, turns=1)
        trace.calls.append({"arguments": {param: "<question>"}, "status": res.status, "error": res.error})
        if res.status == "ok":
            _grade(it, output_text(res.value), trace)
        traces.append(trace)
    return _result(traces)


def _assistant_message(text: str, calls: list[dict[str, Any]], turn: int) -> Message:
    content = text.split("<tool_call>")[0].strip() if calls else text
    msg: Message = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = [
            {"id": f"call_{turn}_{j}", "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for j, c in enumerate(calls)
        ]
    return msg


def _tool_message(turn: int, j: int, content: str) -> Message:
    return {"role": "tool", "tool_call_id": f"call_{turn}_{j}", "content": content}


def evaluate_with_model(
    spec: ToolSpec,
    items: list[Item],
    backend: ChatBackend,
    sandbox: Any,
    limits: Any = None,
    max_turns: int = 3,
    params: SamplingParams | None = None,
    tool_name: str | None = None,
) -> EvalResult:
    """r_eval with an evaluator model that must answer each question through the tool (see the module
    docstring for exactly what counts). All open questions go to `backend.chat` in one batch per turn,
    and all of a turn's tool calls go to the sandbox in one `run`."""
    if max_turns < 1:
        raise ValueError(f"max_turns must be >= 1, got {max_turns}")
    name = tool_name or spec.function_name
    tools = [spec.openai_tool(name)]
    validator = Draft202012Validator(spec.parameters)
    convs: list[list[Message]] = [
        [{"role": "system", "content": EVALUATOR_SYSTEM}, {"role": "user", "content": it.question}] for it in items
    ]
    traces = [QuestionTrace(it.id, "no_tool_call", expected=it.answer) for it in items]
    graded: list[str | None] = [None] * len(items)
    open_ = list(range(len(items)))
    for turn in range(max_turns):
        if not open_:
            break
        gens = backend.chat([convs[i] for i in open_], tools=[tools] * len(open_), params=params)
        replies: dict[int, list[Message | None]] = {}  # per question, one tool message per call, in call order
        unreadable: dict[int, list[str]] = {}
        pending: list[tuple[int, int, dict[str, Any], dict[str, Any]]] = []  # (question, slot, args, record)
        still_open = []
        for i, gen in zip(open_, gens, strict=True):
            parsed = parse_tool_calls(gen.text)
            calls = [{"name": c.name, "arguments": c.arguments} for c in parsed.calls]
            convs[i].append(_assistant_message(gen.text, calls, turn))
            traces[i].turns = turn + 1
            replies[i] = [None] * len(calls)
            unreadable[i] = parsed.errors
            for j, call in enumerate(calls):
                record: dict[str, Any] = {"turn": turn, "name": call["name"], "arguments": call["arguments"]}
                traces[i].calls.append(record)
                if call["name"] != name:
                    problem: str | None = f"unknown tool {call['name']!r}; the tool is {name!r}"
                else:
                    problem = next((e.message for e in validator.iter_errors(call["arguments"])), None)
                if problem is None:
                    pending.append((i, j, call["arguments"], record))
                else:
                    record.update(status="error", error=problem)
                    replies[i][j] = _tool_message(turn, j, f"error: {problem}")
            if calls or parsed.errors:
                still_open.append(i)
        results = sandbox.run(spec.code, spec.function_name, [p[2] for p in pending], limits=limits)
        for (i, j, _, record), res in zip(pending, results, strict=True):
            record.update(status=res.status, error=res.error, seconds=res.seconds)
            traces[i].seconds += res.seconds
            if res.status == "ok":
                graded[i] = output_text(res.value)
                content = graded[i][:MAX_TOOL_OUTPUT_CHARS]
            else:
                traces[i].error = res.error
                content = f"error ({res.status}): {res.error}"
            replies[i][j] = _tool_message(turn, j, content)
        for i in still_open:
            convs[i].extend(m for m in replies[i] if m is not None)
            if unreadable[i]:
                convs[i].append({"role": "user", "content": f"Your tool call could not be read: {unreadable[i][0]}"})
        open_ = still_open
    for it, trace, answer in zip(items, traces, graded, strict=True):
        if answer is not None:
            trace.error = None
            _grade(it, answer, trace)
        elif trace.calls:
            trace.status = "error"
    return _result(traces)


GRADE_LIMITS = {"timeout_s": 10.0, "memory_mb": 1024}  # per call; generous for 10-disk Hanoi or countdown search
_SHOWN_CHARS = 200


def spec_from_source(code: str, function_name: str | None = None, label: str = "tool") -> ToolSpec:
    """A ToolSpec for a bare Python file: the named function (default: the last top-level def), with a
    schema read off its signature (every parameter a string, those without a default required)."""
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        if function_name is None:
            raise ValueError(f"{label} does not parse ({e.msg}, line {e.lineno}); fix it or pass --function") from e
        params: dict[str, Any] = {
            "type": "object",
            "properties": {"question": {"type": "string"}},
            "required": ["question"],
        }
        return ToolSpec(code, {"name": function_name, "description": label, "parameters": params}, function_name)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if function_name is not None:
        defs = [n for n in defs if n.name == function_name]
    if not defs:
        which = f"def {function_name}(...)" if function_name else "top-level function"
        raise ValueError(f"{label} has no {which}; define one or pass --function NAME")
    fn = defs[-1]
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    n_defaults = len(fn.args.defaults)
    required = names[: len(names) - n_defaults] if n_defaults else names
    doc = (ast.get_docstring(fn) or f"{fn.name} from {label}").strip().splitlines()[0]
    params = {"type": "object", "properties": {n: {"type": "string"} for n in names}, "required": required}
    return ToolSpec(code, {"name": fn.name, "description": doc, "parameters": params}, fn.name)


def grade_cli(args: argparse.Namespace) -> None:
    """`smith grade`: grade a tool file on K questions of a category with the direct evaluator in the
    strict sandbox, and print the result as JSON."""
    from sandbox import Limits, Sandbox

    path = Path(args.tool)
    if not path.is_file():
        raise FileNotFoundError(f"tool file {path} not found; pass an existing .py file to --tool")
    category = load_catalog().get(args.category)
    if args.k < 1:
        raise ValueError(f"--k must be >= 1, got {args.k}")
    spec = spec_from_source(path.read_text(), args.function, label=str(path))
    questions = items(category.name, args.band, args.k, args.seed)
    with Sandbox(isolation="strict") as sb:
        result = evaluate_direct(spec, questions, sb, Limits(**GRADE_LIMITS))

    def shown(text: str | None) -> str | None:
        return text if text is None or len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."

    report = {
        "category": category.name,
        "group": category.group,
        "split": category.split,
        "band": args.band,
        "seed": args.seed,
        "tool": str(path),
        "function": spec.function_name,
        "k": result.k,
        "correct": result.correct,
        "r_eval": result.r_eval,
        "questions": [
            {
                "id": t.item_id,
                "status": t.status,
                "answer": shown(t.answer),
                "expected": shown(t.expected),
                "error": t.error,
                "seconds": round(t.seconds, 4),
            }
            for t in result.traces
        ],
    }
    print(json.dumps(report, indent=2, ensure_ascii=False))
