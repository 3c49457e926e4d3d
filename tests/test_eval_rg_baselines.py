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

from smith.entry import eval_config
from tests.test_eval_rg import reference_reply

SEEN, UNSEEN = "spell_backward", "count_bits"
SUITE_SEED = 1000
BROKEN = {"name": "solve", "code": "def solve(question: str) -> str:\n    return '0'\n"}


def tool_reply(code: str, name: str = "solve", description: str = "Answers the question; pass it verbatim.",
               **more: dict) -> str:
    """A build reply in smith's tool format; `more` adds optional parameters to the schema."""
    schema = {"name": name, "description": description, "parameters": {"type": "object", "properties": {
        "question": {"type": "string", "description": "the question, verbatim"}, **more}, "required": ["question"]}}
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


def cfg_for(out: Path, model: str, cache_dir: Path, tiny_dir: Path, *extra: str, cats: str = f"{SEEN},{UNSEEN}"):
    return eval_config(["suite=rg", f"model='{model}'", f"output_dir={out}", f"tiny_dir={tiny_dir}",
                        f"suite.cache_dir={cache_dir}", f"suite.categories=[{cats}]",
                        "suite.bootstrap=50", "suite.sandbox.workers=2", *extra])


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
    b = s["details"]["baseline"]
    assert b["method"] == "LATM" and b["verified"] == [UNSEEN] and b["rejected"] == [SEEN]
    ts = toolsets(out)
    assert len(ts[SEEN]["attempts"]) == 3 and not any(a.get("verified") for a in ts[SEEN]["attempts"])
    assert ts[UNSEEN]["attempts"] == [{"stage": "verify", "function_name": "solve", "passed": 3, "of": 3,
                                       "verified": True}]
    assert len(ts[UNSEEN]["tool"]["use_cases"]) == 3
    by_cat = {r["category"]: r for r in rows(out)}
    assert s["details"]["categories"][UNSEEN]["value"] == 1.0 and by_cat[UNSEEN]["used_tool"]
    assert by_cat[UNSEEN]["tools"] == ["solve"]
    assert by_cat[SEEN]["tools"] == [] and not by_cat[SEEN]["used_tool"]
    assert s["details"]["build_tokens"]["input"] > 0 and b["build"]["calls"] > 0
    assert all(r["prompt_tokens"] > 0 and r["llm_calls"] >= 1 for r in rows(out))
    assert s["label"] == "maker (LATM)"


# --------------------------------------------------------------------------------------------------- TroVE


def test_trove_toolbox_grows_and_trims_as_designed(tmp_path, cache_dir, tiny_model_dir):
    """A four-question count_bits stream. The scripted model creates `count_ones` (q1: create agrees with the
    long hand-worked skip answer and is shorter), reuses it (q2, q4: import is the shortest agreeing response),
    and on q3 calls it wrongly, so the create response wins and `popcount` joins the toolbox. The final trim
    (threshold log2(4) = 2) drops `popcount` (used once) and keeps `count_ones` (used 3 times); q3, whose
    answer created the dropped function, is solved again and the hand-worked skip answer is selected."""
    from smith.evals.rg import run
    from smith.evals.rg.baselines.trove import IMPORT_NOTE
    from smith.tasks import items
    from tests.reference_tools.count_bits import solve

    hard = [it.question for it in items(UNSEEN, "hard", 4, SUITE_SEED, cache_dir)]

    def model(context: str) -> str:
        if "Write ONE new function" in context:
            taken = re.search(r"not one of: ([^)]*)\)", context)
            name = next(n for n in ("count_ones", "popcount", "bits_set") if n not in (taken.group(1).split(", ")
                                                                                     if taken else []))
            return reference(UNSEEN, name)
        question = re.split(r"<\|im_start\|>user\n", context)[1].split("<|im_end|>")[0]
        if "step by step" in context:  # skip: worked by hand at length
            return "Write the number in binary and count its ones digit by digit. " * 8 + f"Answer: {solve(question)}"
        importing = IMPORT_NOTE in context
        if "<tool_response>" in last_user(context):
            out = use_reply(context)
            return out if importing else f"The tool returned the answer.\nAnswer: {out}"
        if importing and offered(context) and question == hard[2]:  # a wrong call: the tool raises
            return "<tool_call>\n" + json.dumps({"name": offered(context)[0], "arguments": {"text": question}}) + \
                "\n</tool_call>"
        return use_reply(context)

    out = tmp_path / "trove"
    s = run(cfg_for(out, "trove-model", cache_dir, tiny_model_dir, "mode=trove", "limit=4",
                    "suite.baselines.trove.trim_base=2", cats=UNSEEN),
            {"trove-model": scripted(model, tiny_model_dir)})
    box = s["details"]["baseline"]["toolbox"][UNSEEN]
    assert box["sizes"] == [1, 1, 2, 2]
    assert box["events"] == [{"step": 1, "added": "count_ones"}, {"step": 3, "added": "popcount"},
                             {"step": 4, "threshold": 2.0, "trimmed": ["popcount"], "size": 1}]
    assert box["regenerated"] == [2] and s["details"]["baseline"]["tools"] == {UNSEEN: ["count_ones"]}
    assert toolsets(out)[UNSEEN]["toolbox"][0]["frequency"] == 3
    got = [(r["mode"], r["regenerated"], r["correct"]) for r in rows(out)]
    assert got == [("create", False, True), ("import", False, True), ("skip", True, True), ("import", False, True)]
    assert s["details"]["categories"][UNSEEN]["value"] == 1.0
    # every mode's responses are paid by the question: 3 modes (and the create build call) each
    assert all(r["llm_calls"] >= 4 for r in rows(out))


# --------------------------------------------------------------------------------------------------- CRAFT


def test_craft_creates_deduplicates_and_retrieves(tmp_path, cache_dir, tiny_model_dir):
    """Two training problems per category. count_bits abstracts twice into the same `count_set_bits`
    (identical signatures: collapsed without asking); spell_backward into two `reverse_word` variants with
    different signatures (the creator picks No. 1). Retrieval then offers each question exactly its own tool."""
    from smith.evals.rg import run
    from smith.tasks import items

    easy = {c: [it.question for it in items(c, "easy", 2, SUITE_SEED, cache_dir)] for c in (SEEN, UNSEEN)}
    hard = {q.question: c for c in (SEEN, UNSEEN) for q in items(c, "hard", 2, SUITE_SEED, cache_dir)}
    variant = ("def reverse_word(question: str, sep: str = ':') -> str:\n"
               "    return question.rsplit(sep, 1)[-1].strip()[::-1]\n")
    variant_reply = tool_reply(variant, "reverse_word", "Answers spell backward questions; pass the question.",
                               sep={"type": "string"})
    dedup_prompts = []

    def model(context: str) -> str:
        if "Write a Python function that solves the following question" in context:
            return reference(category_of(context, cache_dir, 2))
        if "Rewrite and abstract" in context:
            cat = category_of(context, cache_dir, 2)
            if cat == UNSEEN:
                return reference(UNSEEN, "count_set_bits")
            return reference(SEEN, "reverse_word") if easy[SEEN][0] in context else variant_reply
        if "Which one is the most comprehensive" in context:
            dedup_prompts.append(context)
            return "1"
        if "infer the core skill" in context:
            cat = next(c for q, c in hard.items() if q in context)
            name = "count_set_bits" if cat == UNSEEN else "reverse_word"
            return (f"The useful functions are: ['{name}']\n"
                    f"The final answer is: Answers {cat.replace('_', ' ')} questions.")
        return use_reply(context)

    out = tmp_path / "craft"
    s = run(cfg_for(out, "crafter", cache_dir, tiny_model_dir, "mode=craft", "limit=2",
                    "suite.baselines.craft.n_train=2", "suite.baselines.craft.scorer=bm25",
                    "suite.baselines.craft.k_view={explanation: 1, name: 1, query: 1}"),
            {"crafter": scripted(model, tiny_model_dir)})
    d = s["details"]["baseline"]["deduplication"]
    assert s["details"]["baseline"]["problems"] == {"verified": 4} and (d["before"], d["after"]) == (4, 2)
    assert d["groups"]["count_set_bits"] == {"candidates": 2, "signatures": 1, "kept": d["groups"]["count_set_bits"][
        "kept"]}
    assert d["groups"]["reverse_word"]["signatures"] == 2 and len(dedup_prompts) == 1
    kept = toolsets(out)[d["groups"]["reverse_word"]["kept"]]
    assert kept["question"] == easy[SEEN][1] and "sep" in kept["tool"]["code"]  # No. 1, the second variant
    assert sorted(s["details"]["baseline"]["toolset"]) == ["count_set_bits", "reverse_word"]
    for r in rows(out):
        own = "count_set_bits" if r["category"] == UNSEEN else "reverse_word"
        assert r["retrieved"] == [own] and r["used"] == [own] and r["correct"]
        assert r["llm_calls"] == 3  # the retrieval plan, the tool call, the answer
    assert s["details"]["build_tokens"]["input"] > 0 and s["details"]["baseline"]["build"]["calls"] > 0


# ---------------------------------------------------------------------------------------------------- KTCE


def test_ktce_refines_failing_tool_into_passing_one(tmp_path, cache_dir, tiny_model_dir):
    """count_bits: the knowledge tree has one key point, whose first tool always answers '0'. Evaluation on the
    two training problems calls it twice and fails twice (loss 2*10 + 1.25*30 = 57.5), so mutation rewrites it
    with its failed calls in view; the refined tool solves both (Freq max(1, 2/2) + 2 = 3, TSR 3: loss 2*9 = 18)
    and then every held-out question."""
    from smith.evals.rg import run

    prompts: list[str] = []

    def model(context: str) -> str:
        if "three-layer knowledge tree" in context:
            return "Topic: binary numbers\nConcept: bits\n- count the ones in the binary form of a number"
        if "Key point:" in context:
            return tool_reply(BROKEN["code"].replace("solve", "count_ones"), "count_ones",
                              "Counts the 1-bits of the number in the question.")
        if "decide which tools can be used" in context:
            return "<answer>[0]</answer>"
        if "Decide whether any tool should be removed" in context:
            return "It is needed.\n<answer>[]</answer>"
        if "Evolve it" in context:
            prompts.append(context)
            return reference(UNSEEN, "count_ones") + "\n<experience_list>Pass the question verbatim.</experience_list>"
        return use_reply(context)

    out = tmp_path / "ktce"
    s = run(cfg_for(out, "ktce-model", cache_dir, tiny_model_dir, "mode=ktce", "limit=2",
                    "suite.baselines.ktce.n_train=2", "suite.baselines.ktce.max_iter=1", cats=UNSEEN),
            {"ktce-model": scripted(model, tiny_model_dir)})
    evo = s["details"]["baseline"]["evolution"][UNSEEN]
    assert [(e["iter"], e["TA"], e["TSC"], e["loss"]) for e in evo] == [(0, 0.0, 1.0, 57.5), (1, 1.0, 1.0, 18.0)]
    assert evo[0]["actions"] == {"removed": [], "mutated": ["count_ones"]}
    assert len(prompts) == 1 and "Expected answer" in prompts[0] and "return '0'" in prompts[0]
    tool = toolsets(out)[UNSEEN]["tools"][0]
    assert "bin(" in tool["code"] and (tool["Freq"], tool["TSR"]) == (3, 3)
    assert tool["experience"] == "Pass the question verbatim."
    knowledge = s["details"]["baseline"]["knowledge"]
    assert knowledge[UNSEEN]["key_points"] == ["count the ones in the binary form of a number"]
    for r in rows(out):
        assert r["selected"] == ["count_ones"] and r["correct"] and r["llm_calls"] == 3
    assert s["details"]["categories"][UNSEEN]["value"] == 1.0


# ------------------------------------------------------------------------------------- every method, tiny


TINY = ("limit=1", "suite.max_new_tokens=4", "suite.build_max_new_tokens=8", "suite.cot_max_new_tokens=4",
        "suite.max_turns=1")


@pytest.mark.parametrize(("mode", "opts", "budget"), [
    ("latm", ["n_valid=1"], "build.calls=1"),  # one proposal, then the budget stops the retries
    ("craft", ["n_train=1", "scorer=bm25"], "build.calls=0"),  # no tool may be created
    ("trove", ["modes=[import,skip]"], "question.calls=1"),  # import answers, skip is never asked
    ("ktce", ["n_train=1", "max_iter=1"], "build.calls=1"),  # knowledge tree, then no evolution step
])
def test_every_method_runs_on_tiny_within_budget(tmp_path, cache_dir, tiny_model_dir, mode, opts, budget):
    """Real generation: the tiny model writes no usable tool, yet each method finishes, logs every question
    with its metered I/O tokens, stops where its budget says and records the budget in summary.json."""
    from smith.evals.rg import run

    out = tmp_path / mode
    s = run(cfg_for(out, "tiny", cache_dir, tiny_model_dir, f"mode={mode}", *TINY,
                    *(f"suite.baselines.{mode}.{o}" for o in opts), f"suite.baselines.{mode}.budget.{budget}"))
    assert s["details"]["mode"] == mode and s["details"]["n_questions"] == 2
    scope, cap = budget.split(".calls=")
    assert s["details"]["baseline"]["options"]["budget"][scope] == {"calls": int(cap), "tokens": None}
    assert s["details"]["baseline"]["options"] == s["config"]["suite"]["baselines"][mode] == json.loads(
        (out / "run.json").read_text())["config"]["suite"]["baselines"][mode]
    assert s["details"]["baseline"]["budget_stops"][scope] >= 1
    for r in rows(out):
        assert r["prompt_tokens"] > 0 and r["completion_tokens"] >= 1 and r["llm_calls"] >= 1
        assert r["tool_source"] == mode
    assert s["details"]["tokens"]["all"]["input"] == pytest.approx(sum(r["prompt_tokens"] for r in rows(out)) / 2)
    if mode == "trove":
        assert all(r["mode"] == "import" and r["llm_calls"] == 1 for r in rows(out))
    if mode == "craft":
        assert s["details"]["baseline"]["build"]["calls"] == 0 and s["details"]["baseline"]["toolset"] == []
    assert (out / "results.md").is_file() and (out / "accuracy_by_group.png").is_file()


def test_latm_bigger_writer_over_http_and_resume(tmp_path, cache_dir, tiny_model_dir):
    """LATM* with another tool maker (`suite.writer`, here a scripted endpoint over real HTTP) and the tiny
    model as tool user; a rerun into the same output_dir asks the maker nothing and answers nothing again."""
    from smith.evals.rg import run
    from smith.models.serve import running

    def maker(context: str) -> str:
        if "Infer the general procedure" in context:
            return reference(category_of(context, cache_dir))
        return use_reply(context)

    agent = scripted(maker, tiny_model_dir, "writer")
    out = tmp_path / "latm-star"
    with running(agent, name="writer") as url:
        spec = f"openai:{url}#writer"
        short = ("limit=1", "suite.max_new_tokens=64", "suite.max_turns=2")  # room for the maker's tool calls
        cfg = cfg_for(out, "tiny", cache_dir, tiny_model_dir, "mode=latm", f"suite.writer='{spec}'", *short)
        s = run(cfg)
        assert s["details"]["writer"] == spec and s["label"] == "tiny (LATM, tools by writer)"
        assert s["details"]["baseline"]["verified"] == sorted([SEEN, UNSEEN])
        for r in rows(out):
            assert r["tools"] == ["solve"] and r["prompt_tokens"] > 150  # the wrapped tool rides in the prompt
        calls = len(agent.calls)
        again = run(cfg)
        assert len(agent.calls) == calls and again["details"]["categories"] == s["details"]["categories"]
        with pytest.raises(ValueError, match="other settings"):
            run(cfg_for(out, "tiny", cache_dir, tiny_model_dir, "mode=latm", f"suite.writer='{spec}'", *short,
                        "suite.baselines.latm.max_attempts=1"))


def test_check_refuses_writer_for_trove_and_names_the_modes(tmp_path, cache_dir, tiny_model_dir):
    from smith.errors import ConfigError
    from smith.evals.rg import MODES, check

    assert MODES[-4:] == ("latm", "craft", "trove", "ktce")
    with pytest.raises(ConfigError, match="one model"):
        check(cfg_for(tmp_path, "tiny", cache_dir, tiny_model_dir, "mode=trove", "suite.writer=tiny"))
    with pytest.raises(ConfigError, match="ktce"):
        check(cfg_for(tmp_path, "tiny", cache_dir, tiny_model_dir, "mode=nope"))


def test_craft_multi_view_retrieval_with_the_default_dense_scorer(tmp_path, cache_dir, tiny_model_dir):
    """The default scorer (MiniLM sentence embeddings, shipped in a wheel): each view votes for its top tool;
    a tool needs two votes, so the matching tool wins and a one-view match is not offered."""
    from smith.evals.rg.baselines import craft
    from smith.evals.rg.config import KViewConfig
    from smith.pool.retrieval.scorers import make_scorer

    def row(name: str, description: str, question: str) -> dict:
        return {"tool": {"function_name": name, "schema": {"description": description}}, "question": question}

    toolset = [row("count_set_bits", "Count the 1-bits in the binary form of an integer.",
                   "How many 1 bits are in the binary representation of 77?"),
               row("reverse_word", "Spell a word backwards.", "Spell this word backward: garden")]
    ctx = type("Ctx", (), {"opts": cfg_for(tmp_path, "tiny", cache_dir, tiny_model_dir, "mode=craft").suite
                           .baselines.craft})()
    ctx.opts.k_view = KViewConfig(explanation=1, name=1, query=1)
    scorer = make_scorer("minilm")
    plan = (["count_ones_in_binary"], "Count how many ones the binary form of a number has.")
    assert craft.retrieve(ctx, scorer, toolset, "How many 1 bits does 1234 have in binary?", plan) == [0]
    assert craft.retrieve(ctx, scorer, toolset, "Spell backward: lantern", (["reverse_string"], "Reverse a word.")
                          ) == [1]
    assert craft._plan("x\nThe useful functions are: ['a_b', 'c']\nThe final answer is: Do it.") == (["a_b", "c"],
                                                                                                    "Do it.")
