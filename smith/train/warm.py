"""The warm-started tiny policy: a small Qwen3 taught the SMITH protocols by supervised fine-tuning.

One file, though just over 400 lines: the demonstrations and the SFT run that learns them change together (the
cache key, WARM_VERSION, covers both).

A random tiny model scores 0 on every axis, so an RL run on it shows nothing. This builds a policy that
already speaks both task formats, with headroom left for RL: TRL's `SFTTrainer` on generated demonstrations
over real reasoning-gym items of a few **seen** categories (unseen ones never appear), rendered with the
real prompts (`build_messages`, `use_messages`, the inner-build turn) and the real chat template:

- build: 4 easy examples -> a (python, json) pair. About 45% of the demonstrated tools are correct; the
  rest are plausible mistakes (some right on easy examples but not the hard band: only the first two
  numbers, unique factors only, a missing last factor; off by one; wrong output format; a schema naming
  another function).
- use: a question and a 3-tool menu named as the rollout names them -> a `<tool_call>`, the tool's real
  output, then the final answer. Mistakes: no tool call (a guess), the wrong tool, a damaged argument, a
  guess instead of the tool's output. Most are one decision (call or guess, which output to repeat) that RL
  can move in a few steps; copy slips are not demonstrated, since they only teach the model to copy worse.
- inner build: a build, then the use prompt that follows it in the rollout ("your tool is now available", its
  tools in the template's tool block), then the use protocol.
- evaluator: the self evaluator's episode (`smith.rewards.evaluation`: its system prompt, a held-out question, the
  built tool alone in the tool block under its function name) -> a call of the tool with the question, the tool's
  real output, that output as the answer. Always done right: the evaluator grades the builds, and an evaluator
  that fumbles the call scores a correct tool 0.
- judge: the judge's prompt (`smith.rewards.judge.judge_prompt`: a parsed tool, or the raw reply of a malformed
  one, as the rollout asks it) -> the JSON verdict, its scores tied to the tool: high for a correct tool, low
  code_correctness and overall for a wrong one, low schema_quality for a schema that names another function.

Demonstrations hold canonical messages and render through the tokenizer's chat format
(`smith.models.chat_format`), so any family renders them in its own template and tool-call syntax.

Two stages, both TRL `SFTTrainer`: (1) short copy drills (`copy_drills`), (2) the demonstrations.
Tokens of tool outputs and prompts are excluded from the loss. The BPE tokenizer is trained on the same
rendered text, so a build response is about 100 tokens. Questions come from banks of 1,500 hard items per
category, so a use demonstration is almost never repeated: the model has to copy the question and the
tool's name and output from its context, it cannot memorise them (with 64-item banks it did, and never
learned to copy). Deterministic per seed; cached per directory. The model never learns to write a parseable
`spell_backward` tool (it does not tell that category from its examples; docs/training.md), so `recipe=tiny`
trains on the other two; spell_backward tools still appear as menu distractors in the use demonstrations.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import Trainer
from trl import SFTTrainer

from smith.builds import cached_build, read_marker
from smith.models.chat_format import ToolCall, chat_format
from smith.models.tiny import WARM_SHIPPED
from smith.pool import PoolEntry, menu_names
from smith.rewards.evaluation import EVALUATOR_SYSTEM
from smith.rewards.judge import INSTRUCTIONS as JUDGE_INSTRUCTIONS
from smith.rewards.judge import SYSTEM as JUDGE_SYSTEM
from smith.rewards.judge import judge_prompt
from smith.rollout.prompts import build_messages, inner_use_messages, use_messages
from smith.toolspec import ToolSpec, parse_response

WARM_VERSION = 8  # 6: float32 SFT (smith.train.args.mixed_precision); 7: output drills see the question;
                  # 8: evaluator and judge demonstrations
MARKER = "smith_warm.json"  # the build's settings (key), the weights' checksum, the command that built it
WEIGHTS = "model.safetensors"
# The warm model ships with smith (a few MB): float32 SFT gives other weights on other CPU kinds, and the build
# takes about 10 minutes on 2 cores; `smith tiny-model smith/assets/tiny-warm --warm` rebuilds it in place
# (tests/test_warm.py fails while the shipped one does not match the current settings).
SHIPPED = WARM_SHIPPED
CATEGORIES = ("lcm", "prime_factorization", "spell_backward")
SEED_OFFSET = 7919  # SFT items come from their own seed, never the training or evaluation streams
EASY_BANK, HARD_BANK = 64, 1500  # many distinct questions: the model must copy them, it cannot memorise them

# Tool bodies per category: (weight, correct, body). `{name}` is the function name.
_LCM = ("import math\nimport re\n\ndef {name}(question: str) -> str:\n"
        "    nums = [int(x) for x in re.findall(r\"\\d+\", question)]\n")
_REV = "import re\n\ndef {name}(question: str) -> str:\n    word = re.split(r\"\\s+\", question.strip())[-1]\n"
_PF = ("import re\n\ndef {name}(question: str) -> str:\n    n = int(re.findall(r\"\\d+\", question)[0])\n"
       "    factors, d = [], 2\n    while d * d <= n:\n        while n % d == 0:\n            factors.append(d)\n"
       "            n //= d\n        d += {step}\n")
_PF_REST = "    if n > 1:\n        factors.append(n)\n"
TOOLS: dict[str, list[tuple[float, bool, str]]] = {
    "lcm": [
        (0.45, True, _LCM + "    return str(math.lcm(*nums))\n"),
        (0.2, False, _LCM + "    return str(math.lcm(*nums[:2]))\n"),
        (0.15, False, _LCM + "    return str(math.gcd(*nums))\n"),
        (0.1, False, _LCM + "    return str(math.lcm(*nums) + 1)\n"),
        (0.1, False, _LCM + "    return str(nums[0] * nums[-1])\n"),
    ],
    "spell_backward": [
        (0.45, True, _REV + "    return word[::-1]\n"),
        (0.2, False, _REV + "    return word[-2::-1]\n"),
        (0.15, False, _REV + "    return \" \".join(word[::-1])\n"),
        (0.1, False, _REV + "    return word\n"),
        (0.1, False, _REV.replace("[-1]", "[0]") + "    return word[::-1]\n"),
    ],
    "prime_factorization": [
        (0.45, True, _PF.replace("{step}", "1") + _PF_REST + "    return \" × \".join(map(str, factors))\n"),
        (0.2, False, _PF.replace("{step}", "1") + "    return \" × \".join(map(str, factors))\n"),
        (0.15, False, _PF.replace("{step}", "1") + _PF_REST + "    return \" * \".join(map(str, factors))\n"),
        (0.1, False, _PF.replace("{step}", "1") + _PF_REST
         + "    return \" × \".join(map(str, sorted(set(factors))))\n"),
        (0.1, False, _PF.replace("{step}", "2") + _PF_REST + "    return \" × \".join(map(str, factors))\n"),
    ],
}
# One function name per category: with two, a quarter of the v2 policy's use calls named the category's other
# name, which was not in the menu (unknown tool), so the use axis stayed low whatever the tool's quality.
NAMES = {"lcm": "lcm_of_numbers", "spell_backward": "spell_backward", "prime_factorization": "prime_factors"}
DESCRIPTIONS = {
    "lcm": ["Least common multiple of the numbers in the question.", "Finds the LCM of the listed numbers."],
    "spell_backward": ["Spells the word in the question backward.", "Reverses the last word of the question."],
    "prime_factorization": ["Prime factorization of the number in the question.",
                            "Factors the number into primes, separated by ×."],
}
# Episode mix and the use mistakes' rates.
KINDS = (("build", 0.34), ("use", 0.34), ("inner", 0.12), ("evaluator", 0.1), ("judge", 0.1))
P_MALFORMED, P_NO_CALL, P_WRONG_TOOL, P_BAD_ARGS, P_GUESS = 0.08, 0.4, 0.25, 0.05, 0.1
# The judge's demonstrated scores (tenths): (code_correctness, schema_quality, overall) ranges for a correct tool, a
# wrong one, and the schema_quality of a schema that names another function.
VERDICT_RIGHT, VERDICT_WRONG, SCHEMA_MISMATCH = ((8, 10), (7, 10), (8, 10)), ((0, 3), (6, 9), (1, 3)), (0, 2)


Turn = tuple[dict[str, Any], list[dict[str, str]] | None]  # an assistant message, the messages fed back after it


@dataclass
class Demo:
    """One demonstration: a prompt, then assistant turns each followed by the messages fed back (masked); `then`
    continues it with a fresh prompt (an inner build's use episode)."""

    messages: list[dict[str, str]]
    tools: list[dict[str, Any]] | None
    turns: list[Turn]
    then: Demo | None = None
    right: bool = True  # what the rollout would reward: a correct, well-formed tool; the right tool's output


def said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def _choose(rng: random.Random, weighted: list[tuple[float, bool, str]]) -> tuple[bool, str]:
    _, correct, body = rng.choices(weighted, weights=[t[0] for t in weighted])[0]
    return correct, body


def demo_tool(category: str, rng: random.Random, malformed: bool = False) -> tuple[str, PoolEntry, bool]:
    """A demonstrated tool: (response text, the pool entry it would make, is it correct)."""
    correct, body = _choose(rng, TOOLS[category])
    name = NAMES[category]
    code = body.format(name=name)
    schema = {"name": rng.choice([n for c, n in NAMES.items() if c != category]) if malformed else name,
              "description": rng.choice(DESCRIPTIONS[category]),
              "parameters": {"type": "object", "properties": {"question": {"type": "string"}},
                             "required": ["question"]}}
    text = f"```python\n{code}```\n```json\n{json.dumps(schema, ensure_ascii=False)}\n```"
    return text, PoolEntry(category, ToolSpec(code, schema, name), 1.0 if correct else 0.0), correct and not malformed


@functools.cache
def _function(code: str, name: str) -> Any:
    scope: dict[str, Any] = {}
    exec(code, scope)
    return scope[name]


def run_tool(entry: PoolEntry, question: str) -> str:
    """Output of one of this module's own demonstration tools (trusted code written above, never a model's; the
    few distinct bodies are compiled once)."""
    try:
        return str(_function(entry.tool.code, entry.tool.function_name)(question))
    except Exception as e:  # a damaged argument may make a tool raise, as in a rollout
        return f"error: error: {type(e).__name__}: {e}"


def _damage(question: str, rng: random.Random) -> str:
    """A plausible wrong argument: the last number or word dropped, or the question cut short."""
    tokens = question.split()
    if len(tokens) > 2 and rng.random() < 0.5:
        return " ".join(tokens[:-1])
    digits = list(re.finditer(r"\d+", question))
    if digits:
        m = digits[-1]
        return question[: m.start()] + m.group()[:-1] + question[m.end():] if len(m.group()) > 1 else question[:-2]
    return question[: max(1, len(question) // 2)]


def _guess(question: str, rng: random.Random) -> str:
    """An answer made up from the question alone: one of its numbers, or its last word."""
    numbers = re.findall(r"\d+", question)
    return rng.choice(numbers) if numbers else question.split()[-1]


def _use_turns(question: str, menu: dict[str, PoolEntry], target: str, rng: random.Random
               ) -> tuple[list[Turn], bool]:
    """Call a menu tool, read its output, answer. Returns the turns and whether the answer is the target's
    output on the untouched question (what the rollout rewards, given a correct tool)."""
    if rng.random() < P_NO_CALL:
        return [(said(_guess(question, rng)), None)], False
    ok = True
    name = target
    if rng.random() < P_WRONG_TOOL:
        name, ok = rng.choice([n for n in menu if n != target]), False
    argument = question
    if rng.random() < P_BAD_ARGS:
        argument, ok = _damage(question, rng), False
    call = {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": {"question": argument}}}]}
    output = run_tool(menu[name], argument)
    answer = output
    if rng.random() < P_GUESS:
        answer, ok = _guess(question, rng), False
    return [(call, [{"role": "tool", "content": output}]), (said(answer), None)], ok


def _evaluator_demo(category: str, question: str, rng: random.Random) -> Demo:
    """The self evaluator's episode on a demonstrated tool, done right: call it with the question, answer with its
    output (the rollout grades the output of the call, never the prose)."""
    _, entry, _ = demo_tool(category, rng)
    spec = entry.tool
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": spec.function_name, "arguments": {"question": question}}}]}
    output = run_tool(entry, question)
    return Demo([{"role": "system", "content": EVALUATOR_SYSTEM}, {"role": "user", "content": question}],
                [spec.openai_tool()], [(call, [{"role": "tool", "content": output}]), (said(output), None)])


def verdict(correct: bool, malformed: bool, rng: random.Random) -> dict[str, float]:
    """The judge's scores for a demonstrated tool: tied to whether it is right (and its schema to its code)."""
    code, schema, overall = (rng.randint(lo, hi) / 10 for lo, hi in (VERDICT_RIGHT if correct else VERDICT_WRONG))
    if malformed:
        schema = rng.randint(*SCHEMA_MISMATCH) / 10
    return {"code_correctness": code, "schema_quality": schema, "overall": overall}


def _judge_demo(category: str, rng: random.Random) -> Demo:
    """The judge's prompt on a demonstrated tool as the rollout asks it (the parsed tool, or the raw reply when
    the schema names another function) -> the JSON verdict."""
    malformed = rng.random() < 0.25
    text, entry, _ = demo_tool(category, rng, malformed=malformed)
    parsed = parse_response(text, use_xgrammar=False)
    scores = verdict(entry.r_eval > 0, malformed, rng)
    return Demo(judge_prompt(parsed.spec if parsed.ok else text), None, [(said(json.dumps(scores)), None)])


def _menu(own: PoolEntry, categories: tuple[str, ...], rng: random.Random) -> tuple[dict[str, PoolEntry], str]:
    """`own` and up to 2 tools of other categories, shuffled and named as the rollout names them; and own's name."""
    others = [c for c in categories if c != own.category]
    tools = [own, *(demo_tool(c, rng)[1] for c in rng.sample(others, min(2, len(others))))]
    rng.shuffle(tools)
    menu = menu_names(tools)
    return menu, next(k for k, e in menu.items() if e is own)


def demonstrations(n: int, seed: int = 0, categories: tuple[str, ...] = CATEGORIES,
                   cache_dir: str | None = None) -> tuple[list[Demo], dict[str, float]]:
    """`n` demonstrations over real reasoning-gym items, and the share of each kind that is right."""
    from smith.tasks import items

    rng = random.Random(seed)
    easy = {c: items(c, "easy", EASY_BANK, seed=seed + SEED_OFFSET, cache_dir=cache_dir) for c in categories}
    hard = {c: items(c, "hard", HARD_BANK, seed=seed + SEED_OFFSET, cache_dir=cache_dir) for c in categories}
    demos: list[Demo] = []
    right: dict[str, list[bool]] = {k: [] for k, _ in KINDS}
    for _ in range(n):
        kind = rng.choices([k for k, _ in KINDS], weights=[w for _, w in KINDS])[0]
        category = rng.choice(categories)
        question = rng.choice(hard[category]).question
        if kind == "evaluator":
            demos.append(_evaluator_demo(category, question, rng))
            right[kind].append(True)
            continue
        if kind == "judge":
            demos.append(_judge_demo(category, rng))
            right[kind].append(True)
            continue
        if kind == "build":
            text, _, ok = demo_tool(category, rng, malformed=rng.random() < P_MALFORMED)
            demos.append(Demo(build_messages(rng.sample(easy[category], 4)), None, [(said(text), None)], right=ok))
            right[kind].append(ok)
            continue
        if kind == "inner":
            text, own, built_ok = demo_tool(category, rng)
            menu, target = _menu(own, categories, rng)
            turns, ok = _use_turns(question, menu, target, rng)
            then = Demo(inner_use_messages(target, question), [e.tool.openai_tool(k) for k, e in menu.items()], turns)
            demos.append(Demo(build_messages(rng.sample(easy[category], 4)), None, [(said(text), None)], then,
                              right=ok and built_ok))
            right[kind].append(ok and built_ok)
            continue
        # the pool holds tools with r_eval > 0: mostly correct ones, some that only pass easy-looking items
        match = demo_tool(category, rng)[1]
        menu, target = _menu(match, categories, rng)
        turns, ok = _use_turns(question, menu, target, rng)
        demos.append(Demo(use_messages(question), [e.tool.openai_tool(k) for k, e in menu.items()], turns,
                          right=ok and match.r_eval > 0))
        right[kind].append(ok and match.r_eval > 0)
    return demos, {k: sum(v) / max(len(v), 1) for k, v in right.items()}


def copy_drills(n: int, fmt: Any, seed: int = 0, categories: tuple[str, ...] = CATEGORIES,
                cache_dir: str | None = None) -> list[tuple[str, str]]:
    """Short (context, reply) chats that only copy: the matching tool's name from a menu and the question
    into a tool call, a tool's output into the answer. A tiny model does not learn to copy from the long
    demonstrations alone (their few copied tokens drown in ~400 prompt tokens); these dense drills teach it
    first (stage 1). An output is repeated with its question in the context, as in a rollout: drilled alone
    (v6), answers mixed the output with the question's numbers (a use episode's usual failure). Both are
    rendered by `fmt`, the warm tokenizer's chat format, as a rollout's turns are: a short system turn listing
    the menu's names, the question's turn, a tool turn; the reply in the family's syntax and its end of turn."""
    from smith.tasks import items

    rng = random.Random(seed + 1)
    hard = {c: items(c, "hard", HARD_BANK, seed=seed + SEED_OFFSET, cache_dir=cache_dir) for c in categories}
    end = fmt.tokenizer.decode([fmt.end_of_turn])
    drills = []
    for _ in range(n):
        category = rng.choice(categories)
        question = rng.choice(hard[category]).question
        if rng.random() < 0.5:  # look the matching tool up in a menu, copy its name and the question
            others = [c for c in categories if c != category]
            tools = [demo_tool(c, rng)[1] for c in [category, *rng.sample(others, min(2, len(others)))]]
            rng.shuffle(tools)
            menu = menu_names(tools)
            name = next(k for k, e in menu.items() if e.category == category)
            listing = "\n".join(json.dumps({"name": k}) for k in menu)
            turns = [{"role": "system", "content": f"<tools>\n{listing}\n</tools>"},
                     {"role": "user", "content": question}]
            reply = {"content": "", "tool_calls": [ToolCall(name, {"question": question})]}
        else:  # repeat a tool's output, the question's own numbers and words in sight
            out = run_tool(demo_tool(category, rng)[1], question)
            turns = [{"role": "user", "content": question}, {"role": "tool", "content": out}]
            reply = {"content": out}
        drills.append((fmt.render_text(turns), fmt.reply_text(reply) + end))
    return drills


def render(demo: Demo, tokenizer: Any) -> tuple[list[int], list[int]]:
    """(input_ids, labels): the token layout of a rollout (the chat format's prompt, replies and continuations),
    -100 on prompt and fed-back tokens."""
    fmt = chat_format(tokenizer)
    ids = fmt.render(demo.messages, demo.tools)
    labels = [-100] * len(ids)
    part: Demo | None = demo
    while part is not None:
        for message, follow in part.turns:
            reply = fmt.reply_ids(message)
            ids += reply
            labels += reply
            if follow:
                fed = fmt.continuation(follow)
                ids += fed
                labels += [-100] * len(fed)
        part = part.then
        if part is not None:
            fed = fmt.follow_up(part.messages, part.tools)
            ids += fed
            labels += [-100] * len(fed)
    return ids, labels


def render_text(demo: Demo, tokenizer: Any) -> str:
    """The same episode as text (the tokenizer's training corpus)."""
    return tokenizer.decode(render(demo, tokenizer)[0])


class PlainLossSFTTrainer(SFTTrainer):
    """TRL's SFT with the model's own cross-entropy. On CPU, TRL's chunked log-prob loss scores every position,
    prompt tokens included, and halves the speed of this tiny model (benchmarks/warm_sft.py)."""

    def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False, num_items_in_batch: Any = None
                     ) -> Any:
        return Trainer.compute_loss(self, model, inputs, return_outputs, num_items_in_batch)


class LearntPositionsSFTTrainer(PlainLossSFTTrainer):
    """The same cross-entropy, with the LM head applied only where a label is learnt: most positions of a copy
    drill or a demonstration are context, and with a 3,072-token vocabulary over a 128-wide model the head is a
    large share of the compute (benchmarks/warm_sft.py: the same final loss as TRL's defaults, and the speed).

    The batch runs as `length_groups` forwards of rows of similar length, each cut to its own longest row: TRL pads
    on the right and attention is causal, so a row's tokens never see the padding and the loss (summed, then
    divided by the batch's learnt tokens) is the batch's own; copy drills and demonstrations vary 3x in length,
    and the padding was 40-50% of the compute. A PEFT model (the cold start, smith.train.cold) runs through its
    base, where the adapters sit in place."""

    length_groups = 4

    def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False, num_items_in_batch: Any = None
                     ) -> Any:
        import torch.nn.functional as F

        if return_outputs:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        model = model.get_base_model() if hasattr(model, "get_base_model") else model
        mask = inputs.get("attention_mask")
        lengths = (mask.sum(1) if mask is not None else inputs["input_ids"].new_full(
            (len(inputs["input_ids"]),), inputs["input_ids"].shape[1]))
        order = lengths.argsort()
        loss, learnt_total = 0.0, 0
        for rows in order.tensor_split(min(self.length_groups, len(order))):
            width = int(lengths[rows].max())
            ids, labels = inputs["input_ids"][rows, :width], inputs["labels"][rows, 1:width]
            hidden = model.model(input_ids=ids, attention_mask=None if mask is None else mask[rows, :width])
            learnt = labels != -100
            loss = loss + F.cross_entropy(model.lm_head(hidden.last_hidden_state[:, :-1][learnt]), labels[learnt],
                                          reduction="sum")
            learnt_total += learnt.sum()
        return loss / (learnt_total if num_items_in_batch is None else num_items_in_batch)


@dataclass
class WarmSettings:
    """What the cached model depends on (its marker); sized for 2 CPU cores."""

    seed: int = 0
    copy_steps: int = 1500  # stage 1: copy drills
    copy_batch_size: int = 32
    copy_learning_rate: float = 3e-3
    n_demos: int = 4000  # stage 2: the protocol demonstrations (a fifth of them the evaluator and the judge)
    epochs: float = 1.25
    learning_rate: float = 2e-3
    batch_size: int = 8
    vocab_size: int = 3072
    hidden_size: int = 128
    layers: int = 4
    heads: int = 4
    intermediate_size: int = 384

    def key(self) -> dict[str, Any]:
        demos = [TOOLS, NAMES, DESCRIPTIONS, KINDS, CATEGORIES, EASY_BANK, HARD_BANK,
                 P_MALFORMED, P_NO_CALL, P_WRONG_TOOL, P_BAD_ARGS, P_GUESS, VERDICT_RIGHT, VERDICT_WRONG,
                 SCHEMA_MISMATCH, EVALUATOR_SYSTEM, JUDGE_SYSTEM, JUDGE_INSTRUCTIONS]
        src = hashlib.sha1(json.dumps(demos).encode()).hexdigest()[:12]
        return {"version": WARM_VERSION, "demos": src, "drills": 4, **self.__dict__}


def warm_tokenizer(demos: list[Demo], vocab_size: int) -> Any:
    """The BPE trained on the rendered demonstrations (the chat template renders text with any tokenizer, so a
    small draft one renders the corpus first)."""
    from smith.models.tiny import train_tokenizer

    draft = train_tokenizer([m["content"] for d in demos[:50] for m in d.messages], 400)
    return train_tokenizer([render_text(d, draft) for d in demos], vocab_size)


def fresh_model(tok: Any, s: WarmSettings) -> Any:
    """The untrained Qwen3 of these settings, seeded."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=len(tok), hidden_size=s.hidden_size, intermediate_size=s.intermediate_size,
        num_hidden_layers=s.layers, num_attention_heads=s.heads, num_key_value_heads=s.heads // 2,
        head_dim=s.hidden_size // s.heads, max_position_embeddings=4096, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"), pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(s.seed)
    return Qwen3ForCausalLM(config)


def drill_rows(drills: list[tuple[str, str]], tok: Any) -> list[dict[str, list[int]]]:
    """SFT rows of the copy drills: the loss on the reply only."""
    texts = list(dict.fromkeys(t for d in drills for t in d))  # half the strings repeat: each is encoded once
    ids = dict(zip(texts, tok(texts, add_special_tokens=False)["input_ids"], strict=True))
    contexts, replies = ([ids[d[i]] for d in drills] for i in (0, 1))
    return [{"input_ids": c + r, "labels": [-100] * len(c) + r} for c, r in zip(contexts, replies, strict=True)]


def demo_rows(demos: list[Demo], tok: Any) -> list[dict[str, list[int]]]:
    """SFT rows of the demonstrations (`render`)."""
    return [dict(zip(("input_ids", "labels"), render(d, tok), strict=True)) for d in demos]


def _shown(path: Path) -> str:
    """`path` as a command names it: relative to the checkout it lies in (the shipped copy), else as given."""
    root = SHIPPED.parents[2]
    return str(path.resolve().relative_to(root)) if path.resolve().is_relative_to(root) else str(path)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def is_current(path: Path, s: WarmSettings | None = None) -> bool:
    """The model at `path` was built with these settings (its marker's key) and holds the weights that build wrote
    (their checksum, in the marker too)."""
    info = read_marker(path, MARKER)
    return (info.get("key") == (s or WarmSettings()).key() and (path / WEIGHTS).is_file()
            and info.get("sha256") == _sha256(path / WEIGHTS))


def build_warm_model(path: str | os.PathLike | None = None, settings: WarmSettings | None = None,
                     cache_dir: str | None = None, progress: bool = True) -> tuple[Path, bool]:
    """The warm-started tiny policy at `path` (None: the copy shipped with smith, `SHIPPED`), built there unless it
    is current (`is_current`: a current model is only read, so a read-only install needs no lock). Returns
    (path, built_now)."""
    s = settings or WarmSettings()
    path = Path(path) if path is not None else SHIPPED

    def build(tmp: Path) -> None:
        from datasets import Dataset
        from transformers import GenerationConfig

        from smith.train.args import sft_args

        os.environ.setdefault("RAYON_NUM_THREADS", "1")  # BPE merges deterministic
        demos, right = demonstrations(s.n_demos, s.seed, cache_dir=cache_dir)
        tok = warm_tokenizer(demos, s.vocab_size)
        eos = tok.convert_tokens_to_ids("<|im_end|>")
        model = fresh_model(tok, s)
        drills = copy_drills(s.copy_steps * s.copy_batch_size, chat_format(tok), s.seed, cache_dir=cache_dir)
        stages = [  # (rows, batch size, learning rate, schedule)
            (drill_rows(drills, tok), s.copy_batch_size, s.copy_learning_rate, "constant_with_warmup"),
            (demo_rows(demos, tok), s.batch_size, s.learning_rate, "cosine"),
        ]
        losses = []
        for i, (rows, batch, lr, schedule) in enumerate(stages):
            args = sft_args(
                tmp / "sft", on_gpu=False, num_train_epochs=s.epochs if i else 1.0, per_device_train_batch_size=batch,
                learning_rate=lr, lr_scheduler_type=schedule, warmup_steps=20, weight_decay=0.0, logging_steps=50,
                seed=s.seed, data_seed=s.seed, disable_tqdm=not progress,
            )
            trainer = LearntPositionsSFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                                                processing_class=tok)
            losses.append(trainer.train().training_loss)
        model.generation_config = GenerationConfig(eos_token_id=[eos, tok.pad_token_id], pad_token_id=tok.pad_token_id,
                                                   do_sample=True, temperature=0.7, top_p=0.95)
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        shutil.rmtree(tmp / "sft", ignore_errors=True)
        lengths = [len(row["input_ids"]) for row in stages[1][0]]
        info = {"key": s.key(), "categories": list(CATEGORIES), "demo_right": right,
                "train_loss": {"copy": losses[0], "demos": losses[1]},
                "parameters": sum(p.numel() for p in model.parameters()),
                "mean_tokens_per_demo": sum(lengths) / len(lengths), "sha256": _sha256(tmp / WEIGHTS),
                "command": f"smith tiny-model {_shown(path)} --warm"}
        (tmp / MARKER).write_text(json.dumps(info, indent=1))

    return cached_build(path, lambda p: is_current(p, s), build, "warm model")
