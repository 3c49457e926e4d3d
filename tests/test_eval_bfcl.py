"""bfcl suite: bfcl-eval (in its own venv) against a real local OpenAI-compatible endpoint whose replies are
scripted, on two categories. The script answers from BFCL's own data files: a correct call for the first
simple_python entry and a wrong one for the second; a refusal for the first irrelevance entry and a call
for the second, so BFCL's checkers must score each category 1/2."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from smith.entry import eval_config
from smith.evals.bfcl import categories, sections
from smith.evals.bfcl.venv import DEFAULT_DIR, has_bfcl, python_of

PYTHON = python_of(DEFAULT_DIR)
needs_bfcl = pytest.mark.skipif(
    not has_bfcl(PYTHON),
    reason=f"bfcl-eval venv missing at {PYTHON}; create it with `.venv/bin/python -m smith.evals.bfcl.venv` "
    "(`scripts/setup.sh --tests` does, as in CI)",
)


def test_categories_refuse_online_ones():
    assert categories(["all"])[0] == "simple_python" and "memory_vector" not in categories([])
    with pytest.raises(ValueError, match="not offline"):
        categories(["simple_python", "web_search_base"])
    with pytest.raises(ValueError, match="unknown BFCL categories"):
        categories(["simple_pyhton"])


def test_sections_follow_bfcl_aggregation():
    acc = {"simple_python": 1.0, "simple_java": 0.0, "multiple": 0.5, "live_simple": 1.0, "live_multiple": 0.0,
           "irrelevance": 0.25}
    counts = {"live_simple": 3, "live_multiple": 1}
    s = sections(acc, counts)
    assert s["Non-Live AST"] == pytest.approx((0.5 + 0.5) / 2)  # simple = mean(1, 0), then mean(simple, multiple)
    assert s["Live AST"] == pytest.approx(3 / 4)  # weighted by entry count
    assert s["Irrelevance"] == 0.25 and "Multi-Turn" not in s


def _bfcl_data() -> Path:
    out = subprocess.run([str(PYTHON), "-c", "import importlib.util as u; "
                          "print(u.find_spec('bfcl_eval').submodule_search_locations[0])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return Path(out) / "data"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _script(data: Path):
    simple = _lines(data / "BFCL_v4_simple_python.json")[:2]
    truth = {e["id"]: e["ground_truth"][0] for e in _lines(data / "possible_answer" / "BFCL_v4_simple_python.json")}
    irrelevant = _lines(data / "BFCL_v4_irrelevance.json")[:2]

    def call(name: str, args: dict) -> str:
        return "<tool_call>\n" + json.dumps({"name": name.replace(".", "_"), "arguments": args}) + "\n</tool_call>"

    def script(context: str) -> str:
        for i, e in enumerate(simple):
            if e["question"][0][-1]["content"] in context:
                (name, params), = truth[e["id"]].items()
                args = {k: next(v for v in vals if v != "") for k, vals in params.items() if vals != [""]}
                if i == 1:  # wrong on purpose: every argument replaced
                    args = {k: "wrong" for k in args}
                return call(name, args)
        for i, e in enumerate(irrelevant):
            if e["question"][0][-1]["content"] in context:
                if i == 0:
                    return "None of the available functions can answer this."
                return call(e["function"][0]["name"], {})
        raise AssertionError(f"scripted endpoint got a prompt it was not written for: {context[-300:]}")

    return script


def _served(tiny_model_dir):
    from transformers import AutoTokenizer

    from smith.models.scripted import ScriptedBackend
    from smith.models.serve import running

    backend = ScriptedBackend(AutoTokenizer.from_pretrained(tiny_model_dir), _script(_bfcl_data()), name="scripted")
    return backend, running(backend, name="scripted")


def _cfg(url: str, out: Path):
    return eval_config(["suite=bfcl", f"model='openai:{url}#scripted'", "limit=2", f"output_dir={out}",
                        "suite.categories=[simple_python,irrelevance]"])


def _check(summary: dict) -> None:
    s = summary["details"]
    cats = s["categories"]
    assert cats["simple_python"]["accuracy"] == 0.5 and cats["simple_python"]["total_count"] == 2
    assert cats["irrelevance"]["accuracy"] == 0.5 and cats["irrelevance"]["total_count"] == 2
    assert s["sections"] == {"Non-Live AST": 0.5, "Irrelevance": 0.5}
    assert s["entries"] == 4 and s["mean_accuracy"] == 0.5


def test_accuracy_figure_marks_zero_bars_shows_n_and_fits():
    """Per category and per section: a bar per category run, n (entries) on each, a marker for a bar at 0
    (a quick run is mostly zeros), "not scored" for a category without a score, every text in the canvas."""
    from smith.evals.bfcl import sections
    from smith.evals.bfcl.plots import figure

    from .figures import texts, texts_outside

    cats = {"simple_python": {"accuracy": 0.0, "correct_count": 0, "total_count": 2},
            "irrelevance": {"accuracy": 1.0, "correct_count": 2, "total_count": 2},
            "multi_turn_base": {"total_count": 0}}
    fig = figure(cats, sections({"simple_python": 0.0, "irrelevance": 1.0}, {"simple_python": 2, "irrelevance": 2}),
                 "BFCL v4: tiny")
    by_cat, by_sec = fig.axes
    assert [t.get_text() for t in by_cat.get_yticklabels()] == ["simple_python  n=2", "irrelevance  n=2",
                                                                "multi_turn_base  n=0"]
    assert [t.get_text() for t in by_sec.get_yticklabels()] == ["Non-Live AST  n=2", "Irrelevance  n=2"]
    assert "not scored" in texts(by_cat) and "0%" in texts(by_cat) and "100%" in texts(by_sec)
    for ax in (by_cat, by_sec):  # one visible marker on x = 0 for the zero bar
        zero = [ln for ln in ax.get_lines() if ln.get_marker() == "|" and ln.get_markersize() >= 10]
        assert len(zero) == 1 and list(zero[0].get_xdata()) == [0] and not zero[0].get_clip_on()
    assert texts_outside(fig) == []


@needs_bfcl
def test_bfcl_two_categories_against_scripted_endpoint(tmp_path, tiny_model_dir):
    from smith.evals.bfcl import run

    backend, server = _served(tiny_model_dir)
    out = tmp_path / "bfcl"
    with server as url:
        summary = run(_cfg(url, out))
    assert len(backend.calls) == 4  # one request per entry
    _check(summary)
    tokens = summary["details"]["tokens"]
    assert tokens["input"] > 50 and tokens["output"] > 0  # the served tokenizer's counts
    assert summary["metrics"]["tokens/input"]["value"] == tokens["input"]  # mean per entry, as rg's per question
    disk = json.loads((out / "summary.json").read_text())
    assert disk == summary
    assert re.search(r"\| simple_python \| 50\.0 \| 1 \| 2 \|", (out / "results.md").read_text())
    assert (out / "accuracy_by_category.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # bfcl-eval wrote under the output directory only
    assert list((out / "bfcl" / "score" / "smith-FC").rglob("BFCL_v4_simple_python_score.json"))
    assert list((out / "bfcl" / "result" / "smith-FC").rglob("BFCL_v4_irrelevance_result.json"))


@needs_bfcl
@pytest.mark.slow
def test_bfcl_rerun_resumes_without_requests(tmp_path, tiny_model_dir):
    from smith.evals.bfcl import run

    backend, server = _served(tiny_model_dir)
    with server as url:
        first = run(_cfg(url, tmp_path / "bfcl"))
        again = run(_cfg(url, tmp_path / "bfcl"))  # bfcl-eval finds every id generated and sends nothing
    assert len(backend.calls) == 4
    _check(first)
    _check(again)
