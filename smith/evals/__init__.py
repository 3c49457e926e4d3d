"""Evaluation suites. `eval.py suite=NAME` imports `smith.evals.NAME` and calls its `run(cfg)`.

A suite is one module (or package) exposing `run(cfg) -> dict` (the summary it wrote); adding a
suite never touches the others.
"""

from __future__ import annotations

import importlib
import json

from omegaconf import DictConfig

SUITES = ("rg", "lomekwi", "recognition_mcp", "lots", "bor", "bfcl")


def run(cfg: DictConfig) -> dict:
    name = cfg.suite.name
    if name not in SUITES:
        raise SystemExit(f"error: suite '{name}' not found; known: {', '.join(SUITES)}")
    module = importlib.import_module(f"smith.evals.{name}")
    summary = module.run(cfg)
    print(json.dumps({"suite": name, "output_dir": summary.get("output_dir")}, indent=None))
    return summary
