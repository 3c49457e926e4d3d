"""Issue 16: whatever `<tool_call>` text the policy writes, parsing it and running the calls in a real strict
sandbox (`smith.episodes.execute_tool_calls`) gives one text output per call and never raises: NaN, lone
surrogates, thousands of levels of nesting, unknown names and tools returning values JSON cannot hold included."""

from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sandbox import Limits
from smith.episodes import execute_tool_calls
from smith.models.chat_format import parse_tool_calls
from smith.pool import PoolEntry
from smith.toolspec import ToolSpec

LIMITS = Limits(timeout_s=2.0, memory_mb=256)
WEIRD = (
    "def weird(question=None, **kw):\n"
    "    x = 0\n"
    "    for _ in range(300):\n"
    "        x = [x]\n"
    "    values = [question, kw, float('nan'), '\\ud83d', {1, 2}, x, b'\\xff', {'k': float('inf')}]\n"
    "    return values[len(str(question)) % len(values)]\n"
)


def _entry(name: str, code: str) -> PoolEntry:
    schema = {"name": name, "description": "Fuzz target.", "parameters": {"type": "object", "properties": {}}}
    return PoolEntry("fuzz", ToolSpec(code, schema, name), 1.0)


MENU = {"echo": _entry("echo", "def echo(**kw):\n    return kw\n"), "weird": _entry("weird", WEIRD)}

strings = st.text(max_size=8) | st.sampled_from(["\ud83d", "a\udfffb", "\ud83d\ude00", "\\", '"'])
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | strings,  # floats include NaN and Infinity
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(strings, inner, max_size=3),
    max_leaves=8,
)
deep = st.integers(0, 3000).map(lambda n: '{"question": ' + "[" * n + "1" + "]" * n + "}")
arguments = (
    st.dictionaries(strings, values, max_size=3).map(json.dumps)  # json.dumps writes NaN and \ud83d escapes
    | deep
    | st.dictionaries(strings, values, max_size=3).map(lambda d: json.dumps(json.dumps(d)))  # arguments as str
    | values.map(json.dumps)
    | st.text(max_size=20)
)
names = st.sampled_from(["echo", "weird", "nope", "\ud83d"]).map(json.dumps) | st.text(max_size=6)
block = st.builds(lambda n, a, end: f'<tool_call>{{"name": {n}, "arguments": {a}}}{end}',
                  names, arguments, st.sampled_from(["</tool_call>", "", "}</tool_call>"]))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=10), block), max_size=3))
@example([("", '<tool_call>{"name": "echo", "arguments": {"question": NaN}}</tool_call>')])
@example([("", '<tool_call>{"name": "echo", "arguments": {"question": "\\ud83d"}}</tool_call>')])
@example([("", '<tool_call>{"name": "echo", "arguments": ' + "[" * 3000 + "]" * 3000 + "}</tool_call>")])
@example([("", '<tool_call>{"name": "echo", "arguments": {"q": ' + "[" * 3000 + "]" * 3000 + "}}</tool_call>")])
@example([("", '<tool_call>{"name": "\\ud83d", "arguments": {}}</tool_call>')])
def test_any_tool_call_text_gives_outputs_and_never_raises(sandbox, pieces):
    text = "".join(prose + call for prose, call in pieces)
    parsed = parse_tool_calls(text)
    outs, records = execute_tool_calls(parsed, MENU, sandbox, LIMITS)
    assert len(outs) == len(records) == len(parsed.calls) + len(parsed.errors)
    for out in outs:  # each goes back to the model as a tool message: text a tokenizer can take
        assert isinstance(out, str) and out.encode("utf-8")
