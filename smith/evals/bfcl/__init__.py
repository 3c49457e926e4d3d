"""BFCL v4 (Berkeley Function Calling Leaderboard) through the bfcl-eval package, offline categories only.

    python eval.py suite=bfcl model=SPEC [suite.categories=[simple_python,irrelevance]] [limit=N] [output_dir=D]

SMITH paper, "Generalization to external tool-calling": BFCL v4 overall accuracy of base vs SMITH models.
A local SPEC (tiny, a model dir, a LoRA checkpoint, vllm:<path>) is served by smith itself on an
OpenAI-compatible endpoint (smith.models.serve) for the duration of the run; `openai:<base_url>#<model>`
uses the given endpoint. bfcl-eval runs in its own venv (see smith/evals/bfcl/venv.py for why), with
BFCL_PROJECT_ROOT = D/bfcl so its results and scores land next to the suite's summary.

Offline categories: AST (simple_python, simple_java, simple_javascript, multiple, parallel,
parallel_multiple), irrelevance, live_*, multi_turn_*, memory_kv and memory_rec_sum. web_search needs a
search API and memory_vector downloads an embedding model, so both are refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from smith.errors import ConfigError
from smith.evals.suite import Suite

from .config import BfclEval

OFFLINE = (
    "simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple", "irrelevance",
    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "live_relevance",
    "multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context",
    "memory_kv", "memory_rec_sum",
)
ONLINE = {"web_search_base": "needs a SerpAPI key and the internet", "web_search_no_snippet": "needs a SerpAPI key "
          "and the internet", "memory_vector": "downloads the all-MiniLM-L6-v2 embedding model from the hub"}
# BFCL's sections, as its leaderboard groups categories (bfcl_eval.eval_checker.eval_runner_helper)
SECTIONS = {
    "Non-Live AST": ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple"),
    "Live AST": ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"),
    "Irrelevance": ("irrelevance", "live_irrelevance"),
    "Relevance": ("live_relevance",),
    "Multi-Turn": ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"),
    "Memory": ("memory_kv", "memory_rec_sum"),
}
RUNNER = Path(__file__).with_name("runner.py")
REGISTRY = "smith-FC"  # bfcl-eval files results under this name; no "_" or "/" (it maps "_" back to "/")


def categories(requested: list[str]) -> list[str]:
    """Validate the requested categories; `all` or an empty list means every offline one."""
    if not requested or list(requested) == ["all"]:
        return list(OFFLINE)
    bad = {c: ONLINE[c] for c in requested if c in ONLINE}
    if bad:
        raise ConfigError(f"BFCL categories {sorted(bad)} are not offline ({'; '.join(bad.values())}); "
                          f"choose from {', '.join(OFFLINE)}")
    unknown = sorted(set(requested) - set(OFFLINE))
    if unknown:
        raise ConfigError(f"unknown BFCL categories {unknown}; choose from {', '.join(OFFLINE)}")
    return list(dict.fromkeys(requested))


def check(cfg: BfclEval) -> list[tuple[str, str]]:
    """bfcl's own settings and its venv, before anything loads; returns the model SPECs the run loads."""
    categories(cfg.suite.categories or [])
    bfcl_python(cfg)
    spec = cfg.model
    if spec.startswith("scripted:"):
        raise ConfigError(f"suite bfcl has no scripted agents ({spec}); serve one and pass openai:<url>#<name>")
    return [("model", spec)]


def bfcl_python(cfg: BfclEval) -> Path:
    """The python of the bfcl-eval venv: suite.python, else the default venv; a clear error when absent."""
    from .venv import DEFAULT_DIR, has_bfcl, python_of

    python = Path(cfg.suite.python) if cfg.suite.python else python_of(DEFAULT_DIR)
    if not has_bfcl(python):
        raise ConfigError(f"no bfcl-eval at {python}; create its venv with `.venv/bin/python -m "
                          "smith.evals.bfcl.venv` (or set suite.python to a python with bfcl-eval==2026.3.23)")
    return python


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def sections(acc: dict[str, float], counts: dict[str, int]) -> dict[str, float]:
    """BFCL's section accuracies over the categories that were run, with its rules: Non-Live AST averages
    simple (itself the mean of simple_python/java/javascript), multiple, parallel and parallel_multiple; Live AST
    weighs its categories by entry count; the other sections are plain means."""
    out: dict[str, float | None] = {}
    simple = _mean([acc[c] for c in SECTIONS["Non-Live AST"][:3] if c in acc])
    out["Non-Live AST"] = _mean([a for a in [simple, *(acc.get(c) for c in SECTIONS["Non-Live AST"][3:])]
                                 if a is not None])
    live = [c for c in SECTIONS["Live AST"] if c in acc]
    out["Live AST"] = (sum(acc[c] * counts[c] for c in live) / sum(counts[c] for c in live)
                       if live and sum(counts[c] for c in live) else None)
    for name in ("Irrelevance", "Relevance", "Multi-Turn", "Memory"):
        out[name] = _mean([acc[c] for c in SECTIONS[name] if c in acc])
    return {k: v for k, v in out.items() if v is not None}


def summarize(scores: dict[str, Any]) -> dict[str, Any]:
    """Per-category accuracy, BFCL's section accuracies over the categories run, their mean, and tokens (mean
    input / output tokens per generated entry, all turns of it)."""
    cats = {c: v for c, v in scores["categories"].items() if "accuracy" in v}
    acc = {c: float(v["accuracy"]) for c, v in cats.items()}
    gen = sum(v["generated"] for v in scores["categories"].values())
    return {
        "categories": scores["categories"],
        "sections": sections(acc, {c: int(v["total_count"]) for c, v in cats.items()}),
        "mean_accuracy": _mean(list(acc.values())),
        "entries": sum(int(v["total_count"]) for v in cats.values()),
        "tokens": {"input": sum(v["input_tokens"] for v in scores["categories"].values()) / gen if gen else None,
                   "output": sum(v["output_tokens"] for v in scores["categories"].values()) / gen if gen else None},
        "bfcl_overall_csv": scores.get("overall_csv"),
    }


def metrics(details: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Results-schema metrics: `<category>/accuracy` (Wilson, n = entries), `section/<name>` and `mean_accuracy`
    (BFCL's aggregation: no interval), `tokens/input` and `tokens/output` (mean per generated entry)."""
    from smith.evals.common import metric, wilson_metric

    cats = {c: v for c, v in details["categories"].items() if "accuracy" in v}
    out = {f"{c}/accuracy": wilson_metric(int(v["correct_count"]), int(v["total_count"])) for c, v in cats.items()}
    out.update({f"section/{name}": metric(v, n=sum(int(cats[c]["total_count"]) for c in SECTIONS[name] if c in cats))
                for name, v in details["sections"].items()})
    out["mean_accuracy"] = metric(details["mean_accuracy"], n=details["entries"])
    generated = sum(int(v["generated"]) for v in details["categories"].values())
    for kind in ("input", "output"):
        out[f"tokens/{kind}"] = metric(details["tokens"][kind], n=generated, unit="tokens per item")
    return out


def run(cfg: BfclEval) -> dict:
    """Serve or reach the model, run bfcl-eval in its venv, write summary.json, results.md and
    accuracy_by_category.png."""
    from smith.evals.common import markdown_table, output_dir, write_summary
    from smith.models import openai_target

    from .plots import plot_accuracy

    s = cfg.suite
    cats = categories(s.categories or [])
    python = bfcl_python(cfg)
    out = output_dir(cfg).resolve()
    root = out / "bfcl"
    root.mkdir(exist_ok=True)
    spec = cfg.model
    with ExitStack() as stack:
        if spec.startswith("openai:"):
            base_url, served = openai_target(spec)
        else:
            from smith.models import load_backend
            from smith.models.serve import build_app, running_app

            served = s.served_name
            app = build_app(load_backend(spec, cfg), served, s.max_tokens)
            base_url = stack.enter_context(running_app(app, port=s.port)) + "/v1"
        env = {**os.environ, "BFCL_PROJECT_ROOT": str(root), "OPENAI_BASE_URL": base_url,
               "OPENAI_API_KEY": s.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
               "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
        cmd = [str(python), str(RUNNER), "--registry", REGISTRY, "--served-name", served, "--categories", *cats,
               "--threads", str(s.threads), "--temperature", str(s.temperature),
               "--out", str(root / "scores.json")]
        if (limit := cfg.limit) is not None:
            cmd += ["--limit", str(limit)]
        done = subprocess.run(cmd, env=env, cwd=str(root), stdout=sys.stderr, check=False,
                              timeout=float(s.timeout_s) if s.timeout_s else None)
        if done.returncode != 0:
            raise RuntimeError(f"bfcl-eval failed (exit {done.returncode}); its output is above, its files in {root}")
    details = {"served_name": served, **summarize(json.loads((root / "scores.json").read_text()))}
    summary = write_summary(out, cfg, metrics(details), details,
                            label=s.label or spec.split("#")[-1].rstrip("/").split("/")[-1])
    plot_accuracy(details["categories"], details["sections"], f"BFCL v4: {summary['label']}",
                  out / "accuracy_by_category.png")

    def per_entry(v: dict[str, Any]) -> str | None:
        gen = v.get("generated")
        return f"{v['input_tokens'] / gen:,.0f} / {v['output_tokens'] / gen:,.0f}" if gen else None

    rows = [{"category": c, "accuracy": 100 * v["accuracy"] if "accuracy" in v else None,
             "correct": v.get("correct_count"), "total": v.get("total_count"), "I/O tokens": per_entry(v)}
            for c, v in details["categories"].items()]
    rows += [{"category": f"**{name}**", "accuracy": 100 * v} for name, v in details["sections"].items()]
    (out / "results.md").write_text(f"# BFCL v4: {summary['label']}\n\n" + markdown_table(
        rows, ["category", "accuracy", "correct", "total", "I/O tokens"], floatfmt=".1f")
        + "\nOffline categories only; section rows follow BFCL's own aggregation over the categories run (BFCL's "
          "data_overall.csv, which counts categories not run as 0, is kept in summary.json's details as "
          "bfcl_overall_csv). I/O tokens: mean input / output tokens per generated entry.\n")
    return summary


SUITE = Suite("bfcl", check, run, BfclEval)  # the suite interface (smith.evals)
