"""bor's typed config (smith.evals.config): `BorConfig`, the `suite.*` settings (the BoR paper's protocol), and
`BorEval`, the root of `eval.py suite=bor` (`model` is not used: the suite measures retrieval only)."""

from __future__ import annotations

from dataclasses import dataclass

from smith.config import knob
from smith.evals.config import EvalConfig


@dataclass
class BorConfig:
    """`suite.*` of suite=bor (recipes/suite/bor.yaml)."""

    name: str = knob("bor", "the suite", choices=("bor",))
    benchmarks: list[str] = knob(help="smith | bfcl; bfcl is skipped, with a message, when no bfcl-eval data is "
                                 "found", factory=lambda: ["smith", "bfcl"])
    pool: str | None = knob(None, "a smith pool file or run dir; null: one tool per catalog category from its "
                            "reasoning-gym docstring (summary.json says which source was used)")
    categories: list[str] | None = knob(None, "catalog categories to query (null: all)")
    bfcl_data: str | None = knob(None, "a bfcl-eval data dir; null: bfcl_eval here, else .cache/bfcl-venv's")
    queries_per_category: int = knob(30, "hard-band catalog items per category", min=1)
    sizes: list[int] = knob(help="registry sizes N; grown with distractor tools (paper: 20 to 3,251)",
                            factory=lambda: [20, 50, 100, 200, 400])
    scorers: list[str] = knob(help="bm25 | minilm | random; random = the no-signal reference (paper section 4, "
                              "diagnostic use)", factory=lambda: ["bm25", "minilm", "random"])
    fixed_k: list[int] = knob(help="fixed-K baselines", factory=lambda: [1, 2, 3, 5, 10, 20, 50, 100])
    agents: list[str] = knob(help="q-bor | q-f1 | dqn-bor | dqn-f1", factory=lambda: ["q-bor", "q-f1", "dqn-bor"])
    train_fraction: float = knob(0.5, "queries that train the depth agents; the rest are evaluated", min=0.0)
    step_cost: float = knob(0.01, "cost of each CONTINUE (paper: \"a small step cost\")", min=0.0)
    max_depth: int = knob(100, "deepest shortlist an agent may show", min=1)
    q_epochs: int = knob(20, "tabular Q-learning epochs", min=1)
    dqn_updates: int = knob(1500, "DQN updates", min=1)
    bootstrap: int = knob(2000, "resamples for the BoR 95% interval", min=1)
    quick: list[str] = knob(help="quick=true: these overrides first (recipes/suite/bor.yaml)", factory=list)


@dataclass
class BorEval(EvalConfig):
    """`python eval.py suite=bor`."""

    suite: BorConfig = knob(factory=BorConfig)
