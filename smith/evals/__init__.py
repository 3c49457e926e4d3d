"""Evaluation suites. `eval.py suite=NAME` imports `smith.evals.NAME`, checks the arguments and calls its
`run(cfg)`.

A suite is one module (or package) exposing `check(cfg) -> list[(setting, SPEC)]` (its own settings checked,
ConfigError for bad ones; the model SPECs it will load) and `run(cfg) -> dict` (the summary it wrote), which
may assume a checked cfg; adding a suite never touches the others. Every check runs before any model loads.
"""

from __future__ import annotations

import importlib
import json

from omegaconf import DictConfig

from smith.errors import ConfigError

SUITES = ("rg", "tabmwp", "gqa", "lomekwi", "recognition_mcp", "lots", "bor", "bfcl")


def run(cfg: DictConfig) -> dict:
    name = cfg.suite.name
    if name not in SUITES:
        raise ConfigError(f"suite '{name}' not found; known: {', '.join(SUITES)}")
    module = importlib.import_module(f"smith.evals.{name}")
    from smith.evals.common import check_inputs

    check_inputs(cfg, module.check(cfg))
    summary = module.run(cfg)
    print(json.dumps({"suite": name, "output_dir": summary.get("output_dir")}, indent=None))
    return summary
