"""bfcl's typed config (smith.evals.config): `BfclConfig`, the `suite.*` settings, and `BfclEval`, the root of
`eval.py suite=bfcl`."""

from __future__ import annotations

from dataclasses import dataclass

from smith.config import knob
from smith.evals.config import EvalConfig


@dataclass
class BfclConfig:
    """`suite.*` of suite=bfcl (recipes/suite/bfcl.yaml)."""

    name: str = knob("bfcl", "the suite", choices=("bfcl",))
    categories: list[str] = knob(help="all = every offline category (AST, irrelevance, live, multi-turn, "
                                 "memory_kv/rec_sum)", factory=lambda: ["all"])
    python: str | None = knob(None, "a python with bfcl-eval==2026.3.23; null = .cache/bfcl-venv (python -m "
                              "smith.evals.bfcl.venv)")
    served_name: str = knob("smith", "model id of the endpoint smith starts for a local SPEC")
    port: int = knob(0, "its port; 0 = any free port", min=0)
    max_tokens: int = knob(1024, "its completion cap per request (bfcl-eval sends none)", min=1)
    api_key: str | None = knob(None, "for an openai:<url>#<model> SPEC that needs one (else $OPENAI_API_KEY, else "
                               "EMPTY)")
    temperature: float = knob(0.001, "bfcl-eval's default", min=0.0)
    threads: int = knob(1, "concurrent requests (a served local model answers one at a time anyway)", min=1)
    timeout_s: int | float | None = knob(None, "wall-clock cap on the whole bfcl-eval run; null = none", min=0)
    label: str | None = knob(None, "row label in reports; null = the model's last path part")
    quick: list[str] = knob(help="quick=true: these overrides first (recipes/suite/bfcl.yaml)", factory=list)


@dataclass
class BfclEval(EvalConfig):
    """`python eval.py suite=bfcl`."""

    suite: BfclConfig = knob(factory=BfclConfig)
