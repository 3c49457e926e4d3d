"""recognition_mcp's typed config (smith.evals.config): `RecognitionConfig`, the `suite.*` settings (the paper's
sections 4.2, 4.5, A.2), `PilotConfig`, the tools-off pilot's (`suite.pilot`), and `RecognitionEval`, the root of
`eval.py suite=recognition_mcp` with its `import_logs`."""

from __future__ import annotations

from dataclasses import dataclass

from smith.config import knob
from smith.evals.config import EvalConfig


@dataclass
class PilotConfig:
    """suite.mode=pilot (the released oracle_pilot.py)."""

    difficulties: list[int] = knob(help="d: dividend digits", factory=lambda: [8, 11, 14, 17, 20])
    reps: int = knob(4, "rollouts per difficulty", min=1)
    budget: int = knob(200000, "large enough that the live meter never stops a rollout", min=1)
    max_turns: int = knob(40, "turns of a pilot rollout", min=1)
    budget_mult: float = knob(0.8, "suggested budget = budget_mult x median manual cost S", min=0.0)


@dataclass
class RecognitionConfig:
    """`suite.*` of suite=recognition_mcp (recipes/suite/recognition_mcp.yaml)."""

    name: str = knob("recognition_mcp", "the suite", choices=("recognition_mcp",))
    mode: str = knob("sweep", "sweep | pilot (tools off: submit_answer only, calibrates the budget)")
    conditions: list[str] = knob(help="baseline prompt (6.2) and the tool-prior sentence (6.4)",
                                 factory=lambda: ["baseline", "tool_prior"])
    tools: list[int] = knob(help="T candidate tools", factory=lambda: [4, 8, 12, 16, 20])
    reps: list[int] = knob(help="reps per (T, d) cell, one per tools entry: T x reps ~ constant",
                           factory=lambda: [15, 9, 6, 3, 3])
    difficulties: list[int] = knob(help="d: dividend digits (divisor floor(d/2) digits)",
                                   factory=lambda: [8, 10, 12, 14, 16])
    surcharge: int = knob(25, "flat tokens per tool call, recorded with each rollout", min=0)
    score_budget: int | None = knob(None, "re-scoring: null -> each rollout's logged budget (900 + 90 max(0, d-8) + "
                                    "1800 T)", min=0)
    score_surcharge: int | None = knob(None, "re-scoring: null -> each rollout's logged surcharge", min=0)
    max_turns: int = knob(300, "turns of a rollout", min=1)
    max_noop: int = knob(4, "turns in a row without a tool call that end the episode", min=1)
    obfuscate: bool = knob(True, "per-episode tool_<letter> names (the paper); false: tool_alpha, tool_bravo, ...")
    sequential: bool = knob(True, "one tool call per turn (every reported run); false: every call of a turn runs")
    nudge_errors: bool = knob(False, "true: append a malformed tool call's parse error to the nudge (smith's option)")
    max_new_tokens: int = knob(2048, "per model call (paper: 2048)", min=1)
    temperature: float = knob(0.7, "Qwen3 non-thinking defaults; the paper used providers' defaults", min=0.0)
    top_p: float = knob(0.8, "nucleus sampling", min=0.0)
    no_think: str | bool = knob("auto", "auto: append \" /no_think\" to the system prompt for Qwen3 / Qwen3.5 | "
                                "true | false")
    concurrency: int = knob(4, "rollouts in flight (each runs its own MCP server process)", min=1)
    bootstrap: int = knob(2000, "rollout-level bootstrap resamples for the standard errors", min=1)
    pilot: PilotConfig = knob(help="suite.mode=pilot (the released oracle_pilot.py)", factory=PilotConfig)
    quick: list[str] = knob(help="quick=true: these overrides first (recipes/suite/recognition_mcp.yaml)",
                            factory=list)
    import_condition: str = knob("tool_prior", "prompt condition of imported logs (the released qwen35_v2 run is "
                                 "tool-prior)")


@dataclass
class RecognitionEval(EvalConfig):
    """`python eval.py suite=recognition_mcp`."""

    suite: RecognitionConfig = knob(factory=RecognitionConfig)
    import_logs: str | None = knob(None, "a directory of released episodes.jsonl files to rescore instead of "
                                   "running")
