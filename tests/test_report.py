"""`smith report` renders paper-style tables and plots from fixture logs written by real runs of the suites
(tests/fixtures/report/make_fixtures.py), and every number in it is the one on disk."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from smith.curves import PANELS, plot_curves, read_metrics, series
from smith.evals.report import build_report, discover, pool_growth
from smith.evals.rg.metrics import paper_row

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "report"


def _summaries(suite: str) -> list[dict]:
    out = []
    for path in sorted(FIXTURES.rglob("summary.json")):
        data = json.loads(path.read_text())
        if data.get("suite") == suite:
            out.append(data)
    return out


def test_discover_finds_evals_and_runs():
    found = discover([FIXTURES])
    suites = sorted(s["suite"] for _, s in found.evals)
    assert suites.count("rg") >= 2 and "bfcl" in suites
    assert len(found.runs) >= 1 and all((r / "metrics.jsonl").is_file() for r in found.runs)


def test_report_tables_carry_the_logged_numbers(tmp_path):
    md_path = build_report([FIXTURES], tmp_path / "out")
    md = md_path.read_text()
    assert "## Reasoning-gym (SMITH paper, main table)" in md
    assert "| Method | Seen Avg | Logic | Game | Algebra | Arith | Algo | Avg | I/O tokens |" in md
    for s in _summaries("rg"):
        row = paper_row(s)
        cells = " | ".join("" if v is None else str(v) for v in row.values())
        assert f"| {s['label']} | {cells} |" in md, s["label"]
    bfcl = _summaries("bfcl")
    assert "## BFCL v4 (offline categories)" in md
    for s in bfcl:
        assert f"{100 * s['metrics']['mean_accuracy']['value']:.1f}" in md
        tokens = s["metrics"]["tokens/input"]["value"], s["metrics"]["tokens/output"]["value"]
        assert f"| {tokens[0]:,.0f} / {tokens[1]:,.0f} |" in md  # per entry, as rg's per question
    assert md.count("I/O tokens: mean input / output tokens per item") == 2  # one meaning, said under both tables
    run = discover([FIXTURES]).runs[0]
    last = read_metrics(run)[-1]
    assert f"## Training run `{run.name}`" in md and f"| {last['step']} |" in md
    for png in ("accuracy_by_group.png", f"curves-{run.name}.png", f"pool-{run.name}.png"):
        assert (tmp_path / "out" / png).stat().st_size > 5000, png
        assert f"({png})" in md
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.startswith("<!doctype html>") and html.count("<table>") >= 3
    assert '<img src="accuracy_by_group.png"' in html


def test_cli_writes_report(tmp_path):
    from smith.cli import main

    main(["report", str(FIXTURES), "--out", str(tmp_path / "cli")])
    assert (tmp_path / "cli" / "report.md").is_file() and (tmp_path / "cli" / "report.html").is_file()


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        build_report([tmp_path / "missing"], tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no summary\.json or metrics\.jsonl"):
        build_report([tmp_path / "empty"], tmp_path / "out")


def test_pool_growth_falls_back_to_checkpoint_pools(tmp_path):
    """Without pool/size keys in metrics.jsonl the curve comes from the checkpoints' saved pools."""
    run = discover([FIXTURES]).runs[0]
    pools = sorted(run.glob("checkpoint-*/tool_pool.json"))
    if not pools:
        pytest.skip("the fixture run saved no checkpoint pools")
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    rows = [{k: v for k, v in r.items() if not k.startswith("pool/size/")} for r in read_metrics(copy)]
    growth = pool_growth(copy, rows)
    last = json.loads(pools[-1].read_text())["entries"]
    step = float(pools[-1].parent.name.split("-")[-1])
    for cat in {e["category"] for e in last}:
        steps, sizes = growth[cat]
        assert sizes[steps.index(step)] == sum(e["category"] == cat for e in last)


def test_series_skips_missing_torn_and_replayed_rows(tmp_path):
    """A resumed run logs its replayed steps again (the later row wins); TRL's end-of-run row has no loss."""
    (tmp_path / "metrics.jsonl").write_text(
        '{"step": 1, "loss": 0, "rewards/format/mean": 0.25}\n{"step": 2, "loss": 0}\n'
        '{"step": 2, "loss": 0, "rewards/format/mean": NaN}\n{"step": 3, "loss": 0, "rewards/format/mean": 0.5}\n'
        '{"step": 3, "loss": 0, "rewards/format/mean": 0.75}\n{"step": 3, "train_loss": 0.1}\n{"ste')
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert series(rows, "rewards/format/mean") == ([1.0, 3.0], [0.25, 0.75])
    md = build_report([tmp_path], tmp_path / "out").read_text()
    assert "Step 3, the last of 3 logged steps:" in md


def test_a_run_trained_several_times_on_each_batch_reports_its_last_rollout(tmp_path):
    """With `dapo.updates_per_batch=2` only steps 1 and 3 roll out (and log rewards); step 4 only updates."""
    rows = [{"step": s, "loss": 0, **({"reward": 1.0, "rewards/use/mean": s / 10} if s % 2 else {})}
            for s in (1, 2, 3, 4)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    md = build_report([tmp_path], tmp_path / "out").read_text()
    assert "Step 3, the last of 2 steps that rolled out a batch (4 logged):" in md and "| 3 | 0.300 |" in md


def test_the_report_says_where_each_roles_tokens_and_seconds_went(tmp_path):
    """Issue 32: tokens/<role>/<engine> and time/<role> per step, averaged over the steps that rolled out."""
    rows = [{"step": 1, "loss": 0.1, "reward": 0.5, "tokens/policy/vllm": 300.0, "time/policy": 1.0,
             "tokens/evaluator/hf": 900.0, "time/evaluator": 6.0, "tokens/judge/hf": 100.0, "time/judge": 1.0},
            {"step": 2, "loss": 0.1, "reward": 0.5, "tokens/policy/vllm": 500.0, "time/policy": 3.0,
             "tokens/evaluator/hf": 1100.0, "time/evaluator": 8.0, "tokens/judge/hf": 100.0, "time/judge": 1.0},
            {"step": 3, "loss": 0.1}]  # an update-only step (dapo.updates_per_batch > 1) is not averaged in
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    md = build_report([tmp_path], tmp_path / "out").read_text()
    assert "| role | engine | tokens | seconds | tokens/s | share |" in md
    assert "| policy | vllm | 400.00 | 2.00 | 200.00 | 0.20 |" in md
    assert "| evaluator | hf | 1000.00 | 7.00 | 142.86 | 0.70 |" in md
    assert "| judge | hf | 100.00 | 1.00 | 100.00 | 0.10 |" in md


def test_curves_draw_every_panel_a_real_run_logs(tmp_path):
    """The fixture run is a real tiny run: every panel's keys are in its rows, so none is drawn from nothing."""
    rows = read_metrics(discover([FIXTURES]).runs[0])
    logged = {k for r in rows for k in r}
    assert [k for _, keys in PANELS for k, _ in keys if k not in logged] == []
    path = plot_curves(rows, tmp_path / "curves.png", "fixture")
    from matplotlib.image import imread

    height, width = imread(path).shape[:2]
    rows_of_panels = -(-len(PANELS) // 4)
    assert rows_of_panels >= 3 and height > 0.8 * 2.7 * 110 * rows_of_panels and width > 1400
    assert plot_curves([], tmp_path / "none.png") is None
