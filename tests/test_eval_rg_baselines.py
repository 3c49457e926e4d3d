"""rg baselines (LATM, CRAFT, TroVE, KTCE) end to end on real reasoning-gym items, the real sandbox and the rg
summary, with two kinds of model: the tiny local model (real generation and token counts; it never writes a
usable tool, so every method must still finish and log each question) and scripted agents -- ScriptedBackends
(smith/models/scripted.py) whose *text* follows a script -- whose outcome is known in advance: the hand-written
reference tools (tests/reference_tools) are correct, the "broken" tools below are not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from smith.config import compose
from tests.test_eval_rg import reference_reply

SEEN, UNSEEN = "spell_backward", "count_bits"
SUITE_SEED = 1000
BROKEN = {"name": "solve", "code": "def solve(question: str) -> str:\n    return '0'\n"}


def tool_reply(code: str, name: str = "solve", description: str = "Answers the question; pass it verbatim.") -> str:
    schema = {"name": name, "description": description, "parameters": {"type": "object", "properties": {
        "question": {"type": "string", "description": "the question, verbatim"}}, "required": ["question"]}}
    return f"```python\n{code}```\n\n```json\n{json.dumps(schema)}\n```"


def reference(category: str, name: str = "solve") -> str:
    if name == "solve":
        return reference_reply(category)
    code = (Path(__file__).parent / "reference_tools" / f"{category}.py").read_text().replace("def solve(",
                                                                                               f"def {name}(")
    return tool_reply(code, name, f"Answers {category.replace('_', ' ')} questions; pass the question verbatim.")


def last_user(context: str) -> str:
    turns = context.split("<|im_start|>")
    return next(t for t in reversed(turns) if t.startswith("user"))


def user_text(context: str) -> str:
    return last_user(context)[len("user\n"):].split("<|im_end|>")[0]


def offered(context: str) -> list[str]:
    tools = re.search(r"<tools>\n(.*?)\n</tools>", context, re.S)
    if tools is None:
        return []
    return [json.loads(line)["function"]["name"] for line in tools.group(1).splitlines() if line.strip()]


def use_reply(context: str, pick: Callable[[list[str]], str | None] = lambda names: names[0]) -> str:
    """A faithful tool user: call the picked offered tool with the question, then answer with its output."""
    last = last_user(context)
    if "<tool_response>" in last:
        return re.search(r"<tool_response>\n?(.*?)\n?</tool_response>", last, re.S).group(1).strip()
    names = offered(context)
    name = pick(names) if names else None
    if name is None:
        return "Let me think.\nAnswer: 42"
    question = re.split(r"<\|im_start\|>user\n", context)[1].split("<|im_end|>")[0]
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {"question": question}}) + "\n</tool_call>"


def category_of(context: str, cache_dir: Path, n: int = 8) -> str:
    """Which category's easy items the prompt shows (scripted makers see demonstrations, never metadata)."""
    from smith.tasks import items

    for cat in (SEEN, UNSEEN):
        if any(it.question in context for it in items(cat, "easy", n, SUITE_SEED, cache_dir)):
            return cat
    raise AssertionError("prompt shows no known example")


def scripted(script: Callable[[str], str], tokenizer_dir: Path, name: str = "scripted"):
    from transformers import AutoTokenizer

    from smith.models.scripted import ScriptedBackend

    return ScriptedBackend(AutoTokenizer.from_pretrained(tokenizer_dir), script, name=name)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("rg_items")


def cfg_for(out: Path, model: str, cache_dir: Path, tiny_dir: Path, *extra: str):
    return compose("eval", ["suite=rg", f"model='{model}'", f"output_dir={out}", f"tiny_dir={tiny_dir}",
                            f"suite.cache_dir={cache_dir}", f"suite.categories=[{SEEN},{UNSEEN}]",
                            "suite.bootstrap=50", "suite.sandbox.workers=2", *extra], ("suite",))


def rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


def toolsets(out: Path) -> dict[str, dict]:
    return {r["key"]: r for r in map(json.loads, (out / "toolsets.jsonl").read_text().splitlines())}


# ---------------------------------------------------------------------------------------------------- LATM


def test_latm_uses_verified_tool_and_rejects_failing_one(tmp_path, cache_dir, tiny_model_dir):
    """The maker writes the reference tool for count_bits (verified, then used) and a broken one for
    spell_backward every time (rejected after max_attempts; its questions are answered without a tool)."""
    from smith.evals.rg import run

    def maker(context: str) -> str:
        if "Infer the general procedure" in context:
            cat = category_of(context, cache_dir)
            return reference(UNSEEN) if cat == UNSEEN else tool_reply(BROKEN["code"])
        return use_reply(context)

    out = tmp_path / "latm"
    agent = scripted(maker, tiny_model_dir, "maker")
    s = run(cfg_for(out, "maker", cache_dir, tiny_model_dir, "mode=latm", "limit=2"), {"maker": agent})
    b = s["baseline"]
    assert b["method"] == "LATM" and b["verified"] == [UNSEEN] and b["rejected"] == [SEEN]
    ts = toolsets(out)
    assert len(ts[SEEN]["attempts"]) == 3 and not any(a.get("verified") for a in ts[SEEN]["attempts"])
    assert ts[UNSEEN]["attempts"] == [{"stage": "verify", "function_name": "solve", "passed": 3, "of": 3,
                                       "verified": True}]
    assert len(ts[UNSEEN]["tool"]["use_cases"]) == 3
    by_cat = {r["category"]: r for r in rows(out)}
    assert s["categories"][UNSEEN]["value"] == 1.0 and by_cat[UNSEEN]["used_tool"]
    assert by_cat[UNSEEN]["tools"] == ["solve"]
    assert by_cat[SEEN]["tools"] == [] and not by_cat[SEEN]["used_tool"]
    assert s["build_tokens"]["input"] > 0 and b["build"]["calls"] > 0
    assert all(r["prompt_tokens"] > 0 and r["llm_calls"] >= 1 for r in rows(out))
    assert s["label"] == "maker (LATM)"
