"""Evaluation suites. `eval.py suite=NAME` looks NAME up in `SUITES`, imports only that suite's module, checks
the arguments and calls its `run(conf)`.

A suite is one module (or package) exposing `SUITE`, a `smith.evals.suite.Suite`: its typed config `config` (an
`EvalConfig` subclass whose `suite` is the dataclass of its own settings, smith.evals.config), `check(conf) ->
list[(setting, SPEC)]` (what a type cannot say, ConfigError for bad ones; the model SPECs it will load) and
`run(conf) -> dict` (the summary it wrote), which may assume a checked config. Adding a suite is its module with
its config dataclasses, `recipes/suite/<name>.yaml` (its description and quick preset) and one line here; it
never touches the others. Every check runs before any model loads.
"""

from __future__ import annotations

import importlib
import json

from smith.errors import ConfigError
from smith.evals.config import EvalConfig
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


def run(conf: EvalConfig) -> dict:
    """Check, then run, the suite of a typed evaluation config (smith.entry builds it: smith.evals.config)."""
    suite = get(conf.suite.name)
    from smith.evals.common import check_inputs

    check_inputs(conf, suite.check(conf))
    summary = suite.run(conf)
    print(json.dumps({"suite": suite.name, "output_dir": summary.get("output_dir")}, indent=None))
    return summary
