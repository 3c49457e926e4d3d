"""The suite interface: what `eval.py suite=NAME` needs of a suite (smith.evals.run).

Every suite module (or package) exposes one `SUITE = Suite(name, check, run, config)`; the registry
`smith.evals.SUITES` names the module that holds it, so only the suite asked for is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from smith.evals.config import EvalConfig


@dataclass(frozen=True)
class Suite:
    """An evaluation suite.

    `config` is the suite's typed config: a subclass of `smith.evals.config.EvalConfig` whose `suite` field is the
    dataclass of the suite's own settings (smith.entry composes `recipes/suite/<name>.yaml` over it and converts
    once). `check(conf)` checks what a type cannot say (files, names, model SPECs; ConfigError for a bad one) and
    returns the model SPECs the run will load, as (setting, SPEC) pairs; it runs before any model loads.
    `run(conf)` runs (or resumes) the evaluation into `output_dir`, may assume a checked config, and returns the
    summary it wrote (results schema, smith.evals.common.write_summary). The suite's one-line description is the
    header of `recipes/suite/<name>.yaml` (what `smith suites` prints).
    """

    name: str
    check: Callable[[Any], list[tuple[str, str]]]
    run: Callable[[Any], dict]
    config: type[EvalConfig]
