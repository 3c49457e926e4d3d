"""Issue 14: the warm-start demonstrations: seen categories only, honest labels, headroom for RL, and the
token layout of a real rollout (so SFT teaches exactly what the RL loop will ask)."""

from __future__ import annotations

import random

import pytest
from transformers import AutoTokenizer

from sandbox import Limits
from smith.models.chat_format import chat_format
from smith.models.scripted import ScriptedBackend
from smith.pool import PoolEntry, ToolPool
from smith.rewards.evaluation import evaluate_direct
from smith.rollout.episodes import BuildTask, Rollout
from smith.rollout.prompts import build_messages, inner_use_messages
from smith.tasks import items, load_catalog
from smith.toolspec import ToolSpec, parse_response
from smith.train.warm import (
    CATEGORIES,
    HARD_BANK,
    NAMES,
    SEED_OFFSET,
    TOOLS,
    Demo,
    demo_tool,
    demonstrations,
    render,
    run_tool,
    said,
)

from .conftest import rollout_conf

MARKERS = {"lcm": "Least Common Multiple", "spell_backward": "Spell this word backward",
           "prime_factorization": "prime factorization"}


@pytest.fixture(scope="module")
def demos(rg_cache):
    return demonstrations(400, seed=0, cache_dir=str(rg_cache))


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_only_seen_categories_and_deterministic(demos, rg_cache):
    catalog = load_catalog()
    assert all(catalog.get(c).split == "seen" for c in CATEGORIES)
    unseen_markers = [it.question[:30] for c in catalog.unseen for it in items(c.name, "hard", 3, seed=7919,
                                                                                cache_dir=str(rg_cache))]
    from smith.rewards.judge import SYSTEM as JUDGE

    for d in demos[0]:
        if d.messages[0]["content"] == JUDGE:  # the judge is shown a tool, not a question
            continue
        question = d.messages[-1]["content"]
        assert sum(m in question for m in MARKERS.values()) == 1
        assert not any(u in question for u in unseen_markers)
    again = demonstrations(400, seed=0, cache_dir=str(rg_cache))
    assert [(d.messages, d.tools, d.turns) for d in again[0]] == [(d.messages, d.tools, d.turns) for d in demos[0]]


def test_demonstrations_leave_headroom(demos):
    """Before RL a fair share of demonstrated episodes is right, not none and not all (the issue asks roughly
    20-60%). Use and inner episodes need two things right: the tool (45% of demonstrated tools are correct)
    and the user's part (about 38%: a call, the right tool, the question, its output repeated), so about 16%
    are right end to end; docs/training.md gives the measured shares."""
    _, right = demos
    assert set(right) == {"build", "use", "inner", "evaluator", "judge"}
    assert right["evaluator"] == right["judge"] == 1.0  # the graders' protocols are demonstrated done right
    assert 0.2 <= right["build"] <= 0.6, right
    for kind in ("use", "inner"):
        assert 0.1 <= right[kind] <= 0.6, (kind, right)


@pytest.mark.parametrize("category", CATEGORIES)
def test_tool_labels_are_true_in_the_real_sandbox(category, sandbox, rg_cache):
    """Each demonstrated tool is graded like a rollout's: the correct ones score 1.0 on the hard band, the
    mistakes do not (some of them still pass the easy examples: plausible, not random)."""
    hard = items(category, "hard", 16, seed=3, cache_dir=str(rg_cache))
    easy = items(category, "easy", 16, seed=3, cache_dir=str(rg_cache))
    limits = Limits(timeout_s=2.0, memory_mb=256)
    rng = random.Random(0)
    seen_bodies = set()
    for _ in range(60):
        text, entry, correct = demo_tool(category, rng)
        body = entry.tool.code.replace(entry.tool.function_name, "{name}")
        if body in seen_bodies:
            continue
        seen_bodies.add(body)
        parsed = parse_response(text)
        assert parsed.ok, text
        r_hard = evaluate_direct(parsed.spec, hard, sandbox, limits).r_eval
        assert (r_hard == 1.0) == correct, (entry.tool.code, r_hard)
    assert len(seen_bodies) == len(TOOLS[category])
    if category == "spell_backward":  # its mistakes (a dropped letter, spaced letters, no reversal) fail everywhere
        return
    plausible = [demo_tool(category, random.Random(i)) for i in range(40)]
    easy_pass = [evaluate_direct(parse_response(t).spec, easy, sandbox, limits).r_eval for t, _, ok in plausible
                 if not ok]
    assert max(easy_pass) >= 0.25  # some mistakes look right on a share of the easy questions


def test_build_demo_has_the_rollouts_token_layout(tok, sandbox, rg_cache):
    """A build demonstration tokenises exactly as the rollout's sample of the same reply (prompt, completion,
    end-of-turn), with the loss on the completion only."""
    examples = items("lcm", "easy", 4, seed=0, cache_dir=str(rg_cache))
    text, _, _ = demo_tool("lcm", random.Random(0))
    ids, labels = render(Demo(build_messages(examples), None, [(said(text), None)]), tok)
    ro = Rollout(ScriptedBackend(tok, lambda ctx: text), sandbox, Limits(timeout_s=2.0, memory_mb=256), ToolPool(),
                 rollout_conf(max_completion_length=1000, evaluator="direct", judge="none"))
    try:
        (s,) = ro.run([BuildTask("lcm", examples, items("lcm", "hard", 2, seed=0, cache_dir=str(rg_cache)))], [],
                      random.Random(0))
    finally:
        ro.close()
    assert ids == s.prompt_ids + s.completion_ids
    assert labels == [-100] * len(s.prompt_ids) + s.completion_ids and all(s.mask)


def test_use_demo_masks_tool_output_and_trains_the_answers(tok, demos):
    demo: Demo = next(d for d in demos[0] if d.tools is not None and len(d.turns) == 2)
    ids, labels = render(demo, tok)
    prompt = tok.apply_chat_template(demo.messages, tools=demo.tools, add_generation_prompt=True, tokenize=True,
                                     return_dict=True)["input_ids"]
    assert ids[: len(prompt)] == list(prompt) and all(x == -100 for x in labels[: len(prompt)])
    trained = [i for i, x in enumerate(labels) if x != -100]
    # two trained runs: the tool call and the final answer, each ending in the end-of-turn token
    runs, start = [], trained[0]
    for a, b in zip(trained, [*trained[1:], None], strict=True):
        if b != a + 1:
            runs.append((start, a + 1))
            start = b
    assert len(runs) == 2
    call, answer = (tok.decode(ids[a:b]) for a, b in runs)
    fmt = chat_format(tok)
    assert call == fmt.reply_text(demo.turns[0][0]) + tok.eos_token and call.startswith("<tool_call>\n{")
    assert answer == demo.turns[1][0]["content"] + tok.eos_token
    masked = tok.decode(ids[runs[0][1]: runs[1][0]])
    assert "<tool_response>" in masked and demo.turns[0][1][0]["content"] in masked


def test_some_use_demos_guess_without_a_tool(tok, demos):
    """The 'no tool call' mistake: one trained reply, made up from the question alone (a number or the word),
    so RL has a one-token decision (call or guess) to learn."""
    guesses = [d for d in demos[0] if d.tools is not None and len(d.turns) == 1]
    uses = [d for d in demos[0] if d.tools is not None]
    assert 0.25 <= len(guesses) / len(uses) <= 0.55
    for d in guesses:
        (answer, follow), = d.turns
        answer = answer["content"]
        assert follow is None and "<tool_call>" not in answer and answer in d.messages[-1]["content"]
        labels = render(d, tok)[1]
        assert tok.decode([x for x in labels if x != -100]) == answer + tok.eos_token


def test_an_inner_build_demo_continues_into_the_use_prompt_as_the_rollout_does(tok, demos):
    """The build reply, then the use prompt rendered afresh with the menu in the tool block (the chat format's
    `follow_up`, which the rollout's inner build appends too), then the use turns; only the replies are trained."""
    demo = next(d for d in demos[0] if d.then is not None)
    fmt = chat_format(tok)
    ids, labels = render(demo, tok)
    head = fmt.render(demo.messages) + fmt.reply_ids(demo.turns[0][0])
    follow = fmt.follow_up(demo.then.messages, demo.then.tools)
    user = demo.then.messages[1]["content"]
    name, question = user.split("`")[1], user.rsplit("\n\n", 1)[-1]
    assert demo.then.messages == inner_use_messages(name, question)
    assert name in [t["function"]["name"] for t in demo.then.tools]
    assert ids[:len(head) + len(follow)] == head + follow
    assert labels[len(head):len(head) + len(follow)] == [-100] * len(follow)
    assert "<tools>" in tok.decode(follow) and labels[len(head) + len(follow)] != -100


def test_an_evaluator_demo_is_the_self_evaluators_episode(tok, demos, sandbox, rg_cache):
    """The evaluator's prompt is exactly what `evaluate_many` renders (its system prompt, the question, the tool
    alone under its function name); the trained call, parsed by the chat format as a rollout parses it, calls the
    tool with the question, and the answer repeats the tool's real output."""
    from smith.rewards.evaluation import EVALUATOR_SYSTEM, evaluate_with_model

    demo = next(d for d in demos[0] if d.messages[0]["content"] == EVALUATOR_SYSTEM)
    (spec_tool,) = demo.tools
    name, question = spec_tool["function"]["name"], demo.messages[1]["content"]
    fmt = chat_format(tok)
    ids, labels = render(demo, tok)
    prompt = fmt.render(demo.messages, demo.tools)
    assert ids[:len(prompt)] == prompt and set(labels[:len(prompt)]) == {-100}
    call = fmt.parse(fmt.reply_text(demo.turns[0][0]))
    assert [(c.name, c.arguments) for c in call.calls] == [(name, {"question": question})]
    output = demo.turns[0][1][0]["content"]
    assert demo.turns[1][0]["content"] == output
    # the same reply, played by a scripted evaluator through the grader, is graded on the tool's output
    category = next(c for c, n in NAMES.items() if n == name)
    candidates = (ToolSpec(body.format(name=name), spec_tool["function"], name) for _, _, body in TOOLS[category])
    spec = next(s for s in candidates if run_tool(PoolEntry(category, s, 1.0), question) == output)
    replies = iter([fmt.reply_text(demo.turns[0][0]), output])
    bank = items(category, "hard", HARD_BANK, seed=SEED_OFFSET, cache_dir=str(rg_cache))
    item = next(it for it in bank if it.question == question)
    result = evaluate_with_model(spec, [item], ScriptedBackend(tok, lambda ctx: next(replies)), sandbox)
    assert result.traces[0].answer == output and result.traces[0].status in ("correct", "wrong")


def test_a_judge_demo_asks_as_the_rollout_and_scores_by_correctness(demos):
    """The judge's prompt is `judge_prompt` of what the rollout shows it (the parsed tool, or the raw reply when
    the schema names another function); the verdict parses, its code and overall scores follow the code's
    correctness and its schema score the schema's agreement with the code."""
    from smith.rewards.judge import SYSTEM, judge_prompt, parse_judge_reply

    judged = [d for d in demos[0] if d.messages[0]["content"] == SYSTEM]
    assert len(judged) >= 20
    correct_bodies = {body.format(name=NAMES[c]).strip() for c, tools in TOOLS.items() for _, ok, body in tools if ok}
    kinds = set()
    for d in judged:
        reply = parse_judge_reply(d.turns[0][0]["content"])
        body = d.messages[1]["content"].split("Tool:\n", 1)[1]
        parsed = parse_response(body)
        assert reply is not None and d.messages == judge_prompt(parsed.spec if parsed.ok else body)
        right = parsed.code.strip() in correct_bodies
        assert (reply.overall >= 0.8 and reply.code_correctness >= 0.8) if right else reply.overall <= 0.3
        assert (reply.schema_quality <= 0.2) == (not parsed.ok)
        kinds.add((right, parsed.ok))
    assert kinds == {(True, True), (True, False), (False, True), (False, False)}


def test_the_shipped_warm_model_is_current(warm_model_dir):
    """The warm model ships with smith; changing its demonstrations or settings without rebuilding it (the command
    in its marker) fails here. `is_current` also checks the weights' checksum."""
    import json

    from smith.train.warm import MARKER, SHIPPED, WarmSettings, is_current

    info = json.loads((SHIPPED / MARKER).read_text())
    assert info["key"] == WarmSettings().key(), "rebuild it: " + info["command"]
    assert is_current(SHIPPED) and warm_model_dir == SHIPPED
    assert info["command"] == "smith tiny-model smith/assets/tiny-warm --warm"


def test_the_warm_model_plays_every_role(warm_model_dir, sandbox, rg_cache):
    """Per-role protocol check (smith.train.roles; docs/training.md, "Every role the policy plays"): the self
    evaluator ends nearly every question in a call of the tool, the judge's verdicts parse, use episodes call
    the tools and answer."""
    from smith.models.hf import HFBackend
    from smith.train.roles import role_table

    table = role_table(HFBackend.from_pretrained(warm_model_dir, progress=False), sandbox,
                       ("lcm", "prime_factorization"), str(rg_cache), tools_per_category=4, questions=4)
    assert table.evaluator_called >= 0.9 and table.evaluator_agrees >= 0.75, table
    assert table.judge_parsed >= 0.9 and table.build_parsed >= 0.5, table
    assert table.use_episodes == 8 and table.use_right >= 0.25 and table.use_no_call <= 0.5, table


def test_unusable_model_dir_is_a_one_line_error(tmp_path):
    from smith.train.warm import build_warm_model

    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(ValueError, match=r"cannot create .*/file/sub for the warm model"):
        build_warm_model(tmp_path / "file" / "sub" / "model")


def test_length_groups_give_the_batch_loss_and_gradient(tok, demos, tmp_path):
    """The warm SFT's grouped forwards (rows of similar length, each group cut to its longest row) compute the
    padded batch's own loss and gradient: the speed-up leaves the maths as it was."""
    import torch
    from datasets import Dataset
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    from smith.train.args import sft_args
    from smith.train.warm import LearntPositionsSFTTrainer, WarmSettings, demo_rows, fresh_model

    rows = demo_rows(demos[0][:6], tok)
    assert len({len(r["input_ids"]) for r in rows}) > 1  # the rows differ in length, so padding is cut
    batch = DataCollatorForLanguageModeling(pad_token_id=tok.pad_token_id)(rows)
    model = fresh_model(tok, WarmSettings(hidden_size=32, layers=2, intermediate_size=64))
    trainer = LearntPositionsSFTTrainer(model=model, args=sft_args(tmp_path, on_gpu=False, report_to=[]),
                                        train_dataset=Dataset.from_list(rows), processing_class=tok)
    grouped = trainer.compute_loss(model, batch)
    grouped.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    whole = model(**batch).loss  # transformers' own shifted cross-entropy over the padded batch
    whole.backward()
    torch.testing.assert_close(grouped, whole, rtol=1e-5, atol=1e-6)
    for g, p in zip(grads, model.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-6)


def test_the_copy_drills_render_as_the_shipped_model_learnt_them(warm_model_dir, rg_cache):
    """The copy drills are rendered by the warm tokenizer's chat format (issue 44, item 7: they were hand-written
    ChatML); the first 512 are pinned to the text the shipped model was trained on, so a change in the format
    layer that would silently change the drills fails here (rebuild the model then)."""
    import hashlib
    import json

    from transformers import AutoTokenizer

    from smith.models.chat_format import chat_format
    from smith.train.warm import copy_drills

    drills = copy_drills(512, chat_format(AutoTokenizer.from_pretrained(warm_model_dir)), 0, cache_dir=str(rg_cache))
    assert drills[0][0].startswith("<|im_start|>") and drills[0][1].endswith("<|im_end|>")
    assert hashlib.sha256(json.dumps(drills).encode()).hexdigest() == (
        "75d75db62fbc8736612c35daded6a66c8c5c0f8169f80040e8c498d4bb95b44f")
