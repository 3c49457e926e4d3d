"""`eval.py suite=lots` end to end on the tiny scorer: the scripted gold agent as a harness check, a
scripted ChatBackend as the LLM (answers and router), resumable logs, summary, traces and plots."""

from __future__ import annotations

import json
import re

import pytest
import torch

from smith.entry import eval_config
from smith.evals import lots
from smith.evals.lots.serving import ChatAgent
from smith.models.base import Generation

SMALL = ["limit=2", "suite.families=[fx_settle,no_tool]", "suite.registry_sizes=[]", "suite.fixed_k=[2]",
         "suite.methods=[no_tools,keep_all,random,bm25,llm_router,beam_search,tto,lots]",
         "suite.stream.rounds=1", "suite.stream.registry=30", "suite.stream.cap=4", "suite.stream.batch=2",
         "suite.stream.eval=2"]


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _cfg(tmp_path, tiny_model_dir, model: str, extra: list[str] = ()):
    return eval_config([f"model={model}", "suite=lots", f"output_dir={tmp_path}",
                        f"suite.scorer={tiny_model_dir}", *SMALL, *extra])


def _lines(path) -> int:
    return len(path.read_text().splitlines())


def test_scripted_gold_harness_check_and_resume(tmp_path, tiny_model_dir):
    summary = lots.run(_cfg(tmp_path, tiny_model_dir, "scripted:gold"))
    m = summary["details"]["methods"]
    assert m["keep_all"]["accuracy"] == 1.0  # the gold chain is served: the harness answers everything
    assert m["no_tools"]["by_family"] == {"fx_settle": 0.0, "no_tool": 1.0}
    assert m["llm_router"]["by_family"]["fx_settle"] == 1.0 and m["llm_router"]["tools_kept"] == 1.5
    for f, fit in summary["details"]["lots"].items():
        assert set(fit["scores"]) == set(m["keep_all"]["spaces"][f])  # every served tool was scored
        best = max(fit["fit_accuracy"].values())  # JSON keys: K as text
        assert fit["k"] == min(int(k) for k, a in fit["fit_accuracy"].items() if a == best)
        assert len(fit["space"]) == fit["k"]
    # the budget choice reads fitting accuracy: a gold-agent space contains the fx_settle chain
    assert {"DocRetrieve", "ExchangeRate", "Calculator"} <= set(summary["details"]["lots"]["fx_settle"]["space"])
    assert m["lots"]["accuracy"] == 1.0
    assert m["lots"]["prompt_tokens"] <= m["keep_all"]["prompt_tokens"]
    # fx_settle needs all three chain tools: beam search stops at the empty space (B.1); TTO starts from the
    # best single tool (section 4.1), the all-zero tie going to the first in registry order, and no pair gains
    assert m["tto"]["spaces"]["fx_settle"] == ["TableQuery"] and m["beam_search"]["spaces"]["fx_settle"] == []
    out = tmp_path
    for name in ("summary.json", "results.md", "accuracy_vs_k.png", "stream_updates.png", "traces/lots.jsonl",
                 "spaces/registry-15/fx_settle.json", "spaces/stream/no_tool.json"):
        assert (out / name).is_file(), name
    assert re.search(r"\| lots \| 100\.0 \|", (out / "results.md").read_text())
    row = json.loads((out / "traces" / "keep_all.jsonl").read_text().splitlines()[0])
    assert {"request", "menu", "answer", "correct", "prompt_tokens"} <= set(row)
    serves, scores = _lines(out / "serves.jsonl"), _lines(out / "scores.jsonl")
    again = lots.run(_cfg(tmp_path, tiny_model_dir, "scripted:gold"))  # resumes: nothing is served or scored twice
    assert (_lines(out / "serves.jsonl"), _lines(out / "scores.jsonl")) == (serves, scores)
    assert again["details"]["methods"] == summary["details"]["methods"]


class ScriptedChat:
    """A ChatBackend double (LLM text only): routes to Calculator-ish tools, answers with the last number."""

    name = "scripted-chat"

    def __init__(self) -> None:
        self.calls = 0

    def chat(self, conversations, tools=None, params=None):
        self.calls += len(conversations)
        outs = []
        for conv in conversations:
            if conv[0]["content"].startswith("Choose the tools"):
                outs.append(Generation("DocRetrieve, ExchangeRate and Calculator", prompt_tokens=50))
                continue
            calc = re.search(r"^Calculator: (\S+)$", conv[-1]["content"], re.M)
            outs.append(Generation(f"The answer is {calc[1] if calc else 'unknown'}.", prompt_tokens=0))
        return outs


def test_llm_agent_path_with_a_scripted_backend(tmp_path, tiny_model_dir):
    chat = ScriptedChat()
    cfg = _cfg(tmp_path, tiny_model_dir, "scripted:gold", ["suite.methods=[keep_all,llm_router,lots]",
                                                            "suite.fixed_k=[]", "suite.stream.rounds=0"])
    summary = lots.run(cfg, agent=ChatAgent(chat))
    m = summary["details"]["methods"]
    assert chat.calls > 0
    assert m["keep_all"]["by_family"] == {"fx_settle": 1.0, "no_tool": 0.0}
    assert m["llm_router"]["tools_kept"] == 3.0 and m["llm_router"]["selection_prompt_tokens"] == 50
    assert m["llm_router"]["by_family"]["fx_settle"] == 1.0
    assert m["keep_all"]["prompt_tokens"] > 0  # counted with the scorer's tokenizer when the backend gives none


def test_plots_keep_tied_series_apart_and_show_n():
    """Small runs tie methods at one accuracy: each series needs its own marker and line style and a sideways
    shift, or the last one drawn hides the rest."""
    from smith.evals.lots import plots

    from .figures import texts_outside

    tie = {k: 1 / 3 for k in (1, 2, 4)}
    figs = [plots.fixed_k_figure({m: dict(tie) for m in ("lots", "bm25", "dense", "random")}, 1.0, "n = 2 x 3"),
            plots.stream_figure({f: {"accuracy": [0.0, 0.0]} for f in ("fx_settle", "table_total")}, "n = 2"),
            plots.registry_figure({"15": {"keep_all": 0.5, "lots": 0.5}, "30": {"keep_all": 0.5, "lots": 0.5}},
                                  "n = 2 x 3")]
    for fig in figs:
        ax = fig.axes[0]
        series = [ln for ln in ax.get_lines() if ln.get_label() != "keep all"]
        assert len({ln.get_marker() for ln in series}) == len(series)
        assert len({ln.get_linestyle() for ln in series}) == len(series)
        first = {tuple(ln.get_transform().transform((ln.get_xdata()[0], ln.get_ydata()[0])).round(3))
                 for ln in series}
        assert len(first) == len(series)  # tied points land on distinct pixels
        assert "n = " in ax.get_title()
        assert [t.get_text() for t in ax.get_xticklabels()] == [f"{x:g}" for x in series[0].get_xdata()]
        assert texts_outside(fig) == []
