"""Suite `lots`: LOTS tool-space optimisation on the TGB benchmark (003_204fd2f72796f344.txt).

    python eval.py suite=lots model=SPEC [limit=N] [output_dir=D]

Per TGB family: serve the fitting requests under the full registry, score every served tool by the
leave-one-out likelihood of the frozen answer, aggregate, choose the budget K on fitting accuracy, and
evaluate the top-K space on the evaluation requests against the baselines of Table 1. Also: every ranking
at fixed K (Figure 9), registry sizes 30-240 (Figure 21), and a stream of EMA updates under a serving cap
with exploration (B.3, Figure 4). Writes D/summary.json (results schema), D/results.md, JSONL traces (serves, scores,
per-method traces), stored task spaces, and PNG plots. Re-running with the same D resumes.

`model=scripted:gold` is the harness check: an agent that answers with the gold chain's output.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from smith.errors import ConfigError
from smith.evals.common import EpisodeLog, check_pool, markdown_table, metric, output_dir, write_json, write_summary
from smith.evals.lots import baselines, plots, spaces, tgb
from smith.evals.lots.config import LotsConfig, LotsEval
from smith.evals.lots.methods import METHODS, ROUTER, SPACES, Task
from smith.evals.lots.scoring import LikelihoodScorer, loo_scores
from smith.evals.lots.serving import Agent, ChatAgent, GoldAgent, Server, build_messages, menu_key
from smith.evals.suite import Suite

SCRIPTED = {"gold": GoldAgent}


def check(cfg: LotsEval) -> list[tuple[str, str]]:
    """lots' own settings, before anything loads; returns the model SPECs the run loads."""
    s = cfg.suite
    unknown = [f for f in s.families if f not in tgb.FAMILIES]
    if unknown:
        raise ConfigError(f"suite.families has unknown TGB families {unknown}; known: {', '.join(tgb.FAMILIES)}")
    bad = [m for m in s.methods if m not in METHODS]
    if bad:
        raise ConfigError(f"suite.methods has unknown methods {bad}; known: {', '.join(METHODS)}")
    spec = cfg.model
    scripted = spec.startswith("scripted:")
    if scripted:
        _scripted(spec)
    if s.pool.path:
        if scripted:
            raise ConfigError("suite.pool needs a model that reads tool outputs; scripted agents only know TGB")
        check_pool(s.pool.path, "suite.pool.path")
    specs = [] if scripted else [("model", spec)]
    return specs + ([("suite.scorer", s.scorer)] if s.scorer else [])


def _scripted(spec: str) -> str:
    """The name of a `scripted:<name>` SPEC, refused when unknown."""
    name = spec.split(":", 1)[1]
    if name not in SCRIPTED:
        raise ConfigError(f"scripted agent {name!r} unknown for suite lots; known: {', '.join(SCRIPTED)}")
    return name


def make_agent(spec: str, cfg: LotsEval) -> Agent:
    if spec.startswith("scripted:"):
        return SCRIPTED[_scripted(spec)]()
    from smith.models import load_backend

    return ChatAgent(load_backend(spec, cfg), max_new_tokens=cfg.suite.max_new_tokens)


def make_scorer(cfg: LotsEval) -> LikelihoodScorer:
    """The likelihood model: suite.scorer, else the served model when it is local, else the tiny model."""
    import torch

    from smith.models import resolve_model

    spec = cfg.suite.scorer or cfg.model
    if spec.startswith(("scripted:", "openai:")):
        spec = "tiny"
    spec = spec.removeprefix("vllm:")
    base, adapter = resolve_model(spec, cfg)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # an evaluation has no device setting: auto
    dtype = cfg.suite.scorer_dtype if device.startswith("cuda") else "float32"
    return LikelihoodScorer.from_pretrained(base, adapter, device, dtype, cfg.suite.score_batch_size)


class Lots:
    """One run's state: the agent, the scorer, and the resumable logs, shared by every experiment."""

    def __init__(self, cfg: LotsEval, out: Path, agent: Agent, scorer: LikelihoodScorer) -> None:
        self.cfg, self.s, self.out = cfg, cfg.suite, out
        self.agent, self.scorer = agent, scorer
        self.seed = cfg.seed
        self.scores = EpisodeLog(out / "scores.jsonl")
        self.servers: dict[int, Server] = {}

    def server(self, size: int) -> Server:
        if size not in self.servers:
            reg = tgb.make_registry(size, self.seed)
            self.servers[size] = Server(self.agent, reg, self.out / "serves.jsonl", self.scorer.count_tokens,
                                        self.s.serve_batch_size)
        return self.servers[size]

    # ----------------------------------------------------------------------------- LOTS (Algorithm 1)
    def request_scores(self, server: Server, req: tgb.Request, menu: Sequence[str], answer: str) -> dict[str, float]:
        """I_x(s) for every served tool of one trace, cached in scores.jsonl."""
        mode = self.s.deletion
        key = f"{menu_key(req, server.registry, menu)}|{mode}"
        if key not in self.scores:
            reg = server.registry
            full = build_messages(req, reg, menu, tgb.execute(req, menu, reg))
            removed = {t: build_messages(req, reg, menu, tgb.intervene(req, menu, reg, t, mode)) for t in menu}
            scores = loo_scores(self.scorer, full, removed, answer) if answer.strip() and menu else {}
            self.scores.add({"key": key, "request": req.id, "family": req.family, "registry": len(reg),
                             "answer": answer, "scores": scores})
        return self.scores.rows[key]["scores"]

    def score_rows(self, server: Server, rows: list[dict[str, Any]], reqs: Sequence[tgb.Request],
                   desc: str) -> list[dict[str, float]]:
        return [self.request_scores(server, r, row["menu"], row["answer"])
                for r, row in tqdm(list(zip(reqs, rows, strict=True)), desc=desc, leave=False)]

    def fit(self, family: str, fit_reqs: Sequence[tgb.Request], size: int, k_grid: Sequence[int]) -> dict[str, Any]:
        server = self.server(size)
        names = server.registry.names
        rows = server.serve(fit_reqs, [names] * len(fit_reqs), desc=f"{family}: serve full registry")
        agg = spaces.aggregate(self.score_rows(server, rows, fit_reqs, f"{family}: score {size} tools"))
        grid = sorted({min(k, len(names)) for k in k_grid})
        acc_by_k = {k: server.accuracy(fit_reqs, spaces.top_k(agg, k), desc=f"{family}: K={k}") for k in grid}
        k = spaces.select_budget(acc_by_k)
        space = spaces.TaskSpace(family, k, self.s.alpha, agg, spaces.top_k(agg, k), batches=1)
        space.save(self.out / "spaces" / f"registry-{size}")
        return {"k": k, "space": space.tools, "scores": agg, "ranking": spaces.rank(agg), "fit_accuracy": acc_by_k}

    # ----------------------------------------------------------------------------- evaluation
    def evaluate(self, server: Server, reqs: Sequence[tgb.Request], menus: Sequence[Sequence[str]],
                 desc: str) -> list[dict[str, Any]]:
        return server.serve(reqs, menus, desc=desc)


def _split(cfg: LotsEval, families: Sequence[str], n_fit: int, n_eval: int, seed: int) \
        -> dict[str, tuple[list[tgb.Request], list[tgb.Request]]]:
    limit = cfg.limit
    nf, ne = (min(n_fit, limit), min(n_eval, limit)) if limit else (n_fit, n_eval)
    return {f: ([tgb.make_request(f, i, seed) for i in range(nf)],
                [tgb.make_request(f, tgb.N_FIT + i, seed) for i in range(ne)]) for f in families}


def _summarise(rows_by_family: dict[str, list[dict[str, Any]]], kept: dict[str, float]) -> dict[str, Any]:
    acc = {f: sum(r["correct"] for r in rows) / max(1, len(rows)) for f, rows in rows_by_family.items()}
    all_rows = [r for rows in rows_by_family.values() for r in rows]
    return {"accuracy": sum(acc.values()) / max(1, len(acc)), "by_family": acc,
            "tools_kept": sum(kept.values()) / max(1, len(kept)), "tools_by_family": kept,
            "prompt_tokens": sum(r["prompt_tokens"] for r in all_rows) / max(1, len(all_rows)),
            "n": len(all_rows)}


def run(cfg: LotsEval, agent: Agent | None = None) -> dict:
    """Run the suite; `agent` replaces the one `cfg.model` names (tests pass a scripted ChatBackend)."""
    s = cfg.suite
    out = output_dir(cfg)
    families = list(s.families)
    methods = list(s.methods)
    lots = Lots(cfg, out, agent or make_agent(cfg.model, cfg), make_scorer(cfg))
    data = _split(cfg, families, s.n_fit, s.n_eval, lots.seed)
    server = lots.server(15)
    schemas = [t.schema() for t in server.registry.tools]
    embed = baselines.load_encoder() if {"dense"} & set(methods) or s.fixed_k else None

    fits = {f: lots.fit(f, data[f][0], 15, list(s.k_grid)) for f in tqdm(families, desc="LOTS fit")}
    menus = _spaces(lots, server, data, fits, methods, schemas, embed)
    (out / "traces").mkdir(exist_ok=True)
    results = {m: _evaluate(lots, server, data, m, menus.get(m, {})) for m in methods}

    fixed = _fixed_k(lots, server, data, fits, schemas, embed, list(s.fixed_k), lots.seed) if s.fixed_k else {}
    scaling = _scaling(lots, data, fits, results) if s.registry_sizes else {}
    stream = _stream(lots, data, fits) if s.stream.rounds else {}
    pool = _pool(lots) if s.pool.path else {}

    n_fit, n_eval = (len(x) for x in next(iter(data.values())))
    details = {"families": families, "n_fit": n_fit, "n_eval": n_eval, "deletion": s.deletion,
               "methods": results, "lots": fits, "fixed_k": fixed, "registry_scaling": scaling, "stream": stream,
               "pool": pool}
    summary = write_summary(out, cfg, _metrics(results), details)
    _results_md(out, cfg, results, fits, methods, families)
    plots.write(out, results, fixed, scaling, stream, _plot_n(s, n_eval, len(families)))
    return summary


def _spaces(lots: Lots, server: Server, data: dict, fits: dict, methods: Sequence[str], schemas: list,
            embed: Any) -> dict[str, dict[str, list[str]]]:
    """{method: {family: space}} of every task-level method (methods.SPACES), family by family."""
    names = server.registry.names
    menus: dict[str, dict[str, list[str]]] = {m: {} for m in methods if m in SPACES}
    for f in tqdm(list(data), desc="baselines"):
        fit_reqs, _ = data[f]
        fit_acc = lambda menu, reqs=fit_reqs, f=f: server.accuracy(reqs, menu, desc=f"{f}: search")  # noqa: E731
        task = Task(f, names, schemas, [r.question for r in fit_reqs], fit_acc, fits[f], embed, lots.seed,
                    lots.s.beam_width)
        for m in menus:
            menus[m][f] = SPACES[m](task)
    return menus


def _evaluate(lots: Lots, server: Server, data: dict, method: str, menus: dict[str, list[str]]) -> dict[str, Any]:
    """One method on every family's evaluation requests (its space, or the router's per-request picks); writes
    traces/<method>.jsonl."""
    rows_by_family, kept, router_tokens = {}, {}, {}
    for f, (_, ev) in data.items():
        if method == ROUTER:
            routed = lots.agent.route(ev, server.registry)
            rows_by_family[f] = server.serve(ev, [r for r, _ in routed], desc=f"{method}: {f}")
            kept[f] = sum(len(r) for r, _ in routed) / max(1, len(routed))
            router_tokens[f] = sum(t for _, t in routed) / max(1, len(routed))
        else:
            rows_by_family[f] = server.serve(ev, [menus[f]] * len(ev), desc=f"{method}: {f}")
            kept[f] = float(len(menus[f]))
    result = _summarise(rows_by_family, kept)
    if method != ROUTER:
        result["spaces"] = {f: menus[f] for f in data}
    else:
        result["selection_prompt_tokens"] = sum(router_tokens.values()) / max(1, len(router_tokens))
    with (lots.out / "traces" / f"{method}.jsonl").open("w") as fh:
        for rows in rows_by_family.values():
            for r in rows:
                fh.write(json.dumps({"method": method, **r}) + "\n")
    return result


def _results_md(out: Path, cfg: LotsEval, results: dict, fits: dict, methods: list[str], families: list[str]) -> None:
    rows = [{"method": m, "accuracy": 100 * results[m]["accuracy"], "tools kept": results[m]["tools_kept"],
             "prompt tokens": results[m]["prompt_tokens"]} for m in methods]
    fam_rows = [{"family": f, **{m: 100 * results[m]["by_family"][f] for m in methods},
                 "K": fits[f]["k"], "LOTS space": ", ".join(fits[f]["space"])} for f in families]
    (out / "results.md").write_text(
        f"# LOTS on TGB: {cfg.model}\n\nAccuracy (%) macro-averaged over families (Table 1 style).\n\n"
        + markdown_table(rows, ["method", "accuracy", "tools kept", "prompt tokens"], ".1f")
        + "\n## Per family\n\n" + markdown_table(fam_rows, ["family", *methods, "K", "LOTS space"], ".1f"))


def _plot_n(s: LotsConfig, n_eval: int, n_families: int) -> dict[str, str]:
    """What each plotted point averages over, per figure, for its title."""
    fam = f"{n_families} families"
    scaled = min(s.scaling_eval, n_eval)
    return {"fixed": f"n = {n_eval} evaluation requests x {fam} per point",
            "stream": f"n = {min(s.stream.eval, n_eval)} evaluation requests per point",
            "scaling": f"n = {scaled} evaluation requests x {fam} per point"
                       + (f" ({n_eval} at 15 tools)" if scaled != n_eval else "")}


def _metrics(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Results-schema metrics per method: `<method>/accuracy` (macro over families; n = evaluation requests; no
    interval), `<method>/tools_kept` (tools served per request) and `<method>/prompt_tokens` (mean per request)."""
    return {f"{m}/{name}": metric(r[name], n=r["n"], unit=unit) for m, r in results.items()
            for name, unit in (("accuracy", "fraction"), ("tools_kept", "tools"), ("prompt_tokens", "tokens per item"))}


def _fixed_k(lots: Lots, server: Server, data: dict, fits: dict, schemas: list, embed: Any,
             ks: list[int], seed: int) -> dict[str, dict[int, float]]:
    """Figure 9: every ranking deployed at the same K per family, macro accuracy on evaluation requests."""
    names = server.registry.names
    curves: dict[str, dict[int, float]] = {"lots": {}, "bm25": {}, "dense": {}, "random": {}}
    for f, (fit_reqs, ev) in tqdm(data.items(), desc="fixed K"):
        queries = [r.question for r in fit_reqs]
        rankings = {"lots": fits[f]["scores"], "bm25": baselines.bm25_scores(schemas, queries),
                    "dense": baselines.dense_scores(embed, schemas, queries)}
        for k in ks:
            k = min(k, len(names))
            menus = {m: spaces.top_k(sc, k) for m, sc in rankings.items()}
            menus["random"] = baselines.random_space(names, k, f"{seed}:{f}:fixed")
            for m, menu in menus.items():
                acc = server.accuracy(ev, menu, desc=f"{m} K={k}: {f}")
                curves[m][k] = curves[m].get(k, 0.0) + acc / len(data)
    return curves


def _scaling(lots: Lots, data: dict, fits: dict, results: dict) -> dict[int, dict[str, float]]:
    """Figure 21: Keep all against per-family LOTS spaces as synthetic distractors grow the registry."""
    s = lots.s
    out: dict[int, dict[str, float]] = {}
    if "keep_all" in results and "lots" in results:
        out[15] = {"keep_all": results["keep_all"]["accuracy"], "lots": results["lots"]["accuracy"],
                   "tools_kept": results["lots"]["tools_kept"], "keep_all_tokens": results["keep_all"]["prompt_tokens"],
                   "lots_tokens": results["lots"]["prompt_tokens"]}
    for size in s.registry_sizes:
        server = lots.server(size)
        acc = {"keep_all": 0.0, "lots": 0.0, "tools_kept": 0.0, "keep_all_tokens": 0.0, "lots_tokens": 0.0}
        for f, (fit_reqs, ev) in data.items():
            fit = lots.fit(f, fit_reqs[: s.scaling_fit], size, s.scaling_k_grid)
            ev = ev[: s.scaling_eval]
            full = server.serve(ev, [server.registry.names] * len(ev), desc=f"keep all {size}: {f}")
            fitted = server.serve(ev, [fit["space"]] * len(ev), desc=f"lots {size}: {f}")
            n = len(data)
            acc["keep_all"] += sum(r["correct"] for r in full) / max(1, len(full)) / n
            acc["lots"] += sum(r["correct"] for r in fitted) / max(1, len(fitted)) / n
            acc["tools_kept"] += len(fit["space"]) / n
            acc["keep_all_tokens"] += sum(r["prompt_tokens"] for r in full) / max(1, len(full)) / n
            acc["lots_tokens"] += sum(r["prompt_tokens"] for r in fitted) / max(1, len(fitted)) / n
        out[size] = acc
    return out


def _stream(lots: Lots, data: dict, fits: dict) -> dict[str, Any]:
    """B.3 / Figure 4: a task's space updated batch by batch (EMA), explored under a serving cap, stored.

    Each round serves `batch` fitting requests under the current space (the first under a random `cap` of
    the registry), scores their exposed tools, folds them into the running scores, and reads accuracy on
    the evaluation requests. Serving and scoring are cached, so a rerun replays the same stream.
    """
    st = lots.s.stream
    server = lots.server(st.registry)
    names = server.registry.names
    result: dict[str, Any] = {}
    for f, (fit_reqs, ev) in tqdm(data.items(), desc="stream"):
        rng = random.Random(f"{lots.seed}:stream:{f}")
        space = spaces.TaskSpace(f, fits[f]["k"], st.alpha)
        ev = ev[: st.eval]
        curve, sizes = [], []
        for i in range(st.rounds):
            batch = [fit_reqs[(i * st.batch + j) % len(fit_reqs)] for j in range(st.batch)]
            menus = [space.menu(names, rng, st.cap, st.epsilon) for _ in batch]
            rows = server.serve(batch, menus, desc=f"stream {f} round {i}")
            space.update(lots.score_rows(server, rows, batch, f"stream {f} score"))
            curve.append(server.accuracy(ev, space.tools, desc=f"stream {f} eval"))
            sizes.append(len(space.tools))
        space.save(lots.out / "spaces" / "stream")
        result[f] = {"accuracy": curve, "space_size": sizes, "space": space.tools, "k": space.k}
    return result


def _pool(lots: Lots) -> dict[str, Any]:
    """LOTS over a trained tool pool: a space per category against serving the whole pool (`pool.py`)."""
    from sandbox import Sandbox
    from smith.evals.lots.pool import fit_pool_space
    from smith.pool.pool import ToolPool
    from smith.tasks import items, score

    p = lots.s.pool
    if not isinstance(lots.agent, ChatAgent):
        raise ConfigError("suite.pool needs a model that reads tool outputs; scripted agents only know TGB")
    tool_pool = ToolPool.load(p.path)
    categories = list(p.categories or tool_pool.categories())
    limit = lots.cfg.limit
    n_fit, n_eval = (min(p.n_fit, limit), min(p.n_eval, limit)) if limit else (p.n_fit, p.n_eval)
    out = {}
    with Sandbox(isolation=p.isolation) as sb:
        for cat in tqdm(categories, desc="pool"):
            qs = items(cat, "hard", n_fit + n_eval, lots.seed)
            out[cat] = fit_pool_space(lots.agent, lots.scorer, tool_pool, cat, qs[:n_fit], qs[n_fit:], sb,
                                      grade=lambda answer, item, cat=cat: score(cat, answer, item))
    write_json(lots.out / "pool.json", out)
    return out


SUITE = Suite("lots", check, run, LotsEval)  # the suite interface (smith.evals)
