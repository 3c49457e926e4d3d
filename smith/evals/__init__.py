"""Evaluation suites. `eval.py suite=NAME` looks NAME up in `SUITES`, imports only that suite's module, checks
the arguments and calls its `run(cfg)`.

A suite is one module (or package) exposing `SUITE`, a `smith.evals.suite.Suite`: `check(cfg) -> list[(setting,
SPEC)]` (its own settings checked, ConfigError for bad ones; the model SPECs it will load) and `run(cfg) -> dict`
(the summary it wrote), which may assume a checked cfg. Adding a suite is its module, its config
`recipes/suite/<name>.yaml` and one line here; it never touches the others. Every check runs before any model
loads.
"""

from __future__ import annotations

import importlib
import json

from omegaconf import DictConfig

from smith.errors import ConfigError
from smith.evals.suite import Suite

# name -> the module holding its SUITE, imported on use (suites import heavy dependencies); `smith suites` lists
# these names with their configs' headers (smith.entry.describe)
SUITES: dict[str, str] = {
    "rg": "smith.evals.rg",
    "tabmwp": "smith.evals.tabmwp",
    "gqa": "smith.evals.gqa",
    "lomekwi": "smith.evals.lomekwi",
    "recognition_mcp": "smith.evals.recognition_mcp",
    "lots": "smith.evals.lots",
    "bor": "smith.evals.bor",
    "bfcl": "smith.evals.bfcl",
}


def get(name: str) -> Suite:
    """The suite registered as `name` (ConfigError naming the known ones when there is none)."""
    if name not in SUITES:
        raise ConfigError(f"suite '{name}' not found; known: {', '.join(SUITES)}")
    return importlib.import_module(SUITES[name]).SUITE


def run(cfg: DictConfig) -> dict:
    suite = get(cfg.suite.name)
    from smith.evals.common import check_inputs

    check_inputs(cfg, suite.check(cfg))
    summary = suite.run(cfg)
    print(json.dumps({"suite": suite.name, "output_dir": summary.get("output_dir")}, indent=None))
    return summary
