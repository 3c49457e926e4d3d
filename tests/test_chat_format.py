"""Issue 29: the model-family layer (smith.models.chat_format) on the real template text of every recipe's family
(Qwen3-Instruct-2507, Qwen3, Granite 3.3, Llama 3.1 / 3.2, Gemma 3, SmolLM2: tests/chat_families.py). A
token-level episode equals a fresh render of its messages with the loss mask on the model's tokens only;
replies parse in each family's syntax with reasoning left out; smith's parse agrees with TRL's response
schemas and granite-common; unusable templates are refused in one line; the tiny model's layout is unchanged."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from transformers import AutoTokenizer

from sandbox import Limits
from smith.episodes import Episode, MenuTool, menu_executor, play
from smith.errors import ConfigError
from smith.models.base import SamplingParams
from smith.models.chat_format import GRANITE, HERMES, LLAMA3, ChatFormat, ToolCall, chat_format
from smith.models.scripted import ScriptedBackend
from smith.rollout.episodes import Sample
from smith.rollout.prompts import build_messages, inner_use_messages, use_messages
from smith.toolspec import ToolSpec

from .chat_families import FAMILIES, family_model, family_tokenizer
from .conftest import ROOT

SCHEMA = {"name": "lcm_tool", "description": "Least common multiple of the numbers in the question.",
          "parameters": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}}
LCM = ToolSpec("import math, re\n\ndef lcm_tool(question):\n    return str(math.lcm(*map(int, re.findall(r'\\d+', "
               "question))))\n", SCHEMA, "lcm_tool")
REVERSE = ToolSpec("def spell(question):\n    return question.split(':')[-1].strip()[::-1]\n",
                   {**SCHEMA, "name": "spell", "description": "Spells the last word backward (× safe)."}, "spell")
MENU = {"lcm_tool": MenuTool(LCM), "spell": MenuTool(REVERSE)}
EXPECTED = {  # family: (call syntax, renders tool conversations itself, the template smith renders with)
    "qwen3-instruct-2507": (HERMES, True, "own"), "qwen3": (HERMES, True, "TRL's training template"),
    "granite-3.3": (GRANITE, True, "own"), "llama-3.1": (LLAMA3, True, "own"), "llama-3.2": (LLAMA3, True, "own"),
    "gemma-3": (HERMES, False, "own"), "smollm2": (HERMES, False, "own"),
}


@pytest.fixture(scope="module", params=list(FAMILIES))
def tok(request, tiny_model_dir):
    return family_tokenizer(tiny_model_dir, request.param)


def call(name: str, question: str) -> dict:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": {"question": question}}}]}


def test_the_tiny_models_token_layout_is_unchanged(tiny_model_dir):
    """What the tiny warm model and the learning test were trained on: a build prompt, a use prompt with tools and
    tool-output continuations render to the ids they had before the layer existed (tests/fixtures)."""
    pinned = json.loads((ROOT / "tests" / "fixtures" / "tiny_layout.json").read_text())
    fmt = chat_format(AutoTokenizer.from_pretrained(tiny_model_dir))
    examples = [SimpleNamespace(question=f"What is the LCM of {a} and {b}?", answer=str(a * b))
                for a, b in [(2, 3), (5, 7), (4, 9), (11, 13)]]
    tools = [LCM.openai_tool("lcm_tool"), ToolSpec("def spell(question):\n    return 'x'\n", {
        **SCHEMA, "name": "spell", "description": "Spells × backward."}, "spell").openai_tool("spell_2")]
    assert fmt.render(build_messages(examples)) == pinned["build"]
    assert fmt.render(use_messages("What is the LCM of 6 and 10?"), tools) == pinned["use"]
    assert fmt.continuation([{"role": "tool", "content": "30"}]) == pinned["tool_response"]
    assert fmt.continuation([{"role": "tool", "content": "30"}, {"role": "tool", "content": (
        "error: unknown tool 'x'; available: a, b")}]) == pinned["two_tool_responses"]


def test_each_family_is_recognised(tok):
    fmt = chat_format(tok)
    syntax, native, template = EXPECTED[tok.name_or_path]
    assert (fmt.syntax, fmt.native_tools, "own" if fmt.template is None else "TRL's training template") == \
        (syntax, native, template)
    assert tok.convert_ids_to_tokens(fmt.end_of_turn) == FAMILIES[tok.name_or_path].eos


def test_a_token_level_episode_equals_a_fresh_render_of_its_messages(tok, sandbox):
    """Two tool calls and a final answer, played on the one tool loop (token level, the rollout's transcript):
    the ids are those of the whole conversation rendered afresh, and the loss mask is 1 exactly on the replies."""
    episode_against_fresh_render(tok, sandbox, thinking=False)


def test_with_thinking_on_too(tiny_model_dir, sandbox):
    """Qwen3 with `model.thinking=true`: each reply opens with its reasoning, which the training template keeps
    in every turn (Qwen3's own drops it from earlier turns, so it is not prefix-preserving)."""
    tok = family_tokenizer(tiny_model_dir, "qwen3")
    episode_against_fresh_render(tok, sandbox, thinking=True)


def episode_against_fresh_render(tok, sandbox, thinking: bool) -> None:
    fmt = chat_format(tok, thinking=thinking)
    question = "Spell this word backward (example: sun -> nus): lymph, then the LCM of 4 and 6"
    turns = [call("spell", "the word: lymph"), call("lcm_tool", "4 6"),
             {"role": "assistant", "content": "Answer: hpmyl 12"}]
    reasoning = "I should use the tools."
    texts = iter([("<think>\n" + reasoning + "\n</think>\n\n" if thinking else "") + fmt.reply_text(m)
                  for m in turns])
    prompt = fmt.render(use_messages(question), [t.tool.openai_tool(n) for n, t in MENU.items()])
    sample = Sample("use", "lcm", list(prompt))
    e = Episode(sample, dict(MENU), budget=2000)
    play([e], ScriptedBackend(tok, lambda ctx: next(texts)), SamplingParams(), 5,
         menu_executor(sandbox, Limits(timeout_s=2.0, memory_mb=256)))
    assert e.end == "answer" and [c["status"] for c in e.calls] == ["ok", "ok"] and e.answer == "hpmyl 12"
    outputs = [c["output"] for c in e.calls]
    assert outputs == ["hpmyl", "12"]
    messages = [*use_messages(question), turns[0], {"role": "tool", "content": outputs[0]}, turns[1],
                {"role": "tool", "content": outputs[1]}, turns[2]]
    if thinking:
        messages = [{**m, "reasoning_content": reasoning} if m["role"] == "assistant" else m for m in messages]
    fresh = tok(fmt.render_text(messages, e.tools, generation_prompt=False), add_special_tokens=False)["input_ids"]
    ids = sample.prompt_ids + sample.completion_ids
    assert fresh[:len(ids)] == ids
    assert tok.decode(fresh[len(ids):]).strip() == ""  # what a template writes after the last turn's end token
    replies = [i for i, m in zip(sample.completion_ids, sample.mask, strict=True) if m]
    said = [tok(t, add_special_tokens=False)["input_ids"] + [fmt.end_of_turn] for t in
            [("<think>\n" + reasoning + "\n</think>\n\n" if thinking else "") + fmt.reply_text(m) for m in turns]]
    assert replies == [i for r in said for i in r]
    fed = tok.decode([i for i, m in zip(sample.completion_ids, sample.mask, strict=True) if not m])
    assert all(o in fed for o in outputs)


def test_the_inner_build_continues_into_the_use_prompt(tok):
    """Issue 30, item 7: after an inner build the episode goes on with the use prompt every use episode gets, its
    tools in the template's tool block (or the fallback's listing), not a user turn of `<tools>` JSON."""
    fmt = chat_format(tok)
    tools = [t.tool.openai_tool(n) for n, t in MENU.items()]
    follow = fmt.follow_up(inner_use_messages("lcm_tool", "What is the LCM of 4 and 6?"), tools)
    use = fmt.render(inner_use_messages("lcm_tool", "What is the LCM of 4 and 6?"), tools)
    if tok.bos_token and use[0] == tok.bos_token_id:
        use = use[1:]
    assert follow[len(follow) - len(use):] == use and tok.decode(follow[:len(follow) - len(use)]).strip() == ""
    text = tok.decode(follow)
    assert "Your tool is now available as `lcm_tool`" in text and '"name": "lcm_tool"' in text
    assert ("<tools>" in text) == (fmt.syntax is HERMES)  # Qwen's tool block, or the fallback's (Qwen's words)


def test_replies_parse_in_the_family_syntax_and_reasoning_never_does(tok):
    fmt = chat_format(tok)
    two = [ToolCall("lcm_tool", {"question": "4 6"}), ToolCall("spell", {"question": "x: ab"})]
    calls = two[:1] if fmt.syntax is LLAMA3 else two  # Llama 3's template renders one call per turn
    reply = fmt.parse(fmt.reply_text({"content": "", "tool_calls": calls}))
    assert (reply.calls, reply.errors, reply.content) == (calls, [], "")
    stray = ("<think>\nDraft:\n```python\ndef draft():\n    pass\n```\n<tool_call>\n{\"name\": \"draft\", "
             "\"arguments\": {}}\n</tool_call>\n</think>\n\n")
    thought = fmt.parse(stray + fmt.reply_text({"content": "", "tool_calls": calls}))
    assert thought.calls == calls and "def draft" in thought.reasoning
    answer = fmt.parse(stray + "The LCM is 12.\nAnswer: 12")
    assert (answer.calls, answer.errors, answer.answer) == ([], [], "12")
    broken = {HERMES: '<tool_call>\n{"name": "lcm_tool", "arguments": {"question": }\n</tool_call>',
              LLAMA3: '{"name": "lcm_tool", "parameters": {"question": }',
              GRANITE: '<|tool_call|>[{"name": "lcm_tool", "arguments": {"question": }]'}[fmt.syntax]
    bad = fmt.parse(broken)
    assert bad.calls == [] and bad.errors and bad.errors[0].startswith("tool call is not valid JSON")


def test_a_decoded_granite_reply_that_lost_its_call_token_still_parses(tiny_model_dir):
    """`<|tool_call|>` is a special token: a reply decoded without special tokens starts with the bare list."""
    tok = family_tokenizer(tiny_model_dir, "granite-3.3")
    fmt = chat_format(tok)
    text = fmt.reply_text({"content": "", "tool_calls": [ToolCall("lcm_tool", {"question": "4 6"})]})
    decoded = tok.decode(tok(text, add_special_tokens=False)["input_ids"], skip_special_tokens=True)
    assert decoded.startswith("[{") and fmt.parse(decoded).calls == [ToolCall("lcm_tool", {"question": "4 6"})]
    plain = fmt.parse("[1, 2]")  # an answer that is a list stays an answer
    assert (plain.calls, plain.errors, plain.answer) == ([], [], "[1, 2]")


def test_a_call_after_text_survives_decoding(tok):
    """Issue 44, item 6: every backend decodes a reply's ids with its format, which keeps the call markers (Granite's
    `<|tool_call|>` is a special token: `skip_special_tokens=True` dropped it and the call was read as content)."""
    fmt = chat_format(tok)
    lcm = ToolCall("lcm_tool", {"question": "4 6"})
    text = fmt.syntax.write("Let me use the tool.", [lcm])
    if not text.startswith("Let me"):  # Llama 3 writes a call alone; after text, its marker says where it starts
        text = "Let me use the tool." + fmt.syntax.markers[0] + text
    generated = ScriptedBackend(tok, lambda ctx: text).chat([[{"role": "user", "content": "q"}]])[0]
    reply = fmt.parse(generated.text)  # what an episode reads
    assert (reply.calls, reply.errors, reply.content) == ([lcm], [], "Let me use the tool.")
    assert fmt.decode(tok("The LCM is 12.", add_special_tokens=False)["input_ids"] + [fmt.end_of_turn]) == (
        "The LCM is 12.")  # other special tokens (the end of turn) are dropped as before


@pytest.mark.parametrize("name", ["qwen3-instruct-2507", "qwen3", "llama-3.1", "llama-3.2"])
def test_parse_agrees_with_trls_response_schemas(tiny_model_dir, name):
    """On well-formed replies smith reads what TRL's `add_response_schema` + `tokenizer.parse_response` read."""
    from trl.chat_template_utils import add_response_schema, parse_response

    tok = family_tokenizer(tiny_model_dir, name)
    fmt = chat_format(tok)
    add_response_schema(tok)
    prompt = fmt.render(use_messages("What is the LCM of 4 and 6?"), [LCM.openai_tool("lcm_tool")])
    one = [ToolCall("lcm_tool", {"question": "4 6", "n": 2})]
    for text in [fmt.reply_text({"content": "", "tool_calls": one}), "Answer: 12",
                 *(["<think>\nhm\n</think>\n\n" + fmt.reply_text({"content": "", "tool_calls": one})]
                   if fmt.syntax is HERMES else [])]:
        theirs = parse_response(tok, tok(text, add_special_tokens=False)["input_ids"] + [fmt.end_of_turn], prompt)
        ours = fmt.parse(text)
        assert ours.calls == [ToolCall(c["function"]["name"], c["function"]["arguments"])
                              for c in theirs.get("tool_calls") or []]
        assert ours.content == (theirs.get("content") or "").strip()
        assert ours.reasoning == (theirs.get("reasoning_content") or "").strip()


def test_granite_renders_and_parses_as_granite_common(tiny_model_dir):
    """Granite 3.3: smith's rendering of a tool conversation is granite-common's, and its parse of a call is
    granite-common's `Granite33OutputProcessor`'s."""
    from granite_common import ChatCompletion, Granite33InputProcessor, Granite33OutputProcessor

    fmt = chat_format(family_tokenizer(tiny_model_dir, "granite-3.3"))
    tools = [LCM.openai_tool("lcm_tool")]
    turn = call("lcm_tool", "4 6")
    messages = [*use_messages("What is the LCM of 4 and 6?"), turn, {"role": "tool", "content": "12"}]
    ours = fmt.render_text(messages, tools)
    request = ChatCompletion.model_validate({
        "messages": [*messages[:2], {"role": "assistant", "content": fmt.reply_text(turn)},
                     {"role": "tool", "content": "12", "tool_call_id": "call_0"}],
        "tools": [t["function"] for t in tools]})
    assert ours == Granite33InputProcessor().transform(request, add_generation_prompt=True)
    text = fmt.reply_text(turn)
    theirs = Granite33OutputProcessor().transform(text.replace("<|tool_call|>", "<tool_call>"), request)
    assert fmt.parse(text).calls == [ToolCall(c.name, c.arguments) for c in theirs.tool_calls]


@pytest.mark.parametrize("name", ["gemma-3", "smollm2"])
def test_the_fallback_for_templates_without_tools(tiny_model_dir, name):
    """No tool support in the template (TRL's `supports_tool_calling` is false): the tools are listed in the system
    prompt, a call is `<tool_call>` text, and outputs come back in one user turn the template renders."""
    from trl.chat_template_utils import supports_tool_calling

    tok = family_tokenizer(tiny_model_dir, name)
    assert not supports_tool_calling(tok)
    fmt = chat_format(tok)
    text = fmt.render_text([*use_messages("q?"), call("lcm_tool", "4 6"), {"role": "tool", "content": "12"},
                            {"role": "tool", "content": "error: x"}], [LCM.openai_tool("lcm_tool")])
    system = text.split("q?")[0]
    assert "You answer questions with the help of tools" in system and '"name": "lcm_tool"' in system
    assert '<tool_call>\n{"name": "lcm_tool", "arguments": {"question": "4 6"}}\n</tool_call>' in text
    assert "<tool_response>\n12\n</tool_response>\n<tool_response>\nerror: x\n</tool_response>" in text


def test_unusable_templates_are_refused_in_one_line(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    with pytest.raises(ConfigError, match=r"model.thinking=true, but the chat template of .* has no thinking switch"):
        ChatFormat(tok, thinking=True)  # Qwen3-Instruct-2507 does not think
    with pytest.raises(ConfigError, match=r"Granite 3\.3 thinks only under its default system prompt"):
        ChatFormat(family_tokenizer(tiny_model_dir, "granite-3.3"), thinking=True)
    # Qwen3's template, edited so that TRL no longer knows it: not prefix-preserving, no training template
    tok.chat_template = FAMILIES["qwen3"].text() + "{#- edited -#}"
    with pytest.raises(ConfigError, match=r"not prefix-preserving .* TRL has no training template"):
        ChatFormat(tok)
    tok.chat_template = None
    with pytest.raises(ConfigError, match="has no chat template"):
        ChatFormat(tok)


def test_train_and_eval_refuse_such_a_model_at_start_up(tiny_model_dir, tmp_path):
    """`train.py` and `eval.py` stop in one line (exit 2) before any model loads."""
    model = family_model(tiny_model_dir, "granite-3.3", tmp_path / "granite")
    out = subprocess.run([sys.executable, "train.py", "recipe=tiny-random", f"model.name_or_path={model}",
                          "model.thinking=true", f"output_dir={tmp_path / 'run'}"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 2 and out.stderr.strip().splitlines()[-1].startswith(
        "error: model.thinking=true, but the chat template of")
    assert not (tmp_path / "run").exists()
    tok = AutoTokenizer.from_pretrained(model)
    tok.chat_template = FAMILIES["qwen3"].text() + "{#- edited -#}"
    tok.save_pretrained(model)
    out = subprocess.run([sys.executable, "eval.py", "suite=rg", f"model={model}", "limit=1",
                          f"output_dir={tmp_path / 'eval'}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "is not prefix-preserving" in out.stderr.strip().splitlines()[-1]


def test_the_scripted_backend_stops_on_the_families_end_of_turn(tok):
    """A scripted reply ends with the token the template closes an assistant turn with (not `eos_token`, which a
    GGUF conversion may set to another token)."""
    g = ScriptedBackend(tok, lambda ctx: "hi").chat([[{"role": "user", "content": "q"}]])[0]
    assert g.completion_ids[-1] == chat_format(tok).end_of_turn and g.text == "hi"


def test_every_backend_stops_on_the_familys_end_of_turn(tok):
    """Issue 44, item 7: a reply is finished on the token the template ends a turn with, even when the tokenizer's
    eos is another token (as a GGUF conversion may set it); TRL's vLLM client path decided it from eos/pad."""
    from types import SimpleNamespace

    from smith.models.hf import eos_ids_of
    from smith.train.vllm_policy import TRLVLLMPolicy

    tok = copy.deepcopy(tok)
    end = chat_format(tok).end_of_turn
    tok.eos_token = next(t for t in tok.all_special_tokens if tok.convert_tokens_to_ids(t) != end)
    assert tok.eos_token_id != end and end in eos_ids_of(None, tok)

    class Client:
        def generate(self, prompts, **_):
            return {"completion_ids": [[5, end] for _ in prompts], "logprobs": [[[-1.0], [-1.0]] for _ in prompts]}

    trainer = SimpleNamespace(vllm_generation=SimpleNamespace(vllm_client=Client()),
                              accelerator=SimpleNamespace(is_main_process=True))
    (g,) = TRLVLLMPolicy(trainer, tok).continue_ids([[1, 2]])
    assert g.finish_reason == "stop"


def test_the_server_clients_cut_each_row_at_its_own_limit(tok):
    """`continue_ids(..., limits=)`: the two vLLM server clients ask once for the batch's longest and cut each row at
    its own limit, as the HF and local vLLM engines stop it there (the rollout's use turn beside the builds)."""
    from smith.train.vllm_policy import ServedAdapter, TRLVLLMPolicy

    words = tok("one two three four five six", add_special_tokens=False)["input_ids"]

    class Client:
        def generate(self, prompts, max_tokens, **_):
            return {"completion_ids": [words[:max_tokens] for _ in prompts],
                    "logprobs": [[[-1.0]] * len(words[:max_tokens]) for _ in prompts]}

        def post(self, _path, json):
            ids = words[: json["max_tokens"]]
            choices = [{"index": i, "token_ids": ids, "finish_reason": "length",
                        "logprobs": {"token_logprobs": [-1.0] * len(ids)}} for i in range(len(json["prompt"]))]
            return SimpleNamespace(raise_for_status=lambda: None, json=lambda: {"choices": choices})

    trainer = SimpleNamespace(vllm_generation=SimpleNamespace(vllm_client=Client()),
                              accelerator=SimpleNamespace(is_main_process=True))
    served = ServedAdapter("http://localhost:1", "policy", tok, [chat_format(tok).end_of_turn])
    served.client = Client()
    params = SamplingParams(max_new_tokens=5)
    for backend in (TRLVLLMPolicy(trainer, tok), served):
        gens = backend.continue_ids([[1, 2], [3]], params, limits=[2, 5])
        assert [g.completion_ids for g in gens] == [words[:2], words[:5]], backend
        assert [len(g.logprobs) for g in gens] == [2, 5] and gens[0].finish_reason == "length"
        assert gens[0].text == tok.decode(words[:2])


def test_the_lora_server_client_asks_for_each_seeded_row_with_its_own_seed(tok):
    """A request has one seed for all its prompts (a group's rows would draw alike): seeded, the LoRA server's
    client sends each row alone with seed + its stream, and keeps the rows' order; unseeded, one request."""
    from smith.train.vllm_policy import ServedAdapter

    sent = []

    class Client:
        def post(self, _path, json):
            sent.append((json["prompt"], json.get("seed")))
            choices = [{"index": i, "token_ids": [p[0]], "finish_reason": "stop",
                        "logprobs": {"token_logprobs": [-1.0]}} for i, p in enumerate(json["prompt"])]
            return SimpleNamespace(raise_for_status=lambda: None, json=lambda: {"choices": choices})

    served = ServedAdapter("http://localhost:1", "policy", tok, [chat_format(tok).end_of_turn])
    served.client = Client()
    gens = served.continue_ids([[5], [5], [7]], SamplingParams(max_new_tokens=4, seed=10), streams=[3, 4, 9])
    assert [g.completion_ids for g in gens] == [[5], [5], [7]]
    assert sorted(sent) == [([[5]], 13), ([[5]], 14), ([[7]], 19)]
    sent.clear()
    served.continue_ids([[5], [7]], SamplingParams(max_new_tokens=4))
    assert sent == [([[5], [7]], None)]
