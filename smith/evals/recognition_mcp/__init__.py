"""Recognition MCP (Lomekwi paper, section 6): does an agent reach for a tool it cannot see inside?

    python eval.py suite=recognition_mcp model=scripted:prober output_dir=D     # a live sweep
    python eval.py suite=recognition_mcp suite.mode=pilot model=M output_dir=D # the tools-off pilot
    python eval.py suite=recognition_mcp import_logs=DIR output_dir=D          # rescore released rollouts

Modules: division (the task), server (decoy MCP server), host (one rollout over stdio), agents
(LLM or scripted), sweep (the cells), scoring (counterfactual oracle), importer (released logs),
report (summary, table, figure).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from smith.evals.suite import Suite

from .config import RecognitionEval


def check(cfg: RecognitionEval) -> list[tuple[str, str]]:
    """recognition_mcp's own settings, before anything loads; returns the model SPECs the run loads."""
    from smith.errors import ConfigError

    from .agents import require_anthropic, scripted_kind
    from .importer import find_logs

    if cfg.import_logs:
        try:
            find_logs(cfg.import_logs)
        except FileNotFoundError as e:
            raise ConfigError(str(e)) from None
        return []
    if cfg.suite.mode not in MODES:
        raise ConfigError(f"suite.mode={cfg.suite.mode!r} not found; known: {', '.join(MODES)}")
    spec = cfg.model
    if spec.startswith("scripted:"):
        scripted_kind(spec)
        return []
    if spec.startswith("anthropic:"):
        require_anthropic()
        return []
    return [("model", spec)]


def run(cfg: RecognitionEval) -> dict:
    """Run the sweep (or the pilot, `suite.mode`) for `cfg.model`, or import `cfg.import_logs`, and write the
    summary; returns it."""
    from smith.evals.common import output_dir
    from smith.models.base import SamplingParams

    from .agents import load_agent
    from .host import wants_no_think

    s = cfg.suite
    out = output_dir(cfg)
    if cfg.import_logs:
        return _import(cfg, out)
    params = SamplingParams(max_new_tokens=s.max_new_tokens, temperature=s.temperature, top_p=s.top_p, seed=cfg.seed)
    agent = load_agent(cfg.model, cfg, params)
    return MODES[s.mode](cfg, out, agent, wants_no_think(agent.name, s.no_think))


def _score_settings(cfg: RecognitionEval) -> dict[str, Any]:
    s = cfg.suite
    return {"budget": s.score_budget, "surcharge": s.score_surcharge, "n_boot": s.bootstrap, "seed": cfg.seed}


def _import(cfg: RecognitionEval, out: Path) -> dict:
    """Rescore released rollouts (`import_logs=DIR`)."""
    import json

    from smith.evals.common import write_summary

    from .importer import import_logs
    from .report import run_metrics, write_report

    records, stats = import_logs(cfg.import_logs, cfg.suite.import_condition)
    with (out / "rollouts.jsonl").open("w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    details = write_report(records, out, "import", extra={"import": stats}, **_score_settings(cfg))
    return write_summary(out, cfg, run_metrics(details), details, model=None,
                         label=f"imported {Path(cfg.import_logs).name}")


def _sweep(cfg: RecognitionEval, out: Path, agent: Any, no_think: bool) -> dict:
    """The live sweep over conditions x tools x difficulties x reps, scored by the counterfactual oracle."""
    from smith.evals.common import write_summary

    from .report import run_metrics, write_report
    from .sweep import plan, run_sweep

    s = cfg.suite
    episodes = plan(s.conditions, s.tools, s.reps, s.difficulties, cfg.limit,
                    s.surcharge, s.max_turns, s.max_noop, s.obfuscate, s.sequential, s.nudge_errors)
    records = run_sweep(agent, episodes, out / "rollouts.jsonl", s.concurrency, no_think, cfg.seed)
    details = write_report(records, out, "run", extra={"model": agent.name, "episodes": len(records)},
                           **_score_settings(cfg))
    return write_summary(out, cfg, run_metrics(details), details)


def _pilot(cfg: RecognitionEval, out: Path, agent: Any, no_think: bool) -> dict:
    """The tools-off pilot that calibrates the budgets."""
    from smith.evals.common import write_summary

    from .report import pilot_metrics, pilot_report
    from .sweep import pilot_plan, run_sweep

    s, p = cfg.suite, cfg.suite.pilot
    episodes = pilot_plan(p.difficulties, p.reps, p.budget, p.max_turns, cfg.limit, s.max_noop)
    records = run_sweep(agent, episodes, out / "rollouts.jsonl", s.concurrency, no_think, cfg.seed)
    details = pilot_report(records, out, p.budget_mult, extra={"model": agent.name, "episodes": len(records)})
    return write_summary(out, cfg, pilot_metrics(details), details)


MODES: dict[str, Callable[[RecognitionEval, Path, Any, bool], dict]] = {"sweep": _sweep, "pilot": _pilot}  # suite.mode


SUITE = Suite("recognition_mcp", check, run, RecognitionEval)  # the suite interface (smith.evals)
