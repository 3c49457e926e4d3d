"""`smith report` renders paper-style tables and plots from fixture logs written by real runs of the suites
(tests/fixtures/report/make_fixtures.py), and every number in it is the one on disk."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from smith.evals.report import build_report, discover, pool_growth, read_metrics, series
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
        assert f"{100 * s['mean_accuracy']:.1f}" in md
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


def test_series_skips_missing_and_torn_rows(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(
        '{"step": 1, "rewards/format/mean": 0.25}\n{"step": 2}\n{"step": 3, "rewards/format/mean": 0.5}\n{"ste')
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert series(rows, "rewards/format/mean") == ([1.0, 3.0], [0.25, 0.5])
