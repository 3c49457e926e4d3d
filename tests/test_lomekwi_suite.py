"""suite=lomekwi end to end: eval.py's composed config, scripted agents, a real tiny model through
load_backend, scripted LLM text through the real chat template, resume, and import mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from smith.entry import ConfigError, eval_config
from smith.evals import lomekwi

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "lomekwi"
PNG = b"\x89PNG\r\n\x1a\n"


def cfg_for(out: Path, *overrides: str):
    return eval_config(["suite=lomekwi", f"output_dir={out}", *overrides])


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_scripted_agents_write_summary_logs_table_and_plots(tmp_path):
    for agent in ("optimal", "grinder", "random"):  # one output dir collects all three; the last one draws
        summary = lomekwi.run(cfg_for(tmp_path, f"model=scripted:{agent}", "limit=2", "suite.n_values=[9,10]",
                                      f"suite.plots={agent == 'random'}"))
    assert summary["output_dir"] == str(tmp_path)
    models = json.loads((tmp_path / "summary.json").read_text())["details"]["models"]
    assert set(models) == {"scripted:optimal", "scripted:grinder", "scripted:random"}
    for m in models.values():
        assert m["N"] == 12  # 2 n x 3 T cells x limit 2
        for k in ("C", "R", "E", "S", "G"):
            assert k in m and len(m[f"{k}_ci"]) == 2
    assert models["scripted:optimal"]["S"] == 1.0 and models["scripted:optimal"]["build_rate"] == 1.0
    assert models["scripted:grinder"]["build_rate"] == 0.0 and models["scripted:grinder"]["G"] == \
        models["scripted:grinder"]["S"]
    log = rows(tmp_path / "episodes.jsonl")
    assert len(log) == 36
    for r in log:
        assert {"actions", "observations", "usage", "built", "build_turn", "stop_reason", "held", "won"} <= set(r)
    table = (tmp_path / "results.md").read_text()
    assert "| scripted:optimal | 12 | 1.000" in table
    for name in ("decomposition.png", "build_rate.png", "threshold_map.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG


def test_resume_plays_only_missing_episodes_and_survives_a_torn_line(tmp_path):
    args = ("model=scripted:random", "suite.n_values=[9]", "suite.t_values=[2,3]", "suite.plots=false")
    lomekwi.run(cfg_for(tmp_path, *args, "limit=1"))
    first = (tmp_path / "episodes.jsonl").read_text().splitlines()
    assert [json.loads(x)["seed"] for x in first] == [0, 20]
    with (tmp_path / "episodes.jsonl").open("a") as f:
        f.write('{"key": "scripted:random|n9|T2|seed1", "trunc')  # killed mid-write
    summary = lomekwi.run(cfg_for(tmp_path, *args, "limit=2"))
    after = (tmp_path / "episodes.jsonl").read_text().splitlines()
    assert after[:2] == first  # finished episodes are kept, not replayed
    assert sorted(json.loads(x)["seed"] for x in after) == [0, 1, 20, 21]
    assert summary["details"]["models"]["scripted:random"]["N"] == 4


def test_unknown_scripted_agent_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="scripted agent 'smart' not found"):
        lomekwi.run(cfg_for(tmp_path, "model=scripted:smart", "limit=1", "suite.n_values=[9]", "suite.t_values=[2]"))


def test_llm_text_through_the_real_chat_template(tmp_path, tiny_model_dir):
    """The LLM-agent path with scripted text: real tokenizer and chat template, real token counts."""
    from transformers import AutoTokenizer

    from smith.models.scripted import ScriptedBackend

    def script(prompt: str) -> str:
        last = prompt.rsplit("<|im_start|>user\n", 1)[1]
        if "Out falls" in last:
            return "Something dropped.\npickup"
        door = prompt.split("locked doors: ")[1].split(",")[0]
        return f"I will search a door.\n> Examine {door}"

    backend = ScriptedBackend(AutoTokenizer.from_pretrained(tiny_model_dir), script, name="scripted-text")
    cfg = cfg_for(tmp_path, "limit=1", "suite.n_values=[9]", "suite.t_values=[2]", "suite.plots=false",
                  "suite.system_suffix=' /no_think'")
    summary = lomekwi.play_sweep(cfg, tmp_path, backend=backend)
    (r,) = rows(tmp_path / "episodes.jsonl")
    assert r["model"] == "scripted-text" and r["stop_reason"] == "out_of_budget"
    assert r["actions"][:2] == [["examine", r["labels"]["door_base"] + "_1"], ["pickup"]]
    assert r["usage"]["calls"] == r["turns"] == len(r["turn_usage"]) > 41
    assert r["usage"]["input_tokens"] > r["turn_usage"][0]["input_tokens"] > 100  # the prompt grows every turn
    assert summary["details"]["models"]["scripted-text"]["N"] == 1
    assert "<|im_start|>system\nYou are an agent in a vault" in backend.calls[0]
    assert "Minimize total actions. /no_think<|im_end|>" in backend.calls[0]


def test_a_real_model_through_load_backend(tmp_path, tiny_model_dir):
    """model=SPEC goes through smith.models.load_backend: the tiny random model babbles, and four
    unparseable replies end its episode."""
    cfg = cfg_for(tmp_path, "model=tiny", f"tiny_dir={tiny_model_dir}", "limit=1", "suite.n_values=[9]",
                  "suite.t_values=[2]", "suite.max_new_tokens=8", "suite.plots=false")
    summary = lomekwi.run(cfg)
    (r,) = rows(tmp_path / "episodes.jsonl")
    assert r["model"] == "tiny" and r["turns"] >= 4 and r["usage"]["output_tokens"] > 0
    assert r["stop_reason"] in {"noop", "no_progress", "out_of_budget"}
    assert summary["details"]["models"]["tiny"]["N"] == 1


def test_import_mode_scores_released_logs(tmp_path):
    summary = lomekwi.run(cfg_for(tmp_path, f"import_logs={FIXTURES}"))
    models = json.loads((tmp_path / "summary.json").read_text())["details"]["models"]
    assert summary["details"]["mode"] == "import" and len(models) == 6
    assert {m: models[m]["N"] for m in models} == {
        "Qwen/Qwen3.5-27B": 4, "Qwen/Qwen3.5-2B": 2, "Qwen/Qwen3.5-4B": 1, "claude-haiku-4-5-20251001": 2,
        "claude-opus-4-8": 2, "claude-sonnet-4-6": 2}
    assert models["Qwen/Qwen3.5-27B"]["R"] == 2 / 3
    assert models["claude-opus-4-8"]["stop_reasons"] == {"solved": 2}
    assert len(rows(tmp_path / "imported.jsonl")) == 13
    assert all(src["failed_rows"] == 0 for src in summary["details"]["sources"].values())
    checks = {c["claim"]: c for c in summary["details"]["paper_checks"]}
    # on these hand-picked rows Haiku and Sonnet both built whenever they held: the claim is tested, and fails
    assert checks["recognition inverts across Claude: R(Haiku) > R(Sonnet)"]["agrees"] is False
    assert (tmp_path / "decomposition.png").read_bytes()[:8] == PNG
    assert (tmp_path / "build_rate.png").read_bytes()[:8] == PNG
    with pytest.raises(FileNotFoundError, match="does not exist"):
        lomekwi.run(cfg_for(tmp_path / "out", f"import_logs={tmp_path / 'missing'}"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no episodes\.jsonl"):
        lomekwi.run(cfg_for(tmp_path / "out", f"import_logs={tmp_path / 'empty'}"))


@pytest.mark.slow
def test_eval_py_command_line(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "eval.py", "suite=lomekwi", "model=scripted:optimal", "limit=1",
                           f"output_dir={out}"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((out / "summary.json").read_text())["details"]["models"]["scripted:optimal"]["N"] == 9


@pytest.mark.slow
def test_grinder_wins_as_often_as_the_coupon_collector_allows(tmp_path):
    """Appendix B: grinding wins iff all n keys drop within B - n examines."""
    from smith.evals.common import wilson
    from smith.evals.lomekwi.costs import p_collect_all
    from smith.evals.lomekwi.env import budget_for

    summary = lomekwi.run(cfg_for(tmp_path, "model=scripted:grinder", "suite.plots=false"))
    g = summary["details"]["models"]["scripted:grinder"]
    theory = sum(p_collect_all(n, budget_for(n) - n) for n in (9, 10, 11)) / 3
    lo, hi = wilson(g["counts"]["win"], g["N"])
    assert g["N"] == 180 and lo <= theory <= hi


def test_rule_options_reach_the_episodes(tmp_path):
    """suite.parser / echo / fold_case / commit_nudge / stop_on_build configure every episode; the summary
    records them."""
    nudge = "Perhaps commit."
    summary = lomekwi.run(cfg_for(tmp_path, "model=scripted:optimal", "limit=2", "suite.n_values=[9]",
                                  "suite.t_values=[3]", "suite.plots=false", "suite.parser=smith",
                                  "suite.echo=canonical", "suite.fold_case=true", f"suite.commit_nudge='{nudge}'",
                                  "suite.stop_on_build=true"))
    assert summary["details"]["sweep"]["rules"] == {"parser": "smith", "echo": "canonical", "fold_case": True,
                                          "commit_nudge": nudge, "stop_on_build": True}
    log = rows(tmp_path / "episodes.jsonl")
    assert [r["stop_reason"] for r in log] == ["built", "built"]
    for r in log:  # the optimal agent holds the recipe a turn before it fuses: the nudge fired once
        assert r["nudge_turn"] is not None and r["build_turn"] == len(r["actions"]) - 1


def test_v1_world_option_plays_the_single_shard_world(tmp_path):
    summary = lomekwi.run(cfg_for(tmp_path, "model=scripted:optimal", "limit=2", "suite.n_values=[9,10]",
                                  "suite.plots=false", "suite.world=v1"))
    log = rows(tmp_path / "episodes.jsonl")
    assert [(r["n"], r["n_types"], r["world"]) for r in log] == [(9, 1, "v1")] * 2 + [(10, 1, "v1")] * 2
    assert all("byproduct" in r["labels"] and r["won"] and r["built"] for r in log)
    assert summary["details"]["sweep"]["cells"] == [[9, 1], [10, 1]]


@pytest.mark.parametrize("override", ["suite.parser=strict", "suite.echo=loud", "suite.world=v2"])
def test_unknown_rule_values_are_one_clear_error(tmp_path, override):
    from smith.evals.lomekwi import check

    with pytest.raises(ConfigError, match="known:"):
        check(cfg_for(tmp_path, "model=scripted:optimal", override))


def test_plots_join_only_a_size_ordered_family_and_show_n(tmp_path):
    from smith.evals.lomekwi import metrics, plots

    from .figures import joining_lines, texts, texts_outside

    def summary(n: int, hold: int, build: int, win: int) -> dict:
        return metrics.decompose(metrics.Counts(n=n, hold=hold, build=build, hold_build=build, win=win,
                                                win_build=win))

    models = {"scripted:optimal": summary(12, 12, 12, 12), "scripted:grinder": summary(12, 12, 0, 0),
              "scripted:random": summary(12, 6, 2, 1), "claude-sonnet-4-6": summary(9, 8, 5, 4),
              "claude-haiku-4-5": summary(9, 7, 3, 1)}
    for metric_list in (plots.DECOMPOSITION, plots.BUILD_RATE):
        fig = plots.figure(models, metric_list, "t")
        claude, scripted = fig.axes[:len(metric_list)], fig.axes[len(metric_list):]
        assert len(fig.axes) == 2 * len(metric_list)  # one row per family, the scripted agents share one
        for ax in scripted:  # unrelated agents: markers, never a line between them, each its own marker
            assert joining_lines(ax) == [] and "model size" not in ax.get_xlabel()
            assert len({ln.get_marker() for ln in ax.get_lines()} - {"_"}) == 3  # "_": error-bar caps
        for ax in claude:  # a real family, ordered by size, is one line Haiku -> Sonnet
            assert [len(ln.get_xdata()) for ln in joining_lines(ax)] == [2]
            assert [t.get_text().split("\n")[0] for t in ax.get_xticklabels()] == ["Haiku", "Sonnet"]
        for ax in fig.axes:
            assert all("\nn=" in t.get_text() for t in ax.get_xticklabels())
        if ("E", "Efficiency E") in metric_list:  # the grinder never builds: E has no episodes, and says so
            assert "grinder\nn=0" in texts(scripted[metric_list.index(("E", "Efficiency E"))])
        assert texts_outside(fig) == []
    assert plots.plot_deep({m: {**s, **{k: s["R"] for k in ("R1", "R2")},
                                **{f"{k}_ci": s["R_ci"] for k in ("R1", "R2")},
                                "step_counts": {"R1": [s["counts"]["hold_build"], s["counts"]["hold"]],
                                                "R2": [s["counts"]["hold_build"], s["counts"]["hold"]]}}
                            for m, s in models.items()}, tmp_path / "deep.png").read_bytes()[:8] == PNG
