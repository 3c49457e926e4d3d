"""The policy's text for `recipe=dry-run` (`generation.script=smith.train.dry_run:formatted_tools`): a scripted
writer and user of two working tools, so a dry run admits tools and earns non-zero rewards on every axis it
uses; everything after the text (sandbox, grading, pool, rewards, the TRL update) is real."""

from __future__ import annotations

import itertools
import json
import re

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


def formatted_tools(ctx: str) -> str:
    """Build prompts: every other reply malformed (so format varies within a group); use prompts: call the
    tool whose name fits, then answer with its output."""
    last_user = ctx.rsplit("<|im_start|>", 1)[0]
    if "Reply with exactly one ```python block" in last_user and "<tools>" not in ctx:
        if next(_flip) % 2:
            return "Here is a tool:\n```python\ndef broken(:\n```"
        for marker, (code, name, desc) in TOOLS.items():
            if marker in ctx:
                return _response(code, name, desc)
        return _response("def solve(question: str) -> str:\n    return '0'\n", "solve", "Answers 0.")
    responses = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", ctx, re.S)
    if responses:
        return f"Answer: {responses[-1]}"
    listed = re.search(r"<tools>\n(.*?)\n</tools>", ctx, re.S)  # the system prompt also says "<tools></tools>"
    names = re.findall(r'"name": "([A-Za-z_0-9]+)"', listed.group(1) if listed else "")
    question = ctx.rsplit("<|im_start|>user\n", 1)[-1].split("<|im_end|>")[0]
    for marker, (_, name, _) in TOOLS.items():
        if marker in question:
            pick = next((n for n in names if n.startswith(name)), None)
            if pick:
                return "<tool_call>\n" + json.dumps({"name": pick, "arguments": {"question": question}}) + \
                    "\n</tool_call>"
    return "I do not know."
