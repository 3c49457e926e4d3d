"""`python eval.py suite=bor`: tool retrieval over registries of 20 to several hundred tools, scored by
Bits-over-Random (BoR paper, ../shared/seeds/001_b84c5ac8cb1b902c.txt).

For each benchmark, registry size N and scorer, the suite ranks every query's registry once, trains the
depth agents (tabular Q-learning and a DQN on the BoR reward, Q-learning on the F1 ablation) on the
training queries, and reports on the held-out ones, per policy (fixed-K baselines and agents): coverage
P_obs, mean depth, mean P_rand, aggregate BoR with a bootstrap 95% interval, and coverage on medium
(right tool ranked 2-5) and hard (6-20) queries (the paper's section 3.1 breakdown). No language model is
involved (`model=` is ignored): this suite measures retrieval, not the downstream tool choice.
Benchmarks are built by `benchmarks`, figures drawn by `plots`.

The package also re-exports the metric (`metric`), the chance baselines (`smith.pool.retrieval.chance`),
the log audit (`auditing`) and its loaders (`logs`); `python -m smith.evals.bor` is their command line (`cli`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from smith.errors import ConfigError
from smith.evals.bor.auditing import AuditResult, QueryRecord, audit
from smith.evals.bor.benchmarks import Benchmark, bfcl_benchmark, smith_benchmark, split_of
from smith.evals.bor.config import BorConfig, BorEval
from smith.evals.bor.logs import from_csv, from_jsonl
from smith.evals.bor.metric import (
    bits_over_random,
    bor_ceiling,
    bor_interval,
    enrichment_factor,
    log_ratio_bits,
    p_rand,
    per_query_bits,
)
from smith.evals.bor.plots import bor_figure, write_plots
from smith.evals.common import EpisodeLog, check_pool, markdown_table, metric, output_dir, wilson_metric, write_summary
from smith.evals.suite import Suite
from smith.pool.retrieval import (
    AdaptiveRetriever,
    DepthPolicy,
    DQNAgent,
    FixedK,
    QLearningAgent,
    Ranking,
    as_text,
    make_scorer,
    shortlist_outcome,
)
from smith.pool.retrieval.chance import collapse_lambda, random_recall_baseline, random_success_at_least_m

__all__ = [
    "AuditResult",
    "QueryRecord",
    "audit",
    "bits_over_random",
    "bor_ceiling",
    "bor_figure",
    "bor_interval",
    "collapse_lambda",
    "enrichment_factor",
    "from_csv",
    "from_jsonl",
    "log_ratio_bits",
    "p_rand",
    "per_query_bits",
    "random_recall_baseline",
    "random_success_at_least_m",
    "run",
]

AGENTS = ("q-bor", "q-f1", "dqn-bor", "dqn-f1")
BENCHMARKS: dict[str, Callable[[BorConfig, int], Benchmark]] = {  # suite.benchmarks: name -> its registries
    "smith": lambda s, seed: smith_benchmark(s.queries_per_category, seed, s.pool, s.categories),
    "bfcl": lambda s, seed: bfcl_benchmark(s.bfcl_data),
}
OPTIONAL = ("bfcl",)  # skipped, with a line, when its files are missing
COLUMNS = ["benchmark", "N", "scorer", "policy", "n", "coverage", "mean_depth", "mean_p_rand", "bor", "bor_lo",
           "bor_hi", "cov_medium", "cov_hard"]  # fmt: skip


def check(cfg: BorEval) -> list[tuple[str, str]]:
    """bor's own settings, before anything runs; `model` is not used, so no SPECs."""
    from smith.pool.retrieval.scorers import SCORERS

    s = cfg.suite
    for what, given, known in (("suite.benchmarks", s.benchmarks, BENCHMARKS), ("suite.scorers", s.scorers, SCORERS),
                               ("suite.agents", s.agents, AGENTS)):
        unknown = [x for x in given if x not in known]
        if unknown:
            raise ConfigError(f"{what} has unknown entries {unknown}; known: {', '.join(known)}")
    if s.categories:
        from smith.tasks import load_catalog

        load_catalog().check_names(s.categories, "suite.categories")
    if s.pool:
        check_pool(s.pool, "suite.pool")
    return []


def _agent(name: str, s: BorConfig, seed: int) -> QLearningAgent | DQNAgent:
    if name not in AGENTS:
        raise ValueError(f"agent '{name}' not found; known: {', '.join(AGENTS)}")
    kind, reward = name.split("-")
    if kind == "q":
        return QLearningAgent(reward, s.step_cost, s.max_depth)
    return DQNAgent(reward, s.step_cost, s.max_depth, seed=seed)


def _fit(agent: QLearningAgent | DQNAgent, train: list[Ranking], s: BorConfig, seed: int) -> None:
    if isinstance(agent, QLearningAgent):
        agent.fit(train, epochs=s.q_epochs, seed=seed, progress=True)
    else:
        agent.fit(train, updates=s.dqn_updates, progress=True)


def _benchmarks(s: BorConfig, seed: int) -> tuple[list[Benchmark], dict[str, str]]:
    built, skipped = [], {}
    for name in s.benchmarks:
        if name not in BENCHMARKS:
            raise ValueError(f"benchmark '{name}' not found; known: {', '.join(BENCHMARKS)}")
        try:
            built.append(BENCHMARKS[name](s, seed))
        except FileNotFoundError as e:
            if name not in OPTIONAL:
                raise
            skipped[name] = str(e)
            print(f"bor: skipping benchmark {name}: {e}")
    return built, skipped


def _cell_row(key: dict[str, Any], outcomes: list[dict[str, float]], firsts: list[int | None], n_boot: int) -> dict:
    hits = [o["hit"] for o in outcomes]
    prs = [o["p_rand"] for o in outcomes]
    ci = bor_interval(hits, prs, n_resamples=n_boot)

    def band(lo: int, hi: int) -> float | None:
        sel = [o["hit"] for o, f in zip(outcomes, firsts, strict=True) if f is not None and lo <= f <= hi]
        return float(np.mean(sel)) if sel else None

    return {
        **key,
        "n": len(outcomes),
        "coverage": float(np.mean(hits)),
        "mean_depth": float(np.mean([o["depth"] for o in outcomes])),
        "mean_p_rand": float(np.mean(prs)),
        "bor": bits_over_random(hits, prs),
        "bor_lo": ci["lo"],
        "bor_hi": ci["hi"],
        "cov_medium": band(2, 5),
        "cov_hard": band(6, 20),
    }


def _sample(queries: list, limit: int | None, seed: int) -> list:
    """Up to `limit` queries, a seeded hash order so every category keeps its share on average."""
    if not limit or len(queries) <= limit:
        return queries
    return sorted(queries, key=lambda q: hashlib.sha256(f"limit/{seed}/{q.qid}".encode()).digest())[:limit]


def run(cfg: BorEval) -> dict:
    s, seed = cfg.suite, cfg.seed
    out = output_dir(cfg)
    cells = EpisodeLog(out / "cells.jsonl", key="cell")
    per_query = EpisodeLog(out / "queries.jsonl", key="key")
    benches, skipped = _benchmarks(s, seed)
    scorers = {name: make_scorer(name) for name in s.scorers}
    for bench in benches:
        sizes = [n for n in s.sizes if n <= bench.core + len(bench.distractors)] or [bench.core]
        for N in sizes:
            reg = bench.registry(N, seed)
            queries = _sample(reg.queries, cfg.limit, seed)
            split = {q.qid: split_of(q.qid, s.train_fraction, seed) for q in queries}
            policies: list[str] = [f"fixed-{k}" for k in s.fixed_k if k <= N] + list(s.agents)
            doc_texts = [as_text(d) for d in reg.documents]
            for sname, scorer in scorers.items():
                keys = {p: f"{bench.name}|N={N}|{sname}|{p}" for p in policies}
                todo = [p for p in policies if keys[p] not in cells]
                if not todo:
                    continue
                print(f"bor: {bench.name} N={N} scorer={sname}: {len(queries)} queries, {len(todo)} policies")
                scores = scorer.score([q.text for q in queries], doc_texts)
                rankings = [Ranking.from_scores(sc, q.relevant) for sc, q in zip(scores, queries, strict=True)]
                train = [r for r, q in zip(rankings, queries, strict=True) if split[q.qid] == "train"]
                evaluate = [(r, q) for r, q in zip(rankings, queries, strict=True) if split[q.qid] == "eval"]
                if not train or not evaluate:
                    raise ValueError(
                        f"{bench.name} N={N}: {len(train)} train / {len(evaluate)} eval queries; "
                        "raise limit or queries_per_category, or set train_fraction inside (0, 1)"
                    )
                for pname in tqdm(todo, desc=f"{bench.name} N={N} {sname}"):
                    policy: DepthPolicy
                    if pname.startswith("fixed-"):
                        policy = FixedK(int(pname.removeprefix("fixed-")))
                    else:
                        policy = _agent(pname, s, seed)
                        _fit(policy, train, s, seed)
                        AdaptiveRetriever(scorer, policy).save(
                            out / "retrievers" / f"{bench.name}-N{N}-{sname}-{pname}"
                        )
                    outcomes, firsts = [], []
                    for r, q in evaluate:
                        o = shortlist_outcome(r, policy.depth(r, s.max_depth))
                        outcomes.append(o)
                        firsts.append(r.first_hit)
                        row = {"key": f"{keys[pname]}|{q.qid}", "cell": keys[pname], "qid": q.qid, "group": q.group}
                        per_query.add({**row, "first_hit": r.first_hit, "R": r.R, **o})
                    key = {"cell": keys[pname], "benchmark": bench.name, "N": N, "scorer": sname, "policy": pname}
                    cells.add(_cell_row(key, outcomes, firsts, s.bootstrap))
    rows = sorted(cells, key=lambda r: (r["benchmark"], r["N"], r["scorer"], _policy_order(r["policy"])))
    (out / "results.md").write_text(markdown_table(rows, COLUMNS))
    plots = [str(p) for p in write_plots(rows, out)]
    details = {
        "benchmarks": {b.name: {"source": b.source, "queries": len(b.queries), "core_tools": b.core} for b in benches},
        "skipped": skipped,
        "rows": rows,
        "plots": plots,
    }
    return write_summary(out, cfg, _metrics(rows), details, model=None, label="retrieval (no model)")


def _metrics(rows: list[dict]) -> dict[str, dict[str, Any]]:
    """Results-schema metrics per cell `<benchmark>/N=<N>/<scorer>/<policy>`: `bor` (bits, 95% percentile
    bootstrap over queries; null where infinite: no hit), `coverage` (Wilson) and `mean_depth` (tools shown)."""
    out = {}
    for r in rows:
        cell = f"{r['benchmark']}/N={r['N']}/{r['scorer']}/{r['policy']}"
        out[f"{cell}/bor"] = metric(r["bor"], r["bor_lo"], r["bor_hi"], r["n"], "bootstrap-95", unit="bits")
        out[f"{cell}/coverage"] = wilson_metric(round(r["coverage"] * r["n"]), r["n"])
        out[f"{cell}/mean_depth"] = metric(r["mean_depth"], n=r["n"], unit="tools")
    return out


def _policy_order(name: str) -> tuple[int, int, str]:
    return (0, int(name.removeprefix("fixed-")), "") if name.startswith("fixed-") else (1, 0, name)


SUITE = Suite("bor", check, run, BorEval)  # the suite interface (smith.evals)
