"""The suite interface: what `eval.py suite=NAME` needs of a suite (smith.evals.run).

Every suite module (or package) exposes one `SUITE = Suite(name, check, run)`; the registry
`smith.evals.SUITES` names the module that holds it, so only the suite asked for is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from omegaconf import DictConfig


@dataclass(frozen=True)
class Suite:
    """An evaluation suite.

    `check(cfg)` checks the suite's own settings (ConfigError for a bad one) and returns the model SPECs the
    run will load, as (setting, SPEC) pairs; it runs before any model loads. `run(cfg)` runs (or resumes) the
    evaluation into `output_dir`, may assume a checked cfg, and returns the summary it wrote (results schema,
    smith.evals.common.write_summary). The suite's one-line description is the header of its config,
    `recipes/suite/<name>.yaml` (what `smith suites` prints).
    """

    name: str
    check: Callable[[DictConfig], list[tuple[str, str]]]
    run: Callable[[DictConfig], dict]
