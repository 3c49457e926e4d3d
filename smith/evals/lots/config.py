"""lots' typed config (smith.evals.config): `LotsConfig`, the `suite.*` settings (the paper's protocol), with the
EMA stream's (`suite.stream`) and the smith pool's (`suite.pool`), and `LotsEval`, the root of `eval.py
suite=lots`."""

from __future__ import annotations

from dataclasses import dataclass

from smith.config import knob
from smith.evals.config import EvalConfig


@dataclass
class StreamConfig:
    """B.3 / Figure 4: EMA updates under a serving cap with exploration; rounds: 0 skips."""

    registry: int = knob(120, "tools in the registry the stream serves from", min=1)
    cap: int = knob(16, "tools served at most per request", min=1)
    epsilon: float = knob(0.5, "exploration: the share of the cap drawn at random", min=0.0)
    alpha: float = knob(0.3, "EMA weight of the running scores", min=0.0)
    batch: int = knob(4, "fitting requests served per round", min=1)
    rounds: int = knob(6, "updates; 0 skips the stream", min=0)
    eval: int = knob(40, "evaluation requests per family read after every update", min=0)


@dataclass
class PoolConfig:
    """LOTS over a trained smith tool pool (pool.py); path: null skips."""

    path: str | None = knob(None, "a tool_pool.json, or a run / checkpoint dir holding one; null skips")
    categories: list[str] | None = knob(None, "null -> every category of the pool")
    n_fit: int = knob(16, "fitting questions per category (hard band)", min=0)
    n_eval: int = knob(64, "evaluation questions per category", min=0)
    isolation: str = knob("strict", "sandbox isolation for running the pool's tools", choices=("strict", "process"))


@dataclass
class LotsConfig:
    """`suite.*` of suite=lots (recipes/suite/lots.yaml). Defaults are the paper's protocol; `limit=N` caps the
    fitting and the evaluation requests per family."""

    name: str = knob("lots", "the suite", choices=("lots",))
    families: list[str] = knob(help="TGB families (smith.evals.lots.tgb.FAMILIES)", factory=lambda: [
        "table_total", "table_filter", "sensor_mean", "sensor_convert", "schedule_gap", "doc_two_facts",
        "translate_fact", "fx_settle", "compute_only", "no_tool"])
    n_fit: int = knob(80, "fitting requests per family (section 4.1)", min=1)
    n_eval: int = knob(320, "evaluation requests per family", min=1)
    methods: list[str] = knob(help="methods compared (Table 1; smith.evals.lots.methods.METHODS)", factory=lambda: [
        "no_tools", "keep_all", "random", "bm25", "dense", "llm_router", "beam_search", "tto", "lots"])
    deletion: str = knob("reexecute", "reexecute | evidence (Appendix E.3)", choices=("reexecute", "evidence"))
    k_grid: list[int] = knob(help="budget candidates (C.2); the full menu is one",
                             factory=lambda: list(range(1, 16)))
    alpha: float = knob(0.3, "EMA weight of the stored running scores (B.3)", min=0.0)
    beam_width: int = knob(5, "beam search baseline (B.1)", min=1)
    fixed_k: list[int] = knob(help="Figure 9: every ranking at the same K; [] to skip",
                              factory=lambda: [1, 2, 4, 8, 15])
    registry_sizes: list[int] = knob(help="Figure 21: synthetic distractors added; [] to skip",
                                     factory=lambda: [30, 60, 120, 240])
    scaling_fit: int = knob(40, "fitting requests per family at each registry size (400 per round, F.1)", min=1)
    scaling_eval: int = knob(40, "evaluation requests per family at each registry size", min=1)
    scaling_k_grid: list[int] = knob(help="budget candidates at each registry size",
                                     factory=lambda: [1, 2, 3, 4, 6, 8, 12, 16, 24, 32])
    stream: StreamConfig = knob(help="B.3 / Figure 4: EMA updates under a serving cap with exploration",
                                factory=StreamConfig)
    scorer: str | None = knob(None, "likelihood model; null -> the served model if local, else the tiny model")
    scorer_dtype: str = knob("bfloat16", "on CUDA; CPU scores in float32", choices=("bfloat16", "float16", "float32"))
    score_batch_size: int = knob(16, "suffixes per batched pass over the shared prefix", min=1)
    serve_batch_size: int = knob(32, "requests per batched serving call", min=1)
    max_new_tokens: int = knob(64, "per answer", min=1)
    quick: list[str] = knob(help="quick=true: these overrides first (recipes/suite/lots.yaml)", factory=list)
    pool: PoolConfig = knob(help="LOTS over a trained smith tool pool (pool.py); path: null skips",
                            factory=PoolConfig)


@dataclass
class LotsEval(EvalConfig):
    """`python eval.py suite=lots`."""

    suite: LotsConfig = knob(factory=LotsConfig)
