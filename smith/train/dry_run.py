"""The policy's text for `recipe=dry-run` (`generation.script=smith.train.dry_run:family_tools`): a scripted
writer and user of two working tools, so a dry run admits tools and earns non-zero rewards on every axis it
uses; everything after the text (sandbox, grading, pool, rewards, the TRL update) is real. It reads the rendered
context and writes its calls through the model family's chat format, so it is the same in every family (the
real-template runs of tests/test_family_recipes.py)."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from smith.models.chat_format import ToolCall

REVERSE = "def spell_backward(question: str) -> str:\n    return question.split(':')[-1].strip()[::-1]\n"
LCM = ("import math\nimport re\n\ndef lcm_tool(question: str) -> str:\n"
       "    nums = [int(x) for x in re.findall(r'\\d+', question.split(':')[-1])]\n"
       "    return str(math.lcm(*nums))\n")
TOOLS = {
    "Spell this word backward": (REVERSE, "spell_backward", "Spells the last word of the question backward."),
    "Least Common Multiple": (LCM, "lcm_tool", "Least common multiple of the numbers in the question."),
}
_flip = itertools.count()


def _response(code: str, name: str, description: str) -> str:
    schema = {"name": name, "description": description, "parameters": {
        "type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}}
    return f"```python\n{code}```\n```json\n{json.dumps(schema)}\n```"


def _question(ctx: str, marker: str, fmt: Any) -> str:
    """The last question holding `marker`, cut out of the rendered context at the template's tokens (a tool
    call's JSON, which quotes the question, is not one)."""
    tok = fmt.tokenizer
    tokens = sorted({*tok.all_special_tokens, *tok.get_added_vocab()}, key=len, reverse=True)
    split = re.compile("|".join(map(re.escape, tokens)))
    pieces = [p.strip() for line in ctx.splitlines() for p in split.split(line)]
    return [p for p in pieces if marker in p and not p.startswith(("{", "["))][-1]


def family_tools(ctx: str, fmt: Any) -> str:
    """Build prompts: every other reply malformed (so format varies within a group), else the working tool of
    the question's category; use prompts: call the tool whose name fits, in the family's syntax (`fmt`, the
    backend's chat format), then answer with its output; the self-evaluator's and judge's prompts answered too.
    Read from the rendered text alone, without the template's tokens: which prompt this is, the question, the
    listed tool names, whether the call was made.
    With `model.thinking` on, every reply opens with a think block holding a stray code block and a stray call,
    which must reach neither build parsing nor tool-call parsing."""
    think = ("<think>\nA draft first:\n```python\ndef draft():\n    pass\n```\n<tool_call>\n"
             '{"name": "draft", "arguments": {}}\n</tool_call>\n</think>\n\n') if fmt.thinking else ""
    if "You review Python tools" in ctx:
        return think + '{"code_correctness": 0.9, "schema_quality": 0.8, "overall": 0.8}'
    using = "You answer questions" in ctx  # the use prompts (after an inner build too) and the evaluator's
    if not using:
        if next(_flip) % 2:
            return think + "Here is a tool:\n```python\ndef broken(:\n```"
        code, name, desc = next((t for m, t in TOOLS.items() if m in ctx),
                                ("def solve(question: str) -> str:\n    return '0'\n", "solve", "Answers 0."))
        return think + _response(code, name, desc)
    for marker, (code, name, _) in TOOLS.items():
        if marker not in ctx:
            continue
        question = _question(ctx, marker, fmt)
        pick = next((n for n in re.findall(r'"name": "([A-Za-z_0-9]+)"', ctx) if n.startswith(name)), None)
        if pick is None:
            break
        if pick in ctx[ctx.index(question):]:  # called since the question was asked: answer with what it returns
            scope: dict[str, Any] = {}
            exec(code, scope)  # this module's own tool, never a model's
            return think + f"Answer: {scope[name](question)}"
        return think + fmt.reply_text({"content": "", "tool_calls": [ToolCall(pick, {"question": question})]})
    return think + "I do not know."
