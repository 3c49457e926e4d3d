"""Issue 5: build and use episodes end to end with the real sandbox, exact rewards, masks and pool contents.

Completions are scripted (the allowed test double for LLM text); tokenizer, template, sandbox, parsing,
rewards and the pool are real. One test runs the real tiny model instead of a script.
"""

from __future__ import annotations

import json
import math
import random
import re

import pytest
from transformers import AutoTokenizer

from sandbox import Limits
from smith.config import EvaluatorConfig, JudgeConfig, ModelConfig, TrainConfig
from smith.models.base import Generation
from smith.models.chat_format import chat_format
from smith.models.scripted import ScriptedBackend
from smith.pool import PoolEntry, ToolPool
from smith.rewards.judge import SYSTEM as JUDGE_SYSTEM
from smith.rewards.use import correctness_reward
from smith.rollout.episodes import BuildTask, Rollout, UseTask, admit
from smith.rollout.prompts import inner_use_messages
from smith.tasks import items
from smith.toolspec import ToolSpec
from smith.train.session import Session

from .conftest import fork_server_killer, mark, rollout_conf

REVERSE = "def spell_backward(question: str) -> str:\n    return question.split(':')[-1].strip()[::-1]\n"
SCHEMA = {"name": "spell_backward", "description": "Spells the word at the end of the question backward.",
          "parameters": {"type": "object", "properties": {"question": {"type": "string",
                                                                       "description": "the question text"}},
                         "required": ["question"]}}
RAISES = "def spell_backward(question: str) -> str:\n    raise ValueError('not today')\n"
LCM = ("import math\nimport re\n\ndef lcm_tool(question: str) -> str:\n"
       "    nums = [int(x) for x in re.findall(r'\\d+', question.split(':')[-1])]\n"
       "    return str(math.lcm(*nums))\n")
LCM_SCHEMA = {"name": "lcm_tool", "description": "Least common multiple of the numbers listed in the question.",
              "parameters": {"type": "object", "properties": {"question": {"type": "string"}},
                             "required": ["question"]}}


def response(code: str, schema: dict) -> str:
    return f"```python\n{code}```\n```json\n{json.dumps(schema)}\n```"


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("items"))
    return {(c, b): items(c, b, 8, seed=0, cache_dir=cache)
            for c in ["spell_backward", "lcm"] for b in ["easy", "hard"]}


def make(policy, sandbox, pool=None, **kw):
    conf = rollout_conf(max_completion_length=600, temperature=1.0, top_p=1.0, evaluator="direct", judge="none", **kw)
    return Rollout(policy, sandbox, Limits(timeout_s=2.0, memory_mb=256), ToolPool() if pool is None else pool, conf)


def build_task(bank, cat="spell_backward", k=4):
    return BuildTask(cat, bank[(cat, "easy")][:4], bank[(cat, "hard")][:k])


def test_build_correct_malformed_and_raising_tools(tok, sandbox, bank):
    replies = iter([response(REVERSE, SCHEMA), "```python\ndef f(:\n```", response(RAISES, SCHEMA)])
    policy = ScriptedBackend(tok, lambda ctx: next(replies))
    pool = ToolPool()
    ro = make(policy, sandbox, pool)
    try:
        samples = ro.run([build_task(bank)] * 3, [], random.Random(0))
    finally:
        ro.close()
    good, bad, raising = samples
    assert good.rewards["format"] == 0.5 and good.rewards["evaluation"] == 1.0
    assert math.isnan(good.rewards["judge"]) and math.isnan(good.rewards["use"])  # judge off; use n/a
    assert bad.rewards["format"] == 0.0 and bad.rewards["evaluation"] == 0.0  # a malformed pair zeroes the axes
    assert math.isnan(bad.rewards["judge"]) and math.isnan(bad.rewards["use"])  # judge off; use n/a
    assert not bad.trace["parse"]["ok"]
    assert raising.rewards["format"] == 0.5 and raising.rewards["evaluation"] == 0.0
    # only the working tool is a pool candidate
    admit(pool, samples)
    assert [(e.category, e.tool.function_name, e.r_eval) for e in pool] == [("spell_backward", "spell_backward", 1.0)]
    for s in samples:  # build samples: every completion token is the model's
        assert len(s.completion_ids) == len(s.logprobs) == len(s.mask) and all(s.mask)
        assert s.completion_ids[-1] == tok.eos_token_id


class ChatScript:
    """A chat backend double (the evaluator's or the judge's text); records each call's batch size."""

    def __init__(self, reply):
        self.reply, self.batches, self.limits = reply, [], []

    def chat(self, conversations, tools=None, params=None, limits=None):
        self.batches.append(len(conversations))
        self.limits.append(limits)
        return [Generation(self.reply(c, t)) for c, t in zip(conversations, tools or [None] * len(conversations),
                                                                strict=True)]


@pytest.mark.parametrize("one_model", [False, True])
def test_a_model_evaluator_and_judge_grade_all_of_a_steps_builds_in_one_batch(tok, sandbox, bank, one_model):
    """Both roles grade every build of a step in one batch per turn; when they are one model (the policy's synced
    copy), the judge's verdicts ride the evaluator's first batch, each to the judge's own token limit, and score
    the same."""
    mismatch = {**SCHEMA, "name": "reverse_it"}  # the schema names a function the code lacks: the judge still speaks
    replies = iter([response(REVERSE, SCHEMA), response("def spell_backward(question:\n    return 1\n", SCHEMA),
                    response(RAISES, SCHEMA), response(REVERSE, mismatch)])

    def evaluator_reply(conv, tools):  # call the offered tool with the question, then repeat what it said
        if conv[-1]["role"] == "user":
            call = {"name": tools[0]["function"]["name"], "arguments": {"question": conv[-1]["content"]}}
            return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
        return conv[-1]["content"]

    def judge_reply(conv, tools):
        return "code_correctness: 8/10\nschema_quality: 6/10\noverall: 7/10"

    if one_model:
        evaluator = judge = ChatScript(lambda conv, tools: (judge_reply if conv[0]["content"] == JUDGE_SYSTEM
                                                            else evaluator_reply)(conv, tools))
    else:
        evaluator, judge = ChatScript(evaluator_reply), ChatScript(judge_reply)
    pool = ToolPool()
    ro = Rollout(ScriptedBackend(tok, lambda ctx: next(replies)), sandbox, Limits(timeout_s=2.0, memory_mb=256), pool,
                 rollout_conf(max_completion_length=600, evaluator="self", judge="self"), evaluator=evaluator,
                 judge=judge)
    try:
        samples = ro.run([build_task(bank)] * 4, [], random.Random(0))
    finally:
        ro.close()
    got = [(s.rewards["format"], s.rewards["evaluation"], s.rewards["judge"]) for s in samples]
    assert got == [(0.5, 1.0, 0.7), (0.0, 0.0, -0.5), (0.5, 0.0, 0.7), (0.0, 0.0, 0.35)]
    # the 4 held-out questions of both parseable builds in one evaluator batch per turn; 3 builds judged in one
    if one_model:
        assert evaluator.batches == [8 + 3, 8]
        assert evaluator.limits == [[512] * 8 + [ro.conf.judge.max_new_tokens] * 3, None]
    else:
        assert evaluator.batches == [8, 8] and judge.batches == [3]
    assert [s.trace["evaluation"]["correct"] for s in samples if "evaluation" in s.trace] == [4, 0]
    admit(pool, samples)
    assert [(e.tool.function_name, e.r_eval, e.r_judge) for e in pool] == [("spell_backward", 1.0, 0.7)]
    meters = ro.take_meters()
    assert {"time/evaluator", "time/judge", "tokens/judge/ChatScript"} <= set(meters)  # each role still metered


def test_every_model_call_of_a_step_runs_on_the_calling_thread(tok, sandbox, bank):
    """Torch ops from a second thread get an OpenMP team of their own; on 2 cores the two teams' spinning workers
    made each decode step about 3x slower. The policy, the evaluator and the judge are called from the thread
    that runs the batch; only sandbox runs may go to workers."""
    import threading

    seen = []

    def on_thread(reply):
        def wrapped(*args):
            seen.append(threading.get_ident())
            return reply(*args)
        return wrapped

    def evaluator_reply(conv, tools):
        call = {"name": tools[0]["function"]["name"], "arguments": {"question": conv[-1]["content"]}}
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"

    pool = ToolPool()
    pool.admit(PoolEntry("spell_backward", ToolSpec(REVERSE, SCHEMA, "spell_backward"), 1.0))
    ro = Rollout(ScriptedBackend(tok, on_thread(lambda ctx: response(REVERSE, SCHEMA))), sandbox,
                 Limits(timeout_s=2.0, memory_mb=256), pool,
                 rollout_conf(max_completion_length=600, evaluator="self", judge="self", evaluator_max_turns=1),
                 evaluator=ChatScript(on_thread(evaluator_reply)),
                 judge=ChatScript(on_thread(lambda conv, tools: '{"overall": 0.9}')))
    try:
        samples = ro.run([build_task(bank)] * 2, [UseTask("spell_backward", [], bank[("spell_backward", "hard")][0])],
                         random.Random(0))
    finally:
        ro.close()
    assert [s.rewards["evaluation"] for s in samples[:2]] == [1.0, 1.0]  # the evaluator and the judge did run
    assert len(seen) >= 4 and set(seen) == {threading.get_ident()}


def test_identical_builds_are_graded_and_judged_once(tok, sandbox, bank):
    """A group's samples often write the same tool: the greedy evaluator and judge see each distinct tool (on its
    questions) once, and every duplicate gets the same rewards and a trace of its own."""
    texts = iter([response(REVERSE, SCHEMA), response(RAISES, SCHEMA), response(REVERSE, SCHEMA),
                  response(REVERSE, SCHEMA)])

    def evaluator_reply(conv, tools):
        call = {"name": tools[0]["function"]["name"], "arguments": {"question": conv[-1]["content"]}}
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"

    evaluator = ChatScript(evaluator_reply)
    judge = ChatScript(lambda conv, tools: '{"code_correctness": 0.9, "schema_quality": 0.8, "overall": 0.9}')
    ro = Rollout(ScriptedBackend(tok, lambda ctx: next(texts)), sandbox, Limits(timeout_s=2.0, memory_mb=256),
                 ToolPool(), rollout_conf(max_completion_length=600, evaluator="self", judge="self",
                                             evaluator_max_turns=1), evaluator=evaluator, judge=judge)
    try:
        samples = ro.run([build_task(bank)] * 4, [], random.Random(0))
    finally:
        ro.close()
    assert evaluator.batches == [8] and judge.batches == [2]  # 2 distinct tools x 4 questions; 2 verdicts
    assert [(s.rewards["evaluation"], s.rewards["judge"]) for s in samples] == [(1.0, 0.9), (0.0, 0.9), (1.0, 0.9),
                                                                               (1.0, 0.9)]
    traces = [s.trace["evaluation"] for s in samples]
    assert traces[0] == traces[2] == traces[3] and traces[0] is not traces[2]


def test_use_episode_wrong_call_then_right_call(tok, sandbox, bank):
    pool = ToolPool(groups={"spell_backward": "Algorithms", "lcm": "Arithmetic", "gcd": "Arithmetic"})
    pool.admit(PoolEntry("spell_backward", ToolSpec(REVERSE, SCHEMA, "spell_backward"), 1.0))
    pool.admit(PoolEntry("lcm", ToolSpec(LCM, LCM_SCHEMA, "lcm_tool"), 1.0))
    item = bank[("spell_backward", "hard")][0]
    turn = {"n": 0}

    def script(ctx: str) -> str:
        turn["n"] += 1
        names = [t["function"]["name"] for t in map(json.loads, ctx.split("<tools>\n")[1].split("\n</tools>")[0]
                                                           .splitlines())]
        right = next(n for n in names if n.startswith("spell_backward"))
        if turn["n"] == 1:
            return '<tool_call>\n{"name": "no_such_tool", "arguments": {"question": "x"}}\n</tool_call>'
        if turn["n"] == 2:
            return '<tool_call>\n' + json.dumps({"name": right, "arguments": {"question": item.question}}) + \
                "\n</tool_call>"
        return item.answer

    ro = make(ScriptedBackend(tok, script), sandbox, pool, max_turns=5)
    try:
        (s,) = ro.run([], [UseTask("spell_backward", [], item)], random.Random(1))
    finally:
        ro.close()
    assert s.trace["correct"] and s.trace["turns"] == 3
    # rho = 3/5 = 0.6 > 0.5: eta = max(0.3, 0.7 * (1 - 2 * 0.1) ** 2) = 0.448; r = 2 * 0.448
    assert s.rewards["use"] == pytest.approx(2 * 0.7 * 0.8**2)
    assert [c["status"] for c in s.trace["calls"]] == ["unknown_tool", "ok"]
    # masks: exactly the two tool-response segments are 0, and they are the template's tool turns
    zeros = [i for i, m in enumerate(s.mask) if m == 0]
    segments, start = [], None
    for a, b in zip([-2, *zeros], [*zeros, 10**9], strict=True):
        if b != a + 1:
            if start is not None:
                segments.append((start, a + 1))
            start = b
    assert len(segments) == 2
    for (a, b) in segments:
        text = tok.decode(s.completion_ids[a:b])
        assert "<tool_response>" in text and text.rstrip().endswith("<|im_start|>assistant")
        assert s.completion_ids[a - 1] == tok.eos_token_id  # each follows a model turn's end-of-turn token
    assert "error: unknown tool 'no_such_tool'" in tok.decode(s.completion_ids[segments[0][0]:segments[0][1]])
    assert item.answer in tok.decode(s.completion_ids[segments[1][0]:segments[1][1]])
    assert sum(s.mask) == len(s.mask) - sum(b - a for a, b in segments)


def test_the_tool_axis_pays_only_for_the_matching_tools_output_in_the_answer(tok, sandbox, bank):
    """Issue 44, item 8. With the recipe's weights: calling every menu tool and answering from a distractor earns
    less than calling the matching tool and answering right, and no more than calling nothing and answering wrong
    (the tool axis used to pay 0.3 for any call that ran)."""
    from smith.entry import train_config

    item = bank[("spell_backward", "hard")][0]
    pool = ToolPool()
    pool.admit(PoolEntry("spell_backward", ToolSpec(REVERSE, SCHEMA, "spell_backward"), 1.0))
    pool.admit(PoolEntry("lcm", ToolSpec(LCM, LCM_SCHEMA, "lcm_tool"), 1.0))

    def script(plan: str):
        def reply(ctx: str) -> str:
            names = [t["function"]["name"] for t in map(json.loads, ctx.split("<tools>\n")[1].split("\n</tools>")[0]
                                                                   .splitlines())]
            right = next(n for n in names if n.startswith("spell_backward"))
            if plan == "nothing":
                return "I do not know."
            if "<tool_response>" not in ctx:
                called = [n for n in names if n != right] + [right] if plan == "every" else [right]
                return "\n".join("<tool_call>\n" + json.dumps({"name": n, "arguments": {"question": item.question}})
                                 + "\n</tool_call>" for n in called)
            outputs = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", ctx, re.S)
            return outputs[0]  # "every": the first call's output, a distractor's; "matching": the only one

        return reply

    weights = train_config(["recipe=tiny"]).rewards.weights
    totals, traces = {}, {}
    for plan in ("every", "matching", "nothing"):
        ro = make(ScriptedBackend(tok, script(plan)), sandbox, pool, max_turns=5)
        try:
            (s,) = ro.run([], [UseTask("spell_backward", [], item)], random.Random(1))
        finally:
            ro.close()
        totals[plan] = sum(getattr(weights, a) * v for a, v in s.rewards.items() if not math.isnan(v))
        traces[plan] = s.trace
    assert len(traces["every"]["calls"]) == 2 and all(c["status"] == "ok" for c in traces["every"]["calls"])
    assert not traces["every"]["correct"] and traces["matching"]["correct"], traces
    assert totals["every"] < totals["matching"] and totals["every"] <= totals["nothing"], totals


def marked_reverse(question: str) -> str:
    """REVERSE, but on `question` it marks its process and sleeps, so its fork server can be killed mid-call."""
    head = "def spell_backward(question: str) -> str:\n"
    slow = f"    if question == {question!r}:\n{mark(' ' * 8)}        time.sleep(3)\n"
    return "import time\n" + REVERSE.replace(head, head + slow)


def test_sandbox_faults_are_left_out_told_and_counted(tok, sandbox, bank, tmp_path):
    """Fork servers killed mid-call (real SIGKILLs), twice per call: the build's question leaves r_eval instead of
    scoring 0, the use episode's model is told the sandbox failed and the episode carries no signal (every axis
    NaN, issue 44 item 1: its tool axis used to lose the credit a peer's call earned), and the step's metrics
    count both."""
    task = build_task(bank)
    with fork_server_killer(times=2):
        ro = make(ScriptedBackend(tok, lambda ctx: response(marked_reverse(task.heldout[1].question), SCHEMA)),
                  sandbox)
        try:
            (build,) = ro.run([task], [], random.Random(0))
        finally:
            ro.close()
    assert build.rewards["evaluation"] == 1.0 and build.trace["evaluation"] == {"correct": 3, "k": 3, "faults": 1,
                                                                                   "no_tool_call": 0}
    item = bank[("spell_backward", "hard")][0]
    pool = ToolPool()
    pool.admit(PoolEntry("spell_backward", ToolSpec(marked_reverse(item.question), SCHEMA, "spell_backward"), 1.0))

    def script(ctx: str) -> str:
        if "<tool_response>" not in ctx:
            call = {"name": "spell_backward", "arguments": {"question": item.question}}
            return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
        return "I could not tell."

    with fork_server_killer(times=2) as killed:
        ro = make(ScriptedBackend(tok, script), sandbox, pool, max_turns=3)
        try:
            (use,) = ro.run([], [UseTask("spell_backward", [], item)], random.Random(1))
        finally:
            ro.close()
    assert len(killed) == 2 and [c["status"] for c in use.trace["calls"]] == ["fault"]
    assert use.trace["sandbox_faults"] == 1
    assert all(math.isnan(v) for v in use.rewards.values()), use.rewards  # the machine's failure: no signal
    assert "error: the sandbox failed while running the tool, not the tool:" in tok.decode(use.completion_ids)
    cfg = TrainConfig(name="t", model=ModelConfig(name_or_path="tiny"), evaluator=EvaluatorConfig(kind="direct"),
                      judge=JudgeConfig(kind="none"))
    session = Session(cfg, tmp_path, pool)
    session.record([build, use])
    assert session.step_metrics["sandbox_faults/evaluation"] == 1.0
    assert session.step_metrics["sandbox_faults/use"] == 1.0
    assert sandbox.quiesce()


def test_the_rollout_leaves_candidates_and_admit_tells_each_trace_whether_the_pool_took_its_tool(tok, sandbox, bank):
    """The rollout never writes the pool: a build with r_eval > 0 leaves its tool as the sample's candidate. Once
    admitted, a tool the pool refused (the same code again) says so in its trace, not "admitted" for every one."""
    pool = ToolPool()
    ro = make(ScriptedBackend(tok, lambda ctx: response(REVERSE, SCHEMA)), sandbox, pool)
    try:
        a, b = ro.run([build_task(bank), build_task(bank)], [], random.Random(0))
    finally:
        ro.close()
    assert a.candidate is not None and b.candidate is not None and len(pool) == 0
    assert "admitted" not in a.trace and "admitted" not in b.trace
    admit(pool, [a, b])
    assert [a.trace["admitted"], b.trace["admitted"]] == [True, False] and len(pool) == 1


def test_use_episode_builds_first_when_pool_is_empty(tok, sandbox, bank):
    item = bank[("spell_backward", "hard")][1]

    def script(ctx: str) -> str:
        if "Your tool is now available as" not in ctx:
            return response(REVERSE, SCHEMA)
        name = ctx.split("Your tool is now available as `")[1].split("`")[0]
        if "<tool_response>" not in ctx:
            return "<tool_call>\n" + json.dumps({"name": name, "arguments": {"question": item.question}}) + \
                "\n</tool_call>"
        return f"Answer: {item.answer}"

    pool = ToolPool()
    task = UseTask("spell_backward", bank[("spell_backward", "easy")][:4], item, bank[("spell_backward", "hard")][2:6])
    ro = make(ScriptedBackend(tok, script), sandbox, pool, max_turns=5)
    ro.conf.dapo.max_completion_length = 1200  # the build, then the whole use prompt (system, tool block: ~530 tokens)
    try:
        (s,) = ro.run([], [task], random.Random(2))
    finally:
        ro.close()
    admit(pool, [s])
    assert s.trace["correct"]
    assert s.rewards["format"] == 0.5 and s.rewards["evaluation"] == 1.0  # the inner build was graded
    assert s.rewards["use"] == pytest.approx(2 * (1 - 2 * 0.3 * 0.4))  # 2 use turns of 5: rho 0.4
    assert s.rewards["tool"] == pytest.approx(0.2)  # one call ran, then an answer
    assert len(pool) == 1  # and admitted
    # after the build, the episode goes on with the use prompt every use episode gets, its tools in the tool block
    fmt = chat_format(tok)
    use = fmt.render(inner_use_messages("spell_backward", item.question), [ToolSpec(REVERSE, SCHEMA, "spell_backward")
                                                                           .openai_tool("spell_backward")])
    built = s.completion_ids.index(fmt.end_of_turn) + 1
    assert s.completion_ids[built:built + 1 + len(use)] == tok("\n")["input_ids"] + use
    assert s.mask[built:built + 1 + len(use)] == [0] * (1 + len(use))


def test_inner_builds_share_the_steps_build_batch_and_its_grading(tok, sandbox, bank):
    """A use episode whose category has no pool tool builds one first: its build reply is generated in the step's
    one decode batch of build replies and graded in the same evaluator and judge batches as the build prompts'."""
    item = bank[("spell_backward", "hard")][1]

    def script(ctx: str) -> str:
        return response(REVERSE, SCHEMA) if "Your tool is now available as" not in ctx else f"Answer: {item.answer}"

    def evaluator_reply(conv, tools):
        if conv[-1]["role"] == "user":
            call = {"name": tools[0]["function"]["name"], "arguments": {"question": conv[-1]["content"]}}
            return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
        return conv[-1]["content"]

    class Counting(ScriptedBackend):
        def continue_ids(self, prompts, params=None, **kw):
            self.batches.append(len(prompts))
            return super().continue_ids(prompts, params, **kw)

    policy = Counting(tok, script)
    policy.batches = []
    evaluator, judge = ChatScript(evaluator_reply), ChatScript(lambda conv, tools: '{"overall": 7}')
    use = UseTask("spell_backward", bank[("spell_backward", "easy")][:4], item, bank[("spell_backward", "hard")][2:6])
    ro = Rollout(policy, sandbox, Limits(timeout_s=2.0, memory_mb=256), ToolPool(),
                 rollout_conf(max_completion_length=1200, evaluator="self", judge="self", max_turns=2),
                 evaluator=evaluator, judge=judge)
    try:
        samples = ro.run([build_task(bank)] * 2, [use] * 2, random.Random(0))
    finally:
        ro.close()
    assert policy.batches == [4, 2]  # 2 build replies and 2 inner builds in one call, then the use turn
    assert evaluator.batches[0] == 8 and judge.batches == [1]  # 4 questions of each distinct job; one tool
    assert [s.rewards["evaluation"] for s in samples] == [1.0] * 4
    assert all(s.candidate is not None for s in samples) and all(s.trace["correct"] for s in samples[2:])


def test_continuation_ids_match_the_template(tok):
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    full = tok.apply_chat_template([*msgs, {"role": "tool", "content": "42"}], tokenize=False,
                                   add_generation_prompt=True)
    ids = chat_format(tok).continuation([{"role": "tool", "content": "42"}])
    assert full.endswith(tok.decode(ids))


def test_real_tiny_model_rollout_shapes(tiny_model_dir, sandbox, bank):
    from smith.models.hf import HFBackend

    policy = HFBackend.from_pretrained(tiny_model_dir)
    pool = ToolPool()
    pool.admit(PoolEntry("spell_backward", ToolSpec(REVERSE, SCHEMA, "spell_backward"), 1.0))
    ro = make(policy, sandbox, pool, max_turns=2)
    ro.conf.dapo.max_completion_length = 24
    try:
        samples = ro.run([build_task(bank)] * 2, [UseTask("spell_backward", [], bank[("spell_backward", "hard")][0])]
                         * 2, random.Random(0))
    finally:
        ro.close()
    assert [s.kind for s in samples] == ["build", "build", "use", "use"]
    for s in samples:
        assert 0 < len(s.completion_ids) <= 24 and len(s.logprobs) == len(s.mask) == len(s.completion_ids)
        assert all(lp <= 0 for lp, m in zip(s.logprobs, s.mask, strict=True) if m)
        assert not math.isnan(s.rewards["format" if s.kind == "build" else "use"])


def test_a_run_and_its_control_draw_the_same_randomness_for_the_same_sample(tiny_model_dir, sandbox, bank):
    """Common random numbers: with the same rng, each sampled row draws from (the step's seed, its sample's place), so
    the build samples come out the same whether the use half builds first (empty pool: its inner builds join the
    build batch) or calls a pool tool, and another rng draws others."""
    from smith.models.hf import HFBackend

    policy = HFBackend.from_pretrained(tiny_model_dir)
    stocked = ToolPool()
    stocked.admit(PoolEntry("spell_backward", ToolSpec(REVERSE, SCHEMA, "spell_backward"), 1.0))

    def builds(pool, seed):
        ro = make(policy, sandbox, pool, max_turns=2)
        ro.conf.dapo.max_completion_length = 24
        use = UseTask("spell_backward", bank[("spell_backward", "easy")][:4], bank[("spell_backward", "hard")][0])
        try:
            samples = ro.run([build_task(bank)] * 3, [use] * 2, random.Random(seed))
        finally:
            ro.close()
        return [s.completion_ids for s in samples[:3]], samples[3:]

    first, inner = builds(ToolPool(), 0)
    again, menu = builds(stocked, 0)
    assert first == again and len(set(map(tuple, first))) > 1  # the same samples, and a group's rows still differ
    assert "inner_build" in inner[0].trace and "menu" in menu[0].trace  # the use halves took different paths
    assert builds(ToolPool(), 1)[0] != first


def test_large_pool_menus_come_from_the_retriever(tok, sandbox, bank):
    from smith.pool.retrieval.retriever import AdaptiveRetriever

    pool = ToolPool()
    pool.admit(PoolEntry("spell_backward", ToolSpec(REVERSE, SCHEMA, "spell_backward"), 1.0))
    pool.admit(PoolEntry("lcm", ToolSpec(LCM, LCM_SCHEMA, "lcm_tool"), 1.0))
    for cat, desc in [("chain_sum", "Adds and subtracts a chain of integers."),
                      ("caesar_cipher", "Decrypts a Caesar cipher text by shifting letters."),
                      ("maze", "Counts the steps of the shortest path through a maze grid.")]:
        pool.admit(PoolEntry(cat, ToolSpec(f"def {cat}(question: str) -> str:\n    return ''\n",
                                           {"name": cat, "description": desc, "parameters": SCHEMA["parameters"]}, cat),
                             0.5))
    ro = make(ScriptedBackend(tok, lambda ctx: ""), sandbox, pool, menu_size=2)
    ro.retriever = AdaptiveRetriever("bm25")
    try:
        menu = ro.menu("spell_backward", random.Random(0), "Spell this word backward (example: sun -> nus): smith")
        paper = make(ScriptedBackend(tok, lambda ctx: ""), sandbox, pool, menu_size=2).menu("lcm", random.Random(0))
    finally:
        ro.close()
    assert len(menu) == 2 and menu[0][1].category == "spell_backward"  # best first, capped at menu_size
    assert len({n for n, _ in menu}) == 2
    assert len(paper) == 3 and "lcm" in {e.category for _, e in paper}  # no retriever: 1 matching + 2


def test_a_group_split_across_ranks_sees_one_menu(tok, sandbox, bank):
    """Two ranks (their own RNGs) rolling out halves of one GRPO group show the same menu; other groups and other
    steps draw their own."""
    pool = ToolPool()
    for i in range(4):  # several tools per category, so the draw of match and distractors matters
        pool.admit(PoolEntry("spell_backward", ToolSpec(REVERSE.replace("spell_backward", f"rev{i}"),
                                                        {**SCHEMA, "name": f"rev{i}"}, f"rev{i}"), 1.0))
        pool.admit(PoolEntry("lcm", ToolSpec(LCM.replace("lcm_tool", f"lcm{i}"), {**LCM_SCHEMA, "name": f"lcm{i}"},
                                             f"lcm{i}"), 1.0))
    item = bank[("spell_backward", "hard")][0]

    def prompts(key: str, rank_seed: int, step: int = 1) -> list[list[int]]:
        ro = make(ScriptedBackend(tok, lambda ctx: "done"), sandbox, pool)
        try:
            return [s.prompt_ids for s in ro.run([], [UseTask("spell_backward", [], item, key=key)] * 2,
                                                 random.Random(rank_seed), step)]
        finally:
            ro.close()

    rank0, rank1 = prompts("0:use:7", 0), prompts("0:use:7", 1)
    assert rank0[0] == rank0[1] == rank1[0] == rank1[1]
    others = [prompts(f"0:use:{k}", 0)[0] for k in range(8)] + [prompts("0:use:7", 0, step=s)[0] for s in range(8)]
    assert len({tuple(p) for p in others}) > 1


def test_a_use_episodes_first_turn_rides_the_build_batch_at_its_own_turn_limit(tok, sandbox, bank):
    """A use episode whose category has a pool tool needs nothing of the step's builds: its first turn is decoded in
    the build batch (each row to its own limit: the use turn's cap, not the build's length), the rest after grading;
    the episode plays and scores as it would alone."""
    pool = ToolPool()
    pool.admit(PoolEntry("spell_backward", ToolSpec(REVERSE, SCHEMA, "spell_backward"), 1.0))
    item = bank[("spell_backward", "hard")][0]

    def script(ctx: str) -> str:
        if "<tools>" not in ctx:
            return response(REVERSE, SCHEMA)
        if "<tool_response>" in ctx:
            return f"Answer: {item.answer}"
        name = next(n for n in re.findall(r'"name": "([a-z_0-9]+)"', ctx) if n.startswith("spell_backward"))
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": {"question": item.question}}) + "\n</tool_call>"

    class Counting(ScriptedBackend):
        def continue_ids(self, prompts, params=None, limits=None, **kw):
            self.batches.append((len(prompts), params.max_new_tokens, limits))
            return super().continue_ids(prompts, params, limits=limits, **kw)

    policy = Counting(tok, script)
    policy.batches = []
    ro = make(policy, sandbox, pool, max_turns=3, max_turn_tokens=160)
    try:
        samples = ro.run([build_task(bank)] * 2, [UseTask("spell_backward", [], item)] * 2, random.Random(0))
    finally:
        ro.close()
    assert policy.batches == [(4, 600, [600, 600, 160, 160]), (2, 160, [160, 160])]  # builds + first use turns; answers
    assert [s.rewards["evaluation"] for s in samples[:2]] == [1.0, 1.0]
    for s in samples[2:]:
        assert s.trace["correct"] and s.trace["turns"] == 2 and [c["status"] for c in s.trace["calls"]] == ["ok"]
        assert s.rewards["use"] == correctness_reward(True, 2, 3, ro.conf.use.eta_mid, ro.conf.use.eta_min) > 0


def test_each_use_episode_has_its_own_token_budget(tok, sandbox, bank):
    """A long neighbour in the batch must not cut a short episode (one budget per episode, not min(room))."""
    pool = ToolPool(groups={"spell_backward": "Algorithms", "lcm": "Arithmetic"})
    pool.admit(PoolEntry("spell_backward", ToolSpec(REVERSE, SCHEMA, "spell_backward"), 1.0))
    short, chatty = bank[("spell_backward", "hard")][:2]

    def script(ctx: str) -> str:
        question = ctx.split("<|im_start|>user\n")[1].split("<|im_end|>")[0]
        if "<tool_response>" in ctx:
            return short.answer if question == short.question else "word " * 400
        name = next(n for n in re.findall(r'"name": "([a-z_0-9]+)"', ctx) if n.startswith("spell_backward"))
        call = "<tool_call>\n" + json.dumps({"name": name, "arguments": {"question": question}}) + "\n</tool_call>"
        if question == short.question:
            return call
        # the long neighbour's first turn and tool response leave it 2 tokens: under one shared limit the
        # short episode would get 2 tokens for its answer too
        fed = len(chat_format(tok).continuation([{"role": "tool",
                                                  "content": chatty.question.split(":")[-1].strip()[::-1]}]))
        return next(t for n in range(300) for m in range(8)
                    if len(tok(t := "thinking " * n + "." * m + call)["input_ids"]) + 1 + fed == 598)

    ro = make(ScriptedBackend(tok, script), sandbox, pool, max_turns=5, max_turn_tokens=600)
    try:
        a, b = ro.run([], [UseTask("spell_backward", [], short), UseTask("spell_backward", [], chatty)],
                      random.Random(3))
    finally:
        ro.close()
    assert a.trace["correct"] and not a.truncated
    assert a.rewards["use"] == pytest.approx(2 * (1 - 2 * 0.3 * 0.4))  # 1.52, as it scores alone
    assert b.truncated and b.rewards["use"] == 0.0


def test_a_use_turn_is_cut_at_the_per_turn_cap_and_the_episode_ends_truncated(tok, sandbox, bank):
    """use.max_turn_tokens (the reference's 512 per turn): a chatty turn stops there, though the episode's budget
    has room, and the episode leaves the loss as truncated; a short turn is untouched."""
    pool = ToolPool()
    pool.admit(PoolEntry("spell_backward", ToolSpec(REVERSE, SCHEMA, "spell_backward"), 1.0))
    item = bank[("spell_backward", "hard")][0]
    ro = make(ScriptedBackend(tok, lambda ctx: "word " * 200), sandbox, pool, max_turns=5, max_turn_tokens=40)
    short = make(ScriptedBackend(tok, lambda ctx: item.answer), sandbox, pool, max_turns=5, max_turn_tokens=40)
    try:
        (s,) = ro.run([], [UseTask("spell_backward", [], item)], random.Random(5))
        (t,) = short.run([], [UseTask("spell_backward", [], item)], random.Random(5))
    finally:
        ro.close()
        short.close()
    assert s.truncated and s.rewards["use"] == 0.0 and sum(s.mask) == 40
    assert t.trace["correct"] and not t.truncated


def test_an_episode_past_its_budget_after_an_inner_build_stops_cleanly(tok, sandbox, bank):
    item = bank[("spell_backward", "hard")][1]
    calls = []
    # a build that fits the 600-token budget but leaves no room once the tool-list turn is appended
    text = next(t for n in range(400) if 540 < len(tok(t := response(REVERSE + "#\n" * n, SCHEMA))["input_ids"]) < 598)

    def script(ctx: str) -> str:
        calls.append(ctx)
        return text

    task = UseTask("spell_backward", bank[("spell_backward", "easy")][:4], item, bank[("spell_backward", "hard")][2:6])
    ro = make(ScriptedBackend(tok, script), sandbox, ToolPool(), max_turns=5)
    try:
        (s,) = ro.run([], [task], random.Random(4))
    finally:
        ro.close()
    assert s.rewards["evaluation"] == 1.0  # the inner build itself was complete and graded
    assert len(calls) == 1  # no use turn was generated with a budget of <= 0 tokens
    assert s.truncated and s.rewards["use"] == 0.0 and len(s.completion_ids) > 600


def test_tasks_catalog_drives_items_and_scoring(tok, sandbox, tmp_path):
    """A category that exists only in a custom catalog (`tasks.catalog`): its items come from that file's bands
    and answers are scored with it (the packaged catalog does not know it)."""
    import math

    from smith.tasks import load_catalog
    from smith.train.data import TaskSource

    path = tmp_path / "catalog.yaml"
    path.write_text(
        "categories:\n  lcm_pairs:\n    group: Arithmetic\n    split: seen\n    dataset: lcm\n"
        "    easy: {min_numbers: 2, max_numbers: 2, min_value: 2, max_value: 20}\n"
        "    hard: {min_numbers: 2, max_numbers: 2, min_value: 100, max_value: 1000}\n"
        "    measure: number(answer)\n    why: two numbers only.\n"
        "    full_marks: {check: equal, why: one integer.}\n")
    catalog = load_catalog(path)
    source = TaskSource(["lcm_pairs"], 4, 4, seed=0, cache_dir=str(tmp_path / "items"), bank_size=8,
                        catalog=catalog)
    task = source.task("use:0")
    numbers = [int(x) for x in re.findall(r"\d+", task.item.question.split(":")[-1])]
    assert len(numbers) == 2 and all(n >= 100 for n in numbers)  # the custom hard band, not lcm's 3-4 numbers
    pool = ToolPool()
    pool.admit(PoolEntry("lcm_pairs", ToolSpec(LCM, LCM_SCHEMA, "lcm_tool"), 1.0))
    answer = str(math.lcm(*numbers))
    ro = Rollout(ScriptedBackend(tok, lambda ctx: answer), sandbox, Limits(timeout_s=2.0, memory_mb=256), pool,
                 rollout_conf(max_completion_length=600, evaluator="direct", judge="none"), catalog=catalog)
    try:
        (s,) = ro.run([], [task], random.Random(0))
    finally:
        ro.close()
    assert s.trace["correct"] and s.rewards["use"] > 0
