"""The bor suite end to end on small registries (real catalog items, real scorers), resume, pool input,
and the BFCL loader on files in the bfcl-eval data format."""

import json
import math

import pytest

from smith.entry import eval_config
from smith.evals.bor import run
from smith.evals.bor.benchmarks import bfcl_benchmark, bfcl_data_dir, smith_benchmark
from smith.pool import PoolEntry, ToolPool
from smith.toolspec import ToolSpec

SMALL = [
    "suite=bor", "limit=60", "suite.queries_per_category=4", "suite.sizes=[20,60]", "suite.scorers=[bm25,random]",
    "suite.fixed_k=[1,5,20]", "suite.agents=[q-bor,q-f1]", "suite.q_epochs=3", "suite.bootstrap=100",
    "suite.bfcl_data=/nonexistent/bfcl",  # the bfcl benchmark is skipped with its reason, the rest runs
]  # fmt: skip


def test_suite_end_to_end_and_resume(tmp_path):
    out = tmp_path / "bor"
    cfg = eval_config([*SMALL, f"output_dir={out}"])
    summary = run(cfg)
    assert summary["output_dir"] == str(out)
    assert summary["details"]["benchmarks"]["smith"]["source"] == "rg-docstrings"
    assert summary["details"]["benchmarks"]["smith"]["core_tools"] == 20  # one tool per catalog category
    details = summary["details"]
    assert "not a bfcl-eval data dir" in details["skipped"]["bfcl"] and "bfcl" not in details["benchmarks"]
    rows = [r for r in summary["details"]["rows"] if r["benchmark"] == "smith"]
    # N=20: fixed-1, fixed-5, fixed-20 + 2 agents; N=60: the same; for 2 scorers
    assert len(rows) == 2 * 2 * 5
    for r in rows:
        assert 0 <= r["coverage"] <= 1 and 1 <= r["mean_depth"] <= r["N"]
        # summary.json holds null for -inf bits: no hit (in the run, or in a resample for the lower end)
        bor, lo, hi = (-math.inf if r[k] is None else r[k] for k in ("bor", "bor_lo", "bor_hi"))
        assert lo <= bor <= hi and (bor > -math.inf or r["coverage"] == 0)
    full = next(r for r in rows if r["N"] == 20 and r["policy"] == "fixed-20")
    assert full["coverage"] == 1.0 and full["bor"] == 0.0  # the whole registry is exactly chance
    bm25 = {r["policy"]: r for r in rows if r["N"] == 60 and r["scorer"] == "bm25"}
    rand = {r["policy"]: r for r in rows if r["N"] == 60 and r["scorer"] == "random"}
    assert bm25["fixed-5"]["bor"] > rand["fixed-5"]["bor"]  # a real scorer beats the no-signal one
    assert (out / "summary.json").is_file() and (out / "results.md").read_text().startswith("| benchmark |")
    assert (out / "bor_smith.png").stat().st_size > 10_000
    assert (out / "retrievers" / "smith-N60-bm25-q-bor" / "retriever.json").is_file()
    per_query = [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]
    assert len(per_query) == sum(r["n"] for r in rows)
    before = (out / "cells.jsonl").read_text()
    again = run(cfg)  # everything logged: nothing recomputed, same rows
    assert (out / "cells.jsonl").read_text() == before
    assert again["details"]["rows"] == summary["details"]["rows"]


def test_suite_on_a_smith_pool_file(tmp_path):
    pool = ToolPool()
    described = {
        "lcm": "Least common multiple of the integers listed in the question.",
        "spell_backward": "Spell the word named in the question backward, letter by letter.",
        "caesar_cipher": "Decrypt Caesar-shifted text by trying all 25 shifts and keeping the most English one.",
    }
    for cat, desc in described.items():
        schema = {"name": "solve", "description": desc,
                  "parameters": {"type": "object", "properties": {"question": {"type": "string"}}}}
        pool.admit(PoolEntry(cat, ToolSpec(f"def solve(question):\n    return {cat!r}\n", schema, "solve"), r_eval=1.0))
    path = pool.save(tmp_path / "run")
    bench = smith_benchmark(4, 0, pool=path, categories=list(described))
    assert bench.source == f"pool:{path}" and bench.core == 3 and len(bench.queries) == 12
    reg = bench.registry(40, seed=0)
    assert len(reg.documents) == 40 and all(len(q.relevant) == 1 for q in reg.queries)
    cats = [q.group for q in reg.queries]
    assert {reg.documents[q.relevant[0]].description for q in reg.queries} == set(described.values())
    assert cats.count("lcm") == 4
    summary = run(eval_config([
        "suite=bor", f"output_dir={tmp_path / 'out'}", f"suite.pool={path}",
        "suite.categories=[lcm,spell_backward,caesar_cipher]", "suite.queries_per_category=4",
        "suite.benchmarks=[smith]", "suite.sizes=[40]", "suite.scorers=[bm25]", "suite.fixed_k=[1,3]",
        "suite.agents=[q-bor]", "suite.q_epochs=2", "suite.bootstrap=50",
    ]))  # fmt: skip
    assert {r["policy"] for r in summary["details"]["rows"]} == {"fixed-1", "fixed-3", "q-bor"}


def _write_bfcl(root):
    (root / "possible_answer").mkdir(parents=True)
    area = {"name": "calculate_triangle_area", "description": "Calculate the area of a triangle given base and height.",
            "parameters": {"type": "dict", "properties": {"base": {"type": "integer"}}, "required": ["base"]}}
    fact = {"name": "math.factorial", "description": "Calculate the factorial of a given number.",
            "parameters": {"type": "dict", "properties": {"number": {"type": "integer"}}}}
    simple = [
        {"id": "simple_python_0", "question": [[{"role": "user", "content": "Area of a triangle, base 10, height 5?"}]],
         "function": [area]},
        {"id": "simple_python_1", "question": [[{"role": "user", "content": "Factorial of 5?"}]], "function": [fact]},
    ]
    multiple = [{"id": "multiple_0", "question": [[{"role": "user", "content": "What is 6 factorial?"}]],
                 "function": [area, fact]}]
    answers = {
        "BFCL_v4_simple_python.json": [{"id": "simple_python_0", "ground_truth": [{"calculate_triangle_area": {}}]},
                                       {"id": "simple_python_1", "ground_truth": [{"math.factorial": {}}]}],
        "BFCL_v4_multiple.json": [{"id": "multiple_0", "ground_truth": [{"math.factorial": {"number": [6]}}]}],
    }
    for name, rows in (("BFCL_v4_simple_python.json", simple), ("BFCL_v4_multiple.json", multiple)):
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
        (root / "possible_answer" / name).write_text("".join(json.dumps(r) + "\n" for r in answers[name]))


def test_bfcl_loader_dedupes_function_docs_and_labels_ground_truth(tmp_path):
    _write_bfcl(tmp_path)
    bench = bfcl_benchmark(tmp_path)
    assert [d.name for d in bench.documents] == ["calculate_triangle_area", "math.factorial"]
    assert [(q.qid, q.relevant, q.group) for q in bench.queries] == [
        ("simple_python_0", (0,), "BFCL_v4_simple_python"),
        ("simple_python_1", (1,), "BFCL_v4_simple_python"),
        ("multiple_0", (1,), "BFCL_v4_multiple"),
    ]
    assert bench.queries[2].text == "What is 6 factorial?"
    with pytest.raises(FileNotFoundError, match="not a bfcl-eval data dir"):
        bfcl_benchmark(tmp_path / "possible_answer")


def test_bfcl_benchmark_from_the_installed_package_data():
    try:
        data = bfcl_data_dir()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    bench = bfcl_benchmark(data)
    assert len(bench.documents) > 370  # the paper's BFCL registry had 370 tools; v4 simple + multiple hold more
    assert len(bench.queries) == 600  # 400 simple_python + 200 multiple, every one with its ground-truth doc
    assert all(bench.documents[i].name for q in bench.queries for i in q.relevant)
    reg = bench.registry(100, seed=0)
    assert len(reg.documents) == 100 and reg.queries and all(q.relevant for q in reg.queries)


def test_figure_legend_inside_the_canvas_n_in_titles_and_scorers_apart():
    """One registry size makes the narrowest figure: its legend must still fit, each panel says how many queries
    it rests on, and two scorers' fixed-K lines differ in style, not only in colour (they meet at K = N)."""
    from smith.evals.bor import bor_figure

    from .figures import texts_outside

    rows = [{"benchmark": "smith", "N": 20, "scorer": s, "policy": p, "n": 22, "mean_depth": d, "bor": b,
             "coverage": c}
            for s in ("bm25", "random")
            for p, d, b, c in (("fixed-1", 1, 3.9, 0.77), ("fixed-5", 5, 1.6, 0.77), ("fixed-20", 20, 0.0, 1.0),
                               ("q-bor", 2.0, 3.0, 0.77), ("q-f1", 1.2, 3.7, 0.77))]
    fig = bor_figure(rows, "smith")
    assert texts_outside(fig) == []
    assert fig.axes[0].get_title() == "smith, N=20, n=22 queries"
    fixed = [ln for ln in fig.axes[0].get_lines() if ln.get_label().endswith("fixed-K")]
    assert len(fixed) == 2 and fixed[0].get_linestyle() != fixed[1].get_linestyle()
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert {"1", "10"} <= set(ticks) and not any("$" in t for t in ticks)  # plain K, not 10^0, 10^1
