"""rg suite end to end: each mode on a few real reasoning-gym items, through the real sandbox and real HTTP.

Models are the tiny local model (real generation, real token counts) and a scripted endpoint: a
ScriptedBackend served by smith.models.serve, whose *text* is scripted (the allowed test double) -- it
"writes" the hand-written reference tool of the category (tests/reference_tools) when shown a build prompt,
and in a use episode calls the offered tool with the question, then answers with the tool's output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from smith.entry import eval_config

ROOT = Path(__file__).resolve().parent
SEEN, UNSEEN = "spell_backward", "count_bits"  # deterministic reference tools; one seen, one unseen category
SUITE_SEED = 1000


def reference_reply(category: str) -> str:
    code = (ROOT / "reference_tools" / f"{category}.py").read_text()
    schema = {"name": "solve", "description": f"Answers {category.replace('_', ' ')} questions; pass the whole "
              "question text.", "parameters": {"type": "object", "properties": {
                  "question": {"type": "string", "description": "the question, verbatim"}}, "required": ["question"]}}
    return f"```python\n{code}```\n\n```json\n{json.dumps(schema, indent=1)}\n```"


def reference_script(categories: list[str], cache_dir: Path):
    """Scripted text of a model that writes the reference tool and uses tools faithfully."""
    from smith.tasks import items

    first_example = {items(c, "easy", 4, SUITE_SEED, cache_dir)[0].question: c for c in categories}

    def script(context: str) -> str:
        if "Infer the general procedure" in context:  # build prompt
            for question, cat in first_example.items():
                if question in context:
                    return reference_reply(cat)
            raise AssertionError("build prompt with unknown examples")
        turns = context.split("<|im_start|>")
        last_user = next(t for t in reversed(turns) if t.startswith("user"))
        if "<tool_response>" in last_user:  # the tool answered: reply with its output
            return re.search(r"<tool_response>\n?(.*?)\n?</tool_response>", last_user, re.S).group(1).strip()
        question = last_user[len("user\n"):].split("<|im_end|>")[0]
        tools = re.search(r"<tools>\n(.*?)\n</tools>", context, re.S)
        if tools is None:  # no tool offered (CoT)
            return "Let me think.\nAnswer: 42"
        names = [json.loads(line)["function"]["name"] for line in tools.group(1).splitlines() if line.strip()]
        return "<tool_call>\n" + json.dumps({"name": names[0], "arguments": {"question": question}}) + "\n</tool_call>"

    return script


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("rg_items")


@pytest.fixture(scope="module")
def endpoint(tiny_model_dir, cache_dir):
    """A real OpenAI-compatible HTTP endpoint serving the scripted reference model."""
    from transformers import AutoTokenizer

    from smith.models.scripted import ScriptedBackend
    from smith.models.serve import running

    backend = ScriptedBackend(AutoTokenizer.from_pretrained(tiny_model_dir), reference_script([SEEN, UNSEEN],
                                                                                              cache_dir))
    with running(backend, name="reference") as url:
        yield backend, f"openai:{url}#reference"


def rg_cfg(out: Path, model: str, cache_dir: Path, tiny_dir: Path, *extra: str):
    return eval_config(["suite=rg", f"model='{model}'", f"output_dir={out}", f"tiny_dir={tiny_dir}",
                        f"suite.cache_dir={cache_dir}", f"suite.categories=[{SEEN},{UNSEEN}]",
                        "suite.bootstrap=200", "suite.sandbox.workers=2", *extra])


def rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


def test_build_use_with_reference_writer_solves_hard_items(tmp_path, endpoint, cache_dir, tiny_model_dir):
    from smith.evals.rg import run

    _, spec = endpoint
    out = tmp_path / "bu"
    s = run(rg_cfg(out, spec, cache_dir, tiny_model_dir, "mode=build_use", "limit=3"))
    assert s["metrics"]["seen/avg"]["value"] == 1.0 and s["metrics"]["unseen/Arithmetic"]["n"] == 3
    d = s["details"]
    assert d["mode"] == "build_use" and d["writer"] == spec and d["n_questions"] == 6
    for cat in (SEEN, UNSEEN):
        assert d["categories"][cat]["value"] == 1.0 and d["categories"][cat]["tool_source"] == "built"
    assert d["macro"]["seen"]["value"] == 1.0 and d["macro"]["unseen"]["value"] == 1.0
    assert d["groups"]["unseen"]["Arithmetic"]["value"] == 1.0 and d["groups"]["seen"]["Algorithms"]["value"] == 1.0
    tools = [json.loads(line) for line in (out / "tools.jsonl").read_text().splitlines()]
    assert {t["category"] for t in tools} == {SEEN, UNSEEN} and all(t["ok"] for t in tools)
    assert d["build_tokens"]["tools"] == 2 and d["build_tokens"]["input"] > 0
    for r in rows(out):
        assert r["correct"] and r["turns"] == 2 and r["tool_calls"] == 1 and r["tool_call_ok"] == 1
        assert r["tools"] == ["solve"]
    assert (out / "accuracy_by_group.png").stat().st_size > 5000
    md = (out / "results.md").read_text()
    # paper columns: Seen Avg | Logic | Game | Algebra | Arith | Algo | Avg | I/O tokens
    assert re.search(r"\| reference \(build\+use\) \| 100\.0±0\.0 \|  \|  \|  \| 100\.0±0\.0 \|  \| 100\.0±0\.0 \| "
                     r"[\d,]+ / [\d,]+ \|", md)


def test_pool_mode_uses_pool_tool_and_builds_missing(tmp_path, endpoint, cache_dir, tiny_model_dir):
    from smith.evals.rg import run
    from smith.pool import PoolEntry, ToolPool
    from smith.toolspec import ToolSpec

    _, spec = endpoint
    pool = ToolPool()
    code = (ROOT / "reference_tools" / f"{SEEN}.py").read_text()
    schema = json.loads(reference_reply(SEEN).split("```json\n")[1].split("```")[0])
    pool.admit(PoolEntry(SEEN, ToolSpec(code, schema, "solve"), 0.9, 0.8, step=5, source_run="fixture"))
    pool_file = pool.save(tmp_path / "run")
    out = tmp_path / "pool"
    s = run(rg_cfg(out, spec, cache_dir, tiny_model_dir, "mode=pool", f"suite.pool={pool_file}", "limit=2",
                   "suite.n_distractors=1"))
    cats = s["details"]["categories"]
    assert cats[SEEN]["tool_source"] == "pool" and cats[UNSEEN]["tool_source"] == "built"
    assert s["details"]["build_tokens"]["tools"] == 1  # only the category the pool lacks was built
    # one distractor: both tools are named `solve`, so the repeat is suffixed; the scripted user calls the first
    for r in rows(out):
        assert sorted(r["tools"]) == ["solve", "solve_2"]
    assert 0.0 <= s["details"]["macro"]["unseen"]["value"] <= 1.0 and s["details"]["n_questions"] == 4


def test_cot_tiny_counts_tokens(tmp_path, cache_dir, tiny_model_dir):
    from transformers import AutoTokenizer

    from smith.evals.rg import run
    from smith.evals.rg.episodes import COT_SYSTEM
    from smith.tasks import items

    out = tmp_path / "cot"
    s = run(rg_cfg(out, "tiny", cache_dir, tiny_model_dir, "limit=2", "suite.cot_max_new_tokens=6"))
    assert s["details"]["mode"] == "cot" and s["details"]["n_questions"] == 4 and s["details"]["writer"] is None
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    by_item = {r["item"]: r for r in rows(out)}
    for cat in (SEEN, UNSEEN):
        for it in items(cat, "hard", 2, SUITE_SEED, cache_dir):
            msgs = [{"role": "system", "content": COT_SYSTEM}, {"role": "user", "content": it.question}]
            expected = len(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True,
                                                   return_dict=True)["input_ids"])
            r = by_item[it.id]
            assert r["prompt_tokens"] == expected  # input tokens are the rendered prompt, exactly
            assert 1 <= r["completion_tokens"] <= 6
    assert s["details"]["tokens"]["all"]["input"] == pytest.approx(sum(r["prompt_tokens"] for r in rows(out)) / 4)
    assert (out / "summary.json").is_file() and json.loads((out / "summary.json").read_text())["label"] == "tiny (CoT)"


def test_writer_differs_from_user_transfers_tools(tmp_path, endpoint, cache_dir, tiny_model_dir):
    """Tools written by the scripted reference writer, used by the tiny model (tool transfer)."""
    from smith.evals.rg import run

    _, spec = endpoint
    out = tmp_path / "transfer"
    s = run(rg_cfg(out, "tiny", cache_dir, tiny_model_dir, "mode=build_use", f"suite.writer='{spec}'", "limit=1",
                   "suite.max_new_tokens=4", "suite.max_turns=2"))
    assert s["model"] == "tiny" and s["details"]["writer"] == spec and s["label"] == "tiny (tools by reference)"
    tools = [json.loads(line) for line in (out / "tools.jsonl").read_text().splitlines()]
    assert all(t["writer"] == spec and t["ok"] for t in tools)
    for r in rows(out):
        assert r["tools"] == ["solve"] and r["tool_source"] == "built"
        assert r["prompt_tokens"] > 150  # the tool schema rides in the prompt


def test_resume_skips_done_items(tmp_path, endpoint, cache_dir, tiny_model_dir):
    from smith.evals.rg import run

    backend, spec = endpoint
    out = tmp_path / "resume"
    cfg = rg_cfg(out, spec, cache_dir, tiny_model_dir, "mode=cot", "limit=3", "suite.batch_size=2")
    first = run(cfg)
    assert first["details"]["n_questions"] == 6
    lines = (out / "episodes.jsonl").read_text().splitlines()
    # interrupted: two rows kept, the third torn mid-write
    (out / "episodes.jsonl").write_text("\n".join(lines[:2]) + "\n" + lines[2][:25])
    before = len(backend.calls)
    second = run(cfg)
    assert len(backend.calls) - before == 4  # only the four missing questions were asked
    assert second["details"]["n_questions"] == 6
    assert [r["key"] for r in rows(out)][:2] == [json.loads(x)["key"] for x in lines[:2]]
    assert second["details"]["categories"] == first["details"]["categories"]
    before = len(backend.calls)
    run(cfg)  # everything done: no request at all
    assert len(backend.calls) == before
    with pytest.raises(ValueError, match="other settings"):
        run(rg_cfg(out, spec, cache_dir, tiny_model_dir, "mode=build_use", "limit=3"))


def test_group_plot_marks_zero_bars_and_shows_n():
    """A bar at 0 has no height: it must still be drawn (a marker on the axis), and every bar says its n."""
    from matplotlib.colors import to_hex

    from smith.evals.rg.metrics import PAPER_GROUPS
    from smith.evals.rg.plots import groups_figure

    from .figures import texts, texts_outside

    def summary(value: float) -> dict:
        cell = {"value": value, "se": 0.0, "lo": value / 2, "hi": min(1.0, value * 1.5)}
        return {"groups": {split: {g: dict(cell) for g, _ in PAPER_GROUPS} for split in ("seen", "unseen")},
                "categories": {f"{g}-{split}-{i}": {"group": g, "split": split, "n": 2}
                               for g, _ in PAPER_GROUPS for split in ("seen", "unseen") for i in range(3)}}

    fig = groups_figure({"zero": summary(0.0), "tuned": summary(1.0)})
    ax = fig.axes[0]
    zero_bars = [p for p in ax.patches if p.get_height() == 0]
    assert len(zero_bars) == 2 * len(PAPER_GROUPS)
    markers = [ln for ln in ax.get_lines() if ln.get_marker() == "_" and ln.get_markersize() >= 6]
    marked = {(round(float(x), 6), to_hex(ln.get_color())) for ln in markers for x in ln.get_xdata()}
    for bar in zero_bars:  # every zero bar: a visible marker at its centre, in its colour, on y = 0
        assert (round(bar.get_x() + bar.get_width() / 2, 6), to_hex(bar.get_facecolor(), keep_alpha=False)) in marked
    assert all(list(ln.get_ydata()) == [0] * len(ln.get_xdata()) and not ln.get_clip_on() for ln in markers)
    assert ax.get_ylim()[0] < 0  # the marker is not hidden under the axis line
    assert texts(ax).count("n=6") == 4 * len(PAPER_GROUPS)  # 3 categories x 2 questions, per bar
    assert all(p.get_linewidth() > 0 for p in ax.patches)
    assert texts_outside(fig) == []
