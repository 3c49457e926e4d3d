"""smith.toolspec: build responses -> ToolSpec or a typed reason; schema validity; ast agreement; fuzzing."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smith.toolspec import Reason, ToolSpec, fenced_blocks, parse_response, schema_error

CODE = """import re


def solve(question: str) -> str:
    n = int(re.search(r"\\d+", question).group())
    return str(bin(n).count("1"))
"""
SCHEMA = {
    "name": "solve",
    "description": "Counts the 1-bits in the binary form of the integer named in the question.",
    "parameters": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]},
}


def response(code: str = CODE, schema: object = SCHEMA, prose: str = "Here is the tool.") -> str:
    body = schema if isinstance(schema, str) else json.dumps(schema, indent=2)
    return f"{prose}\n```python\n{code}\n```\n\n```json\n{body}\n```\n"


def with_params(properties: dict, required: list) -> dict:
    return {**SCHEMA, "parameters": {"type": "object", "properties": properties, "required": required}}


def parse(text: str):  # the jsonschema path; xgrammar has its own test below
    return parse_response(text, use_xgrammar=False)


def test_well_formed_pair_gives_a_toolspec():
    r = parse(response())
    assert r.ok and r.reason == Reason.OK and r.detail == ""
    assert r.function_name == "solve" and r.code.startswith("import re") and r.schema == SCHEMA
    spec = r.spec
    assert isinstance(spec, ToolSpec) and spec.description.startswith("Counts")
    assert spec.openai_tool() == {"type": "function", "function": SCHEMA}
    renamed = spec.openai_tool("solve_2")
    assert renamed["function"]["name"] == "solve_2" and spec.schema["name"] == "solve"
    bare = ToolSpec("def f():\n    return 1\n", {"name": "f", "description": "d"}, "f")  # e.g. a hand-written pool row
    assert bare.openai_tool()["function"] == {"name": "f", "description": "d",
                                              "parameters": {"type": "object", "properties": {}}}
    assert "parameters" not in bare.schema


def test_wrapped_openai_tool_form_and_py_fence_are_accepted():
    r = parse(response(schema={"type": "function", "function": SCHEMA}).replace("```python", "```py"))
    assert r.ok and r.schema == SCHEMA


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no blocks at all", Reason.MISSING_PYTHON_BLOCK),
        (f"```json\n{json.dumps(SCHEMA)}\n```", Reason.MISSING_PYTHON_BLOCK),
        (f"```python\n{CODE}\n```", Reason.MISSING_JSON_BLOCK),
        (response() + f"```python\n{CODE}\n```", Reason.MULTIPLE_BLOCKS),
        (response() + f"```json\n{json.dumps(SCHEMA)}\n```", Reason.MULTIPLE_BLOCKS),
        (f"```python\n{CODE}\n```\n```json\n{json.dumps(SCHEMA)}\n", Reason.UNCLOSED_BLOCK),
        (response(schema='{"name": "solve", }'), Reason.INVALID_JSON),
        (response(schema="[1, 2"), Reason.INVALID_JSON),
        (response(code="def solve(question: str) -> str\n    return question"), Reason.SYNTAX_ERROR),
        (response(code="def answer(question: str) -> str:\n    return question"), Reason.NAME_NOT_IN_CODE),
        (response(code="def outer():\n    def solve(question):\n        return question"), Reason.NAME_NOT_IN_CODE),
        (response(code="async def solve(question: str) -> str:\n    return question"), Reason.NAME_NOT_IN_CODE),
        (response(code="def solve(q: str) -> str:\n    return q"), Reason.PARAM_MISMATCH),
        (response(code="def solve(question, extra):\n    return question"), Reason.PARAM_MISMATCH),
        (response(code="def solve(question='x'):\n    return question"), Reason.PARAM_MISMATCH),
        (response(code="def solve(question, /):\n    return question"), Reason.PARAM_MISMATCH),
        (response(code="def solve(*args):\n    return args"), Reason.PARAM_MISMATCH),
        ("x" * 200_001, Reason.TOO_LONG),
    ],
)
def test_each_failure_has_its_reason(text, reason):
    r = parse(text)
    assert not r.ok and r.reason == reason and r.detail and r.spec is None


def test_signature_agreement_allows_defaults_and_kwargs_that_match():
    opt = with_params({"question": {"type": "string"}, "base": {"type": "integer"}}, ["question"])
    assert parse(response(code="def solve(question, base=10):\n    return question", schema=opt)).ok
    kw = "def solve(question, *, base=10):\n    return question"
    assert parse(response(code=kw, schema=opt)).ok
    assert parse(response(code="def solve(question, **kw):\n    return question", schema=opt)).ok
    r = parse(response(code="def solve(question, base):\n    return question", schema=opt))
    assert r.reason == Reason.PARAM_MISMATCH and "'base'" in r.detail and "no default" in r.detail
    # the last top-level definition is the one Python keeps
    twice = "def solve(x):\n    return x\n\n\ndef solve(question):\n    return question"
    assert parse(response(code=twice)).ok


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({**SCHEMA, "name": "solve tool"}, "Python identifier"),
        ({**SCHEMA, "name": "class"}, "Python identifier"),
        ({k: v for k, v in SCHEMA.items() if k != "description"}, "description"),
        ({**SCHEMA, "parameters": {"type": "array"}}, "object schema"),
        (with_params({"question": {"type": "strin"}}, ["question"]), "not a valid JSON Schema"),
        (with_params({"question": {"type": "string"}}, ["question", "other"]), "missing from 'properties'"),
        (with_params({"question": {"$ref": "#/$defs/q"}}, ["question"]), "do not resolve"),
        (with_params({"question": {"$ref": "https://example.com/q.json"}}, ["question"]), "do not resolve"),
        (with_params({"n": {"type": "integer", "minimum": 5, "maximum": 1}}, ["n"]), "no value can satisfy"),
        (with_params({"question": {"type": "string", "pattern": "(?<=a)b"}}, ["question"]), "lookbehind"),
        (with_params({"question": {"type": "string", "pattern": "(a"}}, ["question"]), "regex"),
        (with_params({"my-arg": {"type": "string"}}, ["my-arg"]), "Python identifiers"),
        ([SCHEMA], "must be an object"),
    ],
)
def test_invalid_schemas_are_rejected_with_a_reason(schema, fragment):
    problem = schema_error(schema, use_xgrammar=False)
    assert problem is not None and fragment in problem
    r = parse(response(schema=schema))
    assert r.reason == Reason.INVALID_SCHEMA and fragment in r.detail


def test_resolvable_refs_and_rich_schemas_are_fine():
    rich = with_params(
        {
            "question": {"type": "string", "description": "the question text", "maxLength": 5000},
            "mode": {"$ref": "#/$defs/mode"},
        },
        ["question"],
    )
    rich["parameters"]["$defs"] = {"mode": {"enum": ["fast", "exact"]}}
    assert schema_error(rich, use_xgrammar=False) is None


@pytest.mark.vllm  # xgrammar comes with vLLM: the scale-out venv, where CI runs it
def test_xgrammar_compiles_good_schemas_and_rejects_what_it_cannot_decode():
    assert schema_error(SCHEMA, use_xgrammar=True) is None
    bad = with_params({"question": {"type": "string", "pattern": "(a)\\1"}}, ["question"])
    problem = schema_error(bad, use_xgrammar=True)
    assert problem is not None and "xgrammar" in problem
    assert parse_response(response(schema=bad), use_xgrammar=True).reason == Reason.INVALID_SCHEMA


def test_fences_are_read_line_by_line():
    blocks = fenced_blocks("a\n```Python title\nx = 1\n```\ntext ``` inline\n```json\n{}\n```")
    assert [(b.lang, b.body, b.closed) for b in blocks] == [("python", "x = 1", True), ("json", "{}", True)]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner) | st.dictionaries(st.sampled_from(["name", "parameters", "type", "x"]), inner),
    max_leaves=20,
)
PIECES = st.sampled_from(
    ["```python\n", "```json\n", "```\n", "```py\n", CODE, json.dumps(SCHEMA), "{", "}", "def solve(", "\n", "`"]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_arbitrary_text_never_raises(text):
    r = parse(text)
    assert isinstance(r.reason, Reason) and r.ok == (r.reason == Reason.OK)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(PIECES, st.text(max_size=30)), max_size=12))
def test_fenced_fragments_never_raise(pieces):
    r = parse("".join(pieces))
    assert isinstance(r.reason, Reason) and r.ok == (r.reason == Reason.OK)
    if r.ok:
        assert r.spec is not None and r.function_name == r.schema["name"]


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_arbitrary_json_schemas_never_raise(obj):
    problem = schema_error(obj, use_xgrammar=False)
    assert problem is None or isinstance(problem, str)
    r = parse(response(schema=json.dumps(obj)))
    assert r.reason in (Reason.INVALID_SCHEMA, Reason.OK)
