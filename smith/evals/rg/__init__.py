"""Reasoning-gym seen/unseen accuracy by group and I/O tokens (SMITH paper, "Main results on Reasoning-Gym").

    python eval.py suite=rg model=SPEC mode=cot|build_use|pool|latm|craft|trove|ktce [suite.writer=SPEC] \
        [suite.pool=PATH] [limit=N] [output_dir=D]

Modes: `cot` answers directly (the Standard CoT baseline); `build_use` has the writer (default: the model
itself) build one tool per category from 4 easy examples and the model use it on the held-out hard
questions; `pool` uses the tools of a pool file (`tool_pool.json`) or run directory, building one only for a
category the pool lacks. `suite.writer=SPEC` makes writer and user different models (tool transfer across scale).
`latm`, `craft`, `trove`, `ktce` are the paper's inference-time tool-making baselines (rg.baselines: one module
per method; they keep what they build in D/toolsets.jsonl and add a `baseline` block to the summary's details).

The questions come from an item source (rg.sources): reasoning-gym's catalog here; the out-of-domain suites
(smith.evals.tabmwp, smith.evals.gqa) run this same runner on their benchmark files.

Writes D/run.json (the config; a rerun with other settings is refused), D/tools.jsonl (one tool per category),
D/episodes.jsonl (one row per question; a rerun into the same D skips the questions already there),
D/summary.json (the results schema, smith.evals.common.write_summary), D/results.md and D/accuracy_by_group.png
(rg.summary).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from smith.config import SandboxConfig, as_plain
from smith.errors import ConfigError
from smith.evals.suite import Suite

from .baselines import METHODS, SINGLE_MODEL
from .config import MODES as MODES  # the rg modes (rg.config), re-exported
from .config import RgEval
from .sources import ItemSource, ReasoningGym
from .summary import write_rg_summary

BASELINES = tuple(METHODS)  # inference-time tool makers (rg.baselines), one module each


def _identity(cfg: RgEval) -> dict[str, Any]:
    """What was run, resolved (the writer defaults to the model, CoT has one turn): the summary's details and
    its label. (Resume safety compares the whole config: common.check_run.)"""
    s = cfg.suite
    cot = cfg.mode == "cot"
    ident = {"mode": cfg.mode, "model": cfg.model, "writer": None if cot else (s.writer or cfg.model),
             "pool": s.pool if cfg.mode == "pool" else None, "seed": s.seed, "band": s.band,
             "n_examples": s.n_examples, "n_distractors": s.n_distractors, "max_turns": 1 if cot else s.max_turns}
    for key in ("data", "train_data", "scenes"):  # an OOD suite's files (smith.evals.tabmwp, smith.evals.gqa)
        if hasattr(s, key):
            value = getattr(s, key)
            ident[key] = list(value) if isinstance(value, list) else value
    if cfg.mode in BASELINES:  # the method's options and budgets are part of what was run
        ident["baseline"] = as_plain(getattr(s.baselines, cfg.mode))
    return ident


def check(cfg: RgEval, source: ItemSource | None = None) -> list[tuple[str, str]]:
    """rg's own settings (and those of `source`, default reasoning-gym), before anything loads; returns the
    model SPECs the run loads. Types, ranges and choices (`mode` among them) are the typed config's."""
    from smith.evals.common import check_pool

    s = cfg.suite
    if cfg.model.startswith("scripted:"):
        raise ConfigError(f"suite {s.name} has no scripted agents ({cfg.model}); give a model SPEC: tiny | DIR | "
                          "vllm:<path> | openai:<base_url>#<model>")
    (source or ReasoningGym(cfg)).check(cfg)
    _limits(s.sandbox)  # every setting, used by this mode or not, before anything is written
    if cfg.mode == "pool":
        if not s.pool:
            raise ConfigError("mode=pool needs suite.pool=PATH (a run directory, checkpoint directory or pool file)")
        check_pool(s.pool, "suite.pool")
    if cfg.mode in SINGLE_MODEL and s.writer:
        raise ConfigError(f"mode={cfg.mode} makes and uses its tools with one model; drop suite.writer")
    specs = [("model", cfg.model)]
    if cfg.mode != "cot" and s.writer:
        specs.append(("suite.writer", s.writer))
    return specs


def _limits(sb: SandboxConfig) -> Any:
    """`suite.sandbox`'s limits; a bad value is a one-line error (checked before anything is written)."""
    from sandbox import Limits

    try:
        return Limits(timeout_s=sb.timeout_s, memory_mb=sb.memory_mb)
    except ValueError as e:
        raise ConfigError(f"suite.sandbox: {e}") from None


def _sandbox(cfg: RgEval) -> tuple[Any, Any]:
    from sandbox import open_sandbox

    _limits(cfg.suite.sandbox)  # a bad value is a one-line error
    return open_sandbox(cfg.suite.sandbox)


def run(cfg: RgEval, backends: dict[str, Any] | None = None, source: ItemSource | None = None) -> dict:
    """Run (or resume) the evaluation into `output_dir` and write its summary; returns the summary.
    `backends` maps a SPEC to a ready ChatBackend used instead of loading it (tests pass scripted ones);
    `source` supplies the questions (default: reasoning-gym; the OOD suites pass their files')."""
    from contextlib import nullcontext

    from tqdm import tqdm

    from smith.evals.common import EpisodeLog, output_dir
    from smith.models import SamplingParams, load_backend
    from smith.pool import ToolPool

    from . import tools as toolsrc
    from .episodes import build_tools, cot_episode, question_row, run_episodes, use_episode

    s = cfg.suite
    out = output_dir(cfg)
    identity = _identity(cfg)

    source = source or ReasoningGym(cfg)
    cats = source.categories()
    by_name = {c.name: c for c in cats}
    caps = [v for v in (s.n_items, cfg.limit) if v is not None]
    questions = {c.name: source.questions(c, min(caps) if caps else None) for c in cats}

    def load(spec: str) -> Any:
        return (backends or {}).get(spec) or load_backend(spec, cfg)

    user = load(cfg.model)
    if cfg.mode in BASELINES:
        return _run_baseline(cfg, out, identity, source, cats, questions, user, load)
    params = SamplingParams(max_new_tokens=s.max_new_tokens, temperature=s.temperature, top_p=s.top_p,
                            seed=cfg.seed)
    log = EpisodeLog(out / "episodes.jsonl", key="key")
    menus_tools: dict[str, Any] = {}
    tool_rows: dict[str, dict[str, Any]] = {}
    if cfg.mode != "cot":
        tools_log = EpisodeLog(out / "tools.jsonl", key="category")
        tool_rows = {r["category"]: r for r in tools_log}
        missing = [c.name for c in cats if c.name not in tool_rows]
        if cfg.mode == "pool" and missing:
            for row in toolsrc.from_pool(ToolPool.load(s.pool), missing).values():
                tools_log.add(row)
                tool_rows[row["category"]] = row
            missing = [c for c in missing if c not in tool_rows]
        if missing:
            writer_spec = identity["writer"]
            writer = user if writer_spec == cfg.model else load(writer_spec)
            build_params = SamplingParams(max_new_tokens=s.build_max_new_tokens, temperature=s.temperature,
                                          top_p=s.top_p, seed=cfg.seed)
            for start in tqdm(range(0, len(missing), s.batch_size), desc="rg build tools", unit="batch"):
                chunk = missing[start : start + s.batch_size]
                examples = {c: source.examples(by_name[c], s.n_examples) for c in chunk}
                for cat, result in build_tools(writer, examples, build_params).items():
                    row = toolsrc.built_row(result, writer_spec)
                    tools_log.add(row)
                    tool_rows[cat] = row
        menus_tools = {c: e for c, e in ((c, toolsrc.entry_of(r)) for c, r in tool_rows.items()) if e is not None}

    groups = {c.name: c.group for c in cats}
    by_key = {f"{c.name}/{it.id}": (c, it) for c in cats for it in questions[c.name]}
    pending = [k for k in by_key if k not in log]
    bar = tqdm(total=len(by_key), initial=len(by_key) - len(pending), desc=f"rg {cfg.mode}", unit="q")
    sandbox_cm = _sandbox(cfg) if cfg.mode != "cot" else (nullcontext(), None)
    with sandbox_cm[0] as sandbox:
        for start in range(0, len(pending), s.batch_size):
            chunk = pending[start : start + s.batch_size]
            convs = []
            for key in chunk:
                cat, it = by_key[key]
                if cfg.mode == "cot":
                    convs.append(cot_episode(key, it.question))
                else:
                    rng = random.Random(f"{s.seed}:{key}")
                    convs.append(use_episode(key, it.question, toolsrc.menu(
                        cat.name, menus_tools, groups, s.n_distractors, rng)))
            max_turns = 1 if cfg.mode == "cot" else s.max_turns
            turn_params = params if cfg.mode != "cot" else SamplingParams(
                max_new_tokens=s.cot_max_new_tokens, temperature=params.temperature, top_p=params.top_p,
                seed=params.seed)
            run_episodes(user, convs, turn_params, max_turns, sandbox, sandbox_cm[1], s.max_tool_output_chars)
            for conv in convs:
                cat, it = by_key[conv.key]
                log.add({**question_row(cat, it, conv, s.log_chars),
                         "tool_source": tool_rows.get(cat.name, {}).get("source") if cfg.mode != "cot" else None})
            bar.update(len(chunk))
    bar.close()
    return write_rg_summary(out, cfg, identity, [log.rows[k] for k in by_key], tool_rows, source=source)


def _run_baseline(cfg: RgEval, out: Path, identity: dict[str, Any], source: ItemSource, cats: list[Any],
                  questions: dict[str, list[Any]], user: Any, load: Any) -> dict:
    """An inference-time tool-making method (rg.baselines) over the same questions, sandbox and summary."""
    from smith.evals.common import EpisodeLog

    from . import baselines

    log = EpisodeLog(out / "episodes.jsonl", key="key")
    by_name = {c.name: c for c in cats}
    keys = [f"{c.name}/{it.id}" for c in cats for it in questions[c.name]]
    writer = user if identity["writer"] == cfg.model else load(identity["writer"])
    sandbox, limits = _sandbox(cfg)
    with sandbox:
        ctx = baselines.Context(
            cfg, user, writer, sandbox, limits, cats, questions, {k for k in keys if k not in log}, log,
            EpisodeLog(out / "toolsets.jsonl", key="key"),
            lambda name, n: source.examples(by_name[name], n))
        tool_rows, block = baselines.run(cfg, ctx)
    return write_rg_summary(out, cfg, identity, [log.rows[k] for k in keys], tool_rows, {"baseline": block}, source)


SUITE = Suite("rg", check, run, RgEval)  # the suite interface (smith.evals)
