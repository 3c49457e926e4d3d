"""`smith report`'s paper tables over a set of runs: the main table's method rows in the paper's order with
intervals, and the out-of-domain table (TabMWP-Hard, GQA rows; a column per method label) from real tabmwp /
gqa runs on the fixtures of tests/fixtures/ood, both as Markdown and PNG."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from smith.entry import eval_config
from smith.evals.report import build_report, by_method, ood_table
from tests.test_eval_ood import FILES, scripted, writer

REPORT = Path(__file__).resolve().parent / "fixtures" / "report"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model_dir) -> Path:
    """A directory of runs: the report fixtures' rg runs (CoT, build+use) plus LATM relabelled from the
    build+use one, and per OOD suite a "CoT" run (tiny model) and a "SMITH" run (reference tool writer)."""
    from smith.evals import gqa, tabmwp

    root = tmp_path_factory.mktemp("runs")
    for d in ("rg-cot-tiny", "rg-build_use-reference"):
        shutil.copytree(REPORT / d, root / d)
    latm = json.loads((REPORT / "rg-build_use-reference" / "summary.json").read_text())
    (root / "rg-latm").mkdir()
    relabelled = {**latm, "label": "LATM", "details": {**latm["details"], "mode": "latm"}}
    (root / "rg-latm" / "summary.json").write_text(json.dumps(relabelled))
    for name, module in (("tabmwp", tabmwp), ("gqa", gqa)):
        base = [f"suite={name}", f"tiny_dir={tiny_model_dir}", *FILES[name], "suite.bootstrap=50",
                "suite.sandbox.workers=2"]
        module.run(eval_config([*base, "model=tiny", "suite.label=CoT", "limit=1", "suite.cot_max_new_tokens=8",
                                f"output_dir={root / (name + '-cot')}"]))
        module.run(eval_config([*base, "model=writer", "mode=build_use", "suite.label=SMITH",
                                f"output_dir={root / (name + '-smith')}"]),
                   {"writer": scripted(writer, tiny_model_dir, "writer")})
    return root


def test_ood_table_has_a_row_per_benchmark_and_a_column_per_method(runs):
    from smith.evals.report import discover

    rows, cols = ood_table(discover([runs]).evals)
    assert cols == ["Task", "CoT", "SMITH"]
    assert [r["Task"] for r in rows] == ["TabMWP-Hard", "GQA"]
    for row, name in zip(rows, ("tabmwp", "gqa"), strict=True):
        smith = json.loads((runs / f"{name}-smith" / "summary.json").read_text())
        cot = json.loads((runs / f"{name}-cot" / "summary.json").read_text())
        overall, base = smith["metrics"]["overall"], cot["metrics"]["overall"]
        assert row["SMITH"] == "100.0±0.0" and (overall["value"], overall["se"], overall["lo"], overall["hi"]) == (
            1.0, 0.0, 1.0, 1.0) and overall["interval"] == "bootstrap-95"
        assert row["CoT"] == f"{100 * base['value']:.1f}±{100 * base['se']:.1f}"


def test_report_renders_both_paper_tables_as_markdown_and_png(runs, tmp_path):
    md = build_report([runs], tmp_path / "out").read_text()
    main = md.split("## Reasoning-gym (SMITH paper, main table)\n\n")[1].split("\n\n")[0]
    order = [line.split(" | ")[0].lstrip("| ") for line in main.splitlines() if line.startswith("| ")][1:]
    assert order == ["tiny (CoT)", "LATM", "reference (build+use)"]  # CoT, baselines, then SMITH's runs
    assert "| LATM | 100.0±0.0 |" in main
    assert "## Out-of-domain generalization (SMITH paper)" in md and "| Task | CoT | SMITH |" in md
    assert "| TabMWP-Hard | " in md and "| GQA | " in md
    assert "## Other suites" not in md
    for png in ("main_table.png", "ood_table.png"):
        assert (tmp_path / "out" / png).stat().st_size > 3000 and f"({png})" in md


def test_method_order_follows_the_paper():
    modes = ("build_use", "ktce", "cot", "pool", "latm", "trove", "craft")
    runs = [(m, Path(m), {"details": {"mode": m}}) for m in modes]
    assert [m for m, _, _ in by_method(runs)] == ["cot", "latm", "craft", "trove", "ktce", "build_use", "pool"]
