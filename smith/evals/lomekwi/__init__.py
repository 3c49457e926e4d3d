"""suite=lomekwi: the Lomekwi vault game (000_4c3492d641a25045.txt, sections 3-5, Appendices A-B).

Two modes, one metric code:
- play:   `python eval.py suite=lomekwi model=SPEC [limit=N] output_dir=D` plays the dense sweep
          (n x T cells x reps) with any chat backend or a scripted agent (scripted:optimal|grinder|random);
          episodes are appended to D/episodes.jsonl as they finish, so a killed run resumes.
- import: `python eval.py suite=lomekwi import_logs=DIR output_dir=D` scores every episodes.jsonl under DIR
          in the released format (importer.py) and checks the paper's findings (published.py).
Both write D/summary.json (the results schema: per model C, R, E, S, G and build rate with 95% Wilson intervals
as metrics `<model>/<metric>`; per cell too in its details), D/results.md, D/decomposition.png, D/build_rate.png
and D/threshold_map.png. One D may collect several models' sweeps (the log is keyed by model; every model in it
is summarised), so `model` is the one setting a rerun into D may change besides limit and speed.

`suite.world=deep` selects Deep Lomekwi (deep/) in both modes: its own grid and settings (`suite.deep`),
the two recognition steps R1 and R2 in every summary, and D/deep_lomekwi.png instead of the three figures.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tqdm import tqdm

from smith.errors import ConfigError
from smith.evals.common import EpisodeLog, markdown_table, metric, output_dir, write_summary
from smith.evals.lomekwi import costs, importer, metrics, plots, published
from smith.evals.lomekwi.agents import SCRIPTED, ScriptedAgent, play
from smith.evals.lomekwi.config import DeepConfig, LomekwiConfig, LomekwiEval
from smith.evals.lomekwi.deep import costs as deep_costs
from smith.evals.lomekwi.deep import env as deep
from smith.evals.lomekwi.deep import importer as deep_importer
from smith.evals.lomekwi.deep import metrics as deep_metrics
from smith.evals.lomekwi.env import Rules, budget_for
from smith.evals.lomekwi.episode import LomekwiEpisode, system_prompt_for
from smith.evals.lomekwi.world import WORLDS, World, make_v1_world, make_world
from smith.models.base import ChatBackend, SamplingParams

from ..suite import Suite

FACT_FIELDS = ("key", "model", "n", "n_types", "seed", "budget", "held", "hold_turn", "built", "build_turn",
               "dropped_both", "won", "opened", "total_actions", "pickups", "stop_reason", "usage", "source")
DEEP_FACT_FIELDS = (*FACT_FIELDS, "built_part", "part_turn", "held_two_parts")
KNOWN_WORLDS = (*WORLDS, deep.WORLD)
RESUME_MAY_CHANGE = ("model",)  # one output_dir may collect several models' sweeps (common.check_run)


def check(cfg: LomekwiEval) -> list[tuple[str, str]]:
    """lomekwi's own settings, before anything loads; returns the model SPECs the run loads."""
    if world_of(cfg.suite) not in KNOWN_WORLDS:
        raise ConfigError(f"suite.world={cfg.suite.world} not found; known: {', '.join(KNOWN_WORLDS)}")
    if cfg.import_logs:
        try:
            importer.find_logs(cfg.import_logs)
        except FileNotFoundError as e:
            raise ConfigError(str(e)) from None
        return []
    game = rules(cfg.suite)
    if world_of(cfg.suite) == deep.WORLD and game.commit_nudge:
        raise ConfigError("suite.commit_nudge has no Deep Lomekwi counterpart (the released deep runner has none)")
    spec = cfg.model
    if spec.startswith("scripted:"):
        _scripted(spec)
        return []
    return [("model", spec)]


def rules(s: LomekwiConfig) -> Rules:
    """The suite's rule switches (parser, echo, fold_case, commit_nudge, stop_on_build), checked."""
    try:
        return Rules(parser=s.parser, echo=s.echo, fold_case=s.fold_case, commit_nudge=s.commit_nudge or None,
                     stop_on_build=s.stop_on_build)
    except ValueError as e:
        raise ConfigError(f"suite=lomekwi: {e}") from None


def world_of(s: LomekwiConfig) -> str:
    return s.world


def grid(s: LomekwiConfig) -> LomekwiConfig | DeepConfig:
    """The sweep's own settings (n_values, t_values, reps, scheme, hint, no_progress_window): `suite.deep`
    for Deep Lomekwi, whose released sweep differs in all of them, the suite itself otherwise."""
    return s.deep if world_of(s) == deep.WORLD else s


def cells_of(s: LomekwiConfig) -> list[tuple[int, int]]:
    """The sweep's (n, T) cells; the v1 world has one shard kind, so T = 1 and t_values is not used."""
    g = grid(s)
    if world_of(s) == "v1":
        return [(n, 1) for n in g.n_values]
    return [(n, t) for n in g.n_values for t in g.t_values]


def world_for(s: LomekwiConfig, seed: int, n: int, t: int) -> World:
    """The world of one episode of the sweep."""
    fold, scheme = s.fold_case, grid(s).scheme
    if world_of(s) == "v1":
        return make_v1_world(seed, n, scheme, fold)
    if world_of(s) == deep.WORLD:
        return deep.make_deep_world(seed, n, t, scheme, fold)
    return make_world(seed, n, t, scheme, fold)


def _scripted(spec: str) -> str:
    """The policy of a `scripted:<policy>` SPEC, refused when unknown."""
    policy = spec.split(":", 1)[1]
    if policy not in SCRIPTED:
        raise ConfigError(f"scripted agent '{policy}' not found for suite=lomekwi; known: "
                          f"{', '.join('scripted:' + p for p in SCRIPTED)}")
    return policy


def run(cfg: LomekwiEval) -> dict[str, Any]:
    out = output_dir(cfg)
    if cfg.import_logs:
        return score_logs(cfg, out)
    return play_sweep(cfg, out)


def cell_seeds(cell_index: int, reps: int, limit: int | None, world: str = "pickup") -> list[int]:
    """Seeds of one cell: the episode's index in the cell-major sweep, as in the released dense sweep
    (so seed i here is the world of released row i); the released deep sweep seeds every cell's episodes
    with the repetition index instead. `limit` keeps the first reps, same worlds."""
    first = 0 if world == deep.WORLD else cell_index * reps
    return [first + r for r in range(min(reps, limit) if limit else reps)]


def _backend(spec: str, n_types: int, cfg: LomekwiEval, cache: dict[str, ChatBackend]) -> ChatBackend:
    if spec.startswith("scripted:"):
        return ScriptedAgent(_scripted(spec), n_types, seed=cfg.seed, world=world_of(cfg.suite))
    if spec not in cache:
        from smith.models import load_backend

        cache[spec] = load_backend(spec, cfg)
    return cache[spec]


def play_sweep(cfg: LomekwiEval, out: Path, backend: ChatBackend | None = None) -> dict[str, Any]:
    """Play every missing episode of the sweep, then summarise everything in the log.

    `backend` overrides `cfg.model` (tests pass a scripted-text double this way)."""
    s, g, world = cfg.suite, grid(cfg.suite), world_of(cfg.suite)
    model = backend.name if backend is not None else cfg.model
    log = EpisodeLog(out / "episodes.jsonl")
    cells = cells_of(s)
    game = rules(s)
    limit = cfg.limit or None
    window = g.no_progress_window
    todo = [(n, t, seed) for ci, (n, t) in enumerate(cells) for seed in cell_seeds(ci, g.reps, limit, world)
            if importer.episode_key(model, n, t, seed) not in log]
    params = SamplingParams(max_new_tokens=s.max_new_tokens, temperature=s.temperature, top_p=s.top_p,
                            seed=cfg.seed)
    cache: dict[str, ChatBackend] = {}
    with tqdm(total=len(todo), desc=f"lomekwi {model}", unit="ep") as bar:
        for n, t in cells:
            seeds = [seed for (cn, ct, seed) in todo if (cn, ct) == (n, t)]
            agent = backend or _backend(model, t, cfg, cache)
            for i in range(0, len(seeds), s.batch_size):
                batch = seeds[i: i + s.batch_size]
                budget = budget_for(n, s.budget_mult)
                worlds = [world_for(s, seed, n, t) for seed in batch]
                episodes = [LomekwiEpisode(w, seed, budget, g.hint, None, window,
                                           system_prompt_for(w) + (s.system_suffix or ""), game)
                            for seed, w in zip(batch, worlds, strict=True)]
                t0 = time.time()
                play(agent, episodes, params, bar)
                for seed, e in zip(batch, episodes, strict=True):
                    log.add({"key": importer.episode_key(model, n, t, seed), "model": model, "seed": seed,
                             "scheme": g.scheme, "elapsed_s": round(time.time() - t0, 3), **e.record()})
    details = _summarize(list(log), out, mode="play", draw=s.plots, world=world)
    details["sweep"] = {"cells": cells, "reps": g.reps, "limit": limit, "scheme": g.scheme, "hint": g.hint,
                        "world": world, "no_progress_window": window, "rules": asdict(game),
                        "budgets": {n: budget_for(n, s.budget_mult) for n, _ in cells}}
    return write_summary(out, cfg, _metrics(details["models"], world), details, model=model)


def score_logs(cfg: LomekwiEval, out: Path) -> dict[str, Any]:
    """Score the released-format logs under cfg.import_logs with the same metric code; check the paper's
    findings. suite.world says which game the logs are of (Deep Lomekwi rows have their own format and
    importer)."""
    root, world = Path(cfg.import_logs), world_of(cfg.suite)
    is_deep = world == deep.WORLD
    convert = deep_importer.import_row if is_deep else importer.import_row
    records, sources = [], {}
    for path in tqdm(importer.find_logs(root), desc="importing lomekwi logs", unit="log"):
        recs, errors = importer.read_log(path, convert)
        records += recs
        sources[str(path)] = {"episodes": len(recs), "failed_rows": errors,
                              "models": sorted({r["model"] for r in recs})}
    fields = DEEP_FACT_FIELDS if is_deep else FACT_FIELDS
    (out / "imported.jsonl").write_text("".join(json.dumps({k: r.get(k) for k in fields}) + "\n" for r in records))
    details = _summarize(records, out, mode="import", world=world)
    details["sources"] = sources
    details["paper_checks"] = (published.check_deep_claims if is_deep else published.check_claims)(details["models"])
    return write_summary(out, cfg, _metrics(details["models"], world), details, model=None,
                         label=f"imported {root.name}")


def _metrics(models: dict[str, dict[str, Any]], world: str) -> dict[str, dict[str, Any]]:
    """Results-schema metrics `<model>/<C|R|E|S|G|build_rate>` (and R1, R2 for Deep Lomekwi): the proportion,
    its 95% Wilson interval and its trials n (episodes for C, S, G, build rate; holds for R; builds for E)."""
    names = [*metrics.METRICS, *deep_metrics.STEP_METRICS] if world == deep.WORLD else list(metrics.METRICS)
    out = {}
    for model, m in models.items():
        trials = {k: n for k, (_, n) in metrics.Counts(**m["counts"]).fractions().items()}
        trials.update({k: v[1] for k, v in m.get("step_counts", {}).items()})
        for k in names:
            out[f"{model}/{k}"] = metric(m[k], *m[f"{k}_ci"], n=trials[k], interval="wilson-95")
    return out


def _summarize(records: list[dict[str, Any]], out: Path, mode: str, draw: bool = True,
               world: str = "pickup") -> dict[str, Any]:
    """The details block (per model and per cell decompositions, threshold map, plots) and D/results.md."""
    is_deep = world == deep.WORLD
    summary: dict[str, Any] = {"mode": mode, "world": world, **metrics.summarize(records)}
    for model in summary["models"]:
        rows = [r for r in records if r["model"] == model]
        summary["models"][model]["stop_reasons"] = dict(Counter(r["stop_reason"] for r in rows))
        summary["models"][model]["mean_actions"] = sum(r["total_actions"] for r in rows) / max(1, len(rows))
        if is_deep:
            summary["models"][model].update(deep_metrics.steps(rows))
            for (n, t), cell in metrics.group(rows, "n", "n_types").items():
                summary["cells"][model][f"n{n}_T{t}"].update(deep_metrics.steps(cell))
    cost = deep_costs if is_deep else costs
    summary["threshold"] = {f"n{n}_T{t}": {"E_build": cost.expected_build(n, t), "E_grind": costs.expected_grind(n),
                                           "build_preferred": cost.build_preferred(n, t)}
                            for n, t in sorted({(r["n"], r["n_types"]) for r in records})}
    columns = ([metrics.METRICS[0], *deep_metrics.STEP_METRICS, *metrics.METRICS[1:]] if is_deep
               else list(metrics.METRICS))
    (out / "results.md").write_text(_table(summary["models"], columns, is_deep))
    summary["plots"] = []
    if draw and is_deep:
        plots.plot_deep(summary["models"], out / "deep_lomekwi.png")
        summary["plots"] = ["deep_lomekwi.png"]
    elif draw:
        plots.plot_decomposition(summary["models"], out / "decomposition.png")
        plots.plot_build_rate(summary["models"], out / "build_rate.png")
        costs.plot_threshold_map(out / "threshold_map.png")
        summary["plots"] = ["decomposition.png", "build_rate.png", "threshold_map.png"]
    return summary


def _table(models: dict[str, dict[str, Any]], columns: list[str], is_deep: bool = False) -> str:
    def fmt(m: dict[str, Any], k: str) -> str:
        lo, hi = m[f"{k}_ci"]
        return f"{m[k]:.3f} [{lo:.2f}, {hi:.2f}]"

    ordered = [m for fam in plots.families(models).values() for m, _ in fam]
    rows = [{"model": m, "N": models[m]["N"], **{k: fmt(models[m], k) for k in columns}} for m in ordered]
    head = ("Deep Lomekwi: C = P(hold both recipe resources), R1 = P(part | hold), R2 = P(axe | part), "
            "R = P(axe | hold) = R1 R2, E = P(win | axe), S = P(win), G = P(win, no axe)" if is_deep else
            "Lomekwi: C = P(hold), R = P(build | hold), E = P(win | build), S = P(win), G = P(win, no build)")
    return head + "; 95% Wilson intervals.\n\n" + markdown_table(rows, ["model", "N", *columns])


SUITE = Suite("lomekwi", check, run, LomekwiEval)  # the suite interface (smith.evals)
