"""The out-of-domain suites (tabmwp, gqa) end to end on the rg machinery, from local files in the benchmarks'
own formats (tests/fixtures/ood, written by make_fixtures.py): the benchmarks' scoring rules, every kind of
mode (cot on the tiny model; build_use, pool and the LATM baseline with a scripted agent that writes the
fixtures' reference tools, so every answer must be right), and the checks of the suites' file settings.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from smith.entry import eval_config
from smith.errors import ConfigError
from tests.test_eval_rg_baselines import rows, scripted, tool_reply, use_reply

FIX = Path(__file__).resolve().parent / "fixtures" / "ood"
sys.path.insert(0, str(FIX))
import reference_tools  # noqa: E402

FILES = {
    "tabmwp": [f"suite.data={FIX}/tabmwp_test.json", f"suite.train_data={FIX}/tabmwp_train.json"],
    "gqa": [f"suite.data={FIX}/gqa_test_questions.json", f"suite.train_data={FIX}/gqa_train_questions.json",
            f"suite.scenes={FIX}/gqa_sceneGraphs.json"],
}


def cfg_for(suite: str, out: Path, model: str, tiny_dir: Path, *extra: str):
    return eval_config([f"suite={suite}", f"model='{model}'", f"output_dir={out}", f"tiny_dir={tiny_dir}",
                        *FILES[suite], "suite.bootstrap=50", "suite.sandbox.workers=2", *extra])


def writer(context: str) -> str:
    """Writes the fixture's reference tool when asked to build one; otherwise a faithful tool user."""
    if "Infer the general procedure" in context:
        return tool_reply(reference_tools.TABMWP if "Table:" in context else reference_tools.GQA)
    return use_reply(context)


# ------------------------------------------------------------------------------------------------- scoring


@pytest.mark.parametrize(("answer", "gold", "unit", "choices", "ok"), [
    ("1,000", "1000", "", None, True),
    ("$56.40", "56.4", "", None, True),
    ("3/4", "0.75", "", None, True),
    ("0.3333", "1/3", "", None, True),      # 3-decimal tolerance: both 0.333
    ("0.34", "1/3", "", None, False),
    ("12 apples", "12", "apples", None, True),
    ("The answer is 7.", "7", "", None, True),
    ("7:25 P.M.", "7:25 P.M.", "", None, True),
    ("B", "Ben", "", ["Dev", "Ben", "Fay"], True),
    ("(c)", "Fay", "", ["Dev", "Ben", "Fay"], True),
    ("Ben", "Ben", "", ["Dev", "Ben", "Fay"], True),
    ("Dev", "Ben", "", ["Dev", "Ben", "Fay"], False),
])
def test_tabmwp_scoring_follows_the_benchmark(answer, gold, unit, choices, ok):
    from smith.evals.tabmwp import correct

    assert correct(answer, {"answer": gold, "unit": unit, "choices": choices}) is ok


def test_gqa_scoring_is_exact_match_after_normalisation():
    from smith.evals.gqa import correct

    assert correct("Red.", {"answer": "red"}) and correct(" yes ", {"answer": "yes"})
    assert not correct("a red one", {"answer": "red"}) and not correct("reds", {"answer": "red"})


def test_loaders_render_tables_and_scene_graphs():
    from smith.evals import gqa, tabmwp

    cfg = eval_config(["suite=gqa", *FILES["gqa"]])
    q = gqa.load(str(FIX / "gqa_test_questions.json"), cfg)
    assert len(q) == 9 and {i.category for i in q} == {"attr_query", "obj_verify", "rel_query"}
    assert q[0].question.startswith("Scene graph of the image") and "- o1: " in q[0].question
    assert q[0].question.endswith(gqa.INSTRUCTION)
    t = tabmwp.load(str(FIX / "tabmwp_test.json"), cfg)
    mc = next(i for i in t if i.category == "extractive_text")
    assert mc.question.startswith("Table:\n[TITLE]: ") and "\nOptions: (A) " in mc.question
    free = next(i for i in t if i.category == "integer_number")
    assert "(Unit: " in free.question and free.entry["choices"] is None


# --------------------------------------------------------------------------------------------- end to end


@pytest.mark.parametrize("suite", ["tabmwp", "gqa"])
def test_build_use_with_reference_writer_answers_everything(suite, tmp_path, tiny_model_dir):
    from smith.evals import gqa, tabmwp

    module = {"tabmwp": tabmwp, "gqa": gqa}[suite]
    out = tmp_path / suite
    s = module.run(cfg_for(suite, out, "writer", tiny_model_dir, "mode=build_use"),
                   {"writer": scripted(writer, tiny_model_dir, "writer")})
    d = s["details"]
    assert s["suite"] == suite and d["n_questions"] == 9 and s["metrics"]["overall"]["value"] == 1.0
    assert set(d["macro"]) == {"unseen"} and d["macro"]["unseen"]["value"] == 1.0
    expected_groups = {"tabmwp": {"Free text", "Multi-choice"}, "gqa": {"query", "verify"}}[suite]
    assert set(d["groups"]["unseen"]) == expected_groups
    tools = [json.loads(line) for line in (out / "tools.jsonl").read_text().splitlines()]
    assert len(tools) == 3 and all(t["ok"] for t in tools)
    assert all(r["correct"] and r["tool_call_ok"] == 1 for r in rows(out))
    md = (out / "results.md").read_text()
    assert md.startswith(f"# {suite}: writer (build+use)") and "| Method | Accuracy | I/O tokens |" in md
    assert "| writer (build+use) | 100.0±0.0 | " in md
    assert not (out / "accuracy_by_group.png").exists()
    again = module.run(cfg_for(suite, out, "writer", tiny_model_dir, "mode=build_use"),
                       {"writer": scripted(lambda c: pytest.fail("a resumed run asks nothing"), tiny_model_dir,
                                           "writer")})
    assert again["metrics"]["overall"] == s["metrics"]["overall"]


def test_pool_mode_offers_the_pool_tool(tmp_path, tiny_model_dir):
    """A pool holding a tool for an OOD category is used as is; the other categories get built ones."""
    from smith.evals import tabmwp
    from smith.pool import PoolEntry, ToolPool
    from smith.toolspec import ToolSpec

    schema = json.loads(tool_reply(reference_tools.TABMWP).split("```json\n")[1].split("```")[0])
    pool = ToolPool()
    pool.admit(PoolEntry("integer_number", ToolSpec(reference_tools.TABMWP, schema, "solve"), 0.9, 0.8, step=3))
    path = pool.save(tmp_path / "run")
    out = tmp_path / "pool"
    s = tabmwp.run(cfg_for("tabmwp", out, "writer", tiny_model_dir, "mode=pool", f"suite.pool={path}"),
                   {"writer": scripted(writer, tiny_model_dir, "writer")})
    cats = s["details"]["categories"]
    assert cats["integer_number"]["tool_source"] == "pool"
    assert cats["decimal_number"]["tool_source"] == "built" and s["metrics"]["overall"]["value"] == 1.0


def test_latm_baseline_on_tabmwp_verifies_and_uses_the_tool(tmp_path, tiny_model_dir):
    from smith.evals import tabmwp

    out = tmp_path / "latm"
    s = tabmwp.run(cfg_for("tabmwp", out, "maker", tiny_model_dir, "mode=latm", "limit=1"),
                   {"maker": scripted(writer, tiny_model_dir, "maker")})
    d = s["details"]
    assert d["baseline"]["method"] == "LATM" and d["n_questions"] == 3
    assert sorted(d["baseline"]["verified"]) == ["decimal_number", "extractive_text", "integer_number"]
    assert s["metrics"]["overall"]["value"] == 1.0 and all(r["llm_calls"] >= 2 for r in rows(out))


def test_cot_on_tiny_model_logs_every_question(tmp_path, tiny_model_dir):
    from smith.evals import gqa

    out = tmp_path / "cot"
    s = gqa.run(cfg_for("gqa", out, "tiny", tiny_model_dir, "limit=1", "suite.cot_max_new_tokens=8",
                        f"suite.scenes=[{FIX}/gqa_sceneGraphs.json]"))  # the list form
    d = s["details"]
    assert d["mode"] == "cot" and d["n_questions"] == 3 and d["tokens"]["all"]["input"] > 100
    assert json.loads((out / "run.json").read_text())["config"]["suite"]["data"] == str(FIX / "gqa_test_questions.json")


# ------------------------------------------------------------------------------------------------- checks


def test_checks_name_the_missing_file_setting(tmp_path, tiny_model_dir):
    from smith.evals import gqa, tabmwp

    base = ["suite=tabmwp", f"output_dir={tmp_path / 'o'}"]
    with pytest.raises(ConfigError, match=r"needs suite\.data=PATH"):
        tabmwp.check(eval_config(base))
    with pytest.raises(ConfigError, match="no such file"):
        tabmwp.check(eval_config([*base, f"suite.data={tmp_path}/none.json"]))
    assert tabmwp.check(eval_config([*base, FILES["tabmwp"][0]])) == [("model", "tiny")]
    with pytest.raises(ConfigError, match=r"needs suite\.train_data=PATH"):
        tabmwp.check(eval_config([*base, FILES["tabmwp"][0], "mode=build_use"]))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"pid": "1", "question": "q", "answer": "1", "table": "", "ans_type": "x"}) + "\n")
    with pytest.raises(ConfigError, match="not in the documented format"):
        tabmwp.check(eval_config([*base, f"suite.data={bad}"]))
    with pytest.raises(ConfigError, match=r"suite\.scenes=PATH"):
        gqa.check(eval_config(["suite=gqa", FILES["gqa"][0]]))


@pytest.mark.parametrize("mode", ["craft", "trove", "ktce"])
@pytest.mark.parametrize("suite", ["tabmwp", "gqa"])
def test_every_baseline_runs_on_the_ood_suites_with_the_tiny_model(suite, mode, tmp_path, tiny_model_dir):
    """The tiny model through each remaining baseline on both OOD suites (LATM is above, with a scripted maker):
    every question is answered and logged with its tokens, the method's block is in the summary's details."""
    import importlib

    module = importlib.import_module(f"smith.evals.{suite}")
    out = tmp_path / mode
    s = module.run(cfg_for(suite, out, "tiny", tiny_model_dir, f"mode={mode}", "quick=true", "limit=1"))
    d = s["details"]
    assert d["mode"] == mode and d["baseline"]["method"].lower() == mode and d["n_questions"] == len(rows(out))
    assert all(r["prompt_tokens"] > 0 for r in rows(out)) and s["metrics"]["overall"]["n"] == d["n_questions"]
