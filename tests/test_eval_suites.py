"""The suite registry (smith.evals.SUITES): eval.py and `smith suites` read the same suites, each module's SUITE
is registered under its own name, and neither listing the suites nor running one imports another suite."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from smith.entry import describe, options
from smith.errors import ConfigError
from smith.evals import SUITES, get
from smith.evals.suite import Suite

ROOT = Path(__file__).resolve().parent.parent


def test_every_registered_suite_has_a_config_and_a_suite_object():
    assert sorted(SUITES) == options("suite")  # recipes/suite/<name>.yaml for each, and no unregistered config
    for name, module in SUITES.items():
        suite = importlib.import_module(module).SUITE
        assert isinstance(suite, Suite) and suite.name == name and get(name) is suite
        assert callable(suite.check) and callable(suite.run)


def test_unknown_suite_is_one_line_naming_the_known_ones():
    with pytest.raises(ConfigError) as e:
        get("nope")
    assert str(e.value) == f"suite 'nope' not found; known: {', '.join(SUITES)}" and "\n" not in str(e.value)


def test_smith_suites_lists_the_registry_without_importing_a_suite():
    assert [name for name, _ in describe("suite")] == sorted(SUITES)
    assert dict(describe("suite"))["lots"] == "LOTS on TGB (003_204fd2f72796f344.txt)."
    code = ("import sys; from smith.cli import main; main(['suites']); "
            f"print(sorted(m for m in sys.modules if m in {sorted(SUITES.values())!r}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lines = out.strip().splitlines()
    assert lines[-1] == "[]", out  # listing imports no suite module
    assert [line.split()[0] for line in lines[:-1]] == sorted(SUITES)


def test_running_a_suite_imports_only_that_suite():
    code = ("import sys; from smith.evals import get; get('bor'); "
            f"print(sorted(m for m in sys.modules if m in {sorted(SUITES.values())!r}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['smith.evals.bor']"


def _leaves(cls: type, prefix: str = "") -> list[tuple[str, object]]:
    import dataclasses
    import typing

    hints, out = typing.get_type_hints(cls), []
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out += _leaves(hints[f.name], f"{prefix}{f.name}.")
        else:
            out.append((f"{prefix}{f.name}", f))
    return out


@pytest.mark.parametrize("name", sorted(SUITES))
def test_every_suite_setting_is_typed_with_help_and_its_file_states_only_the_preset(name):
    """The suite's typed config (Suite.config: EvalConfig and the suite's dataclass) is the one home of its
    defaults and help texts; recipes/suite/<name>.yaml keeps its description (the header) and `suite.quick`."""
    import yaml

    from smith.evals.config import EvalConfig

    config = get(name).config
    assert issubclass(config, EvalConfig) and config().suite.name == name
    missing = [key for key, f in _leaves(config) if not f.metadata.get("help")]
    assert missing == [], missing
    data = yaml.safe_load((ROOT / "recipes" / "suite" / f"{name}.yaml").read_text())
    assert data == {"suite": {"quick": data["suite"]["quick"]}}
