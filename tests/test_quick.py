"""`quick=true`: every suite's preset composes (the user's overrides still win), and each documented quick
command of docs/evaluation.md runs to a summary (the slow ones only under `-m slow`)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from smith.entry import compose, options

from .conftest import ROOT

DOC = (ROOT / "docs" / "evaluation.md").read_text()
QUICK = re.findall(r"^\| `(python eval\.py [^`]*quick=true)`", DOC, re.M)
FAST = ("model=scripted:", "suite=bor ")  # no model to run: seconds


@pytest.mark.parametrize("suite", options("suite"))
def test_every_suite_has_a_preset_and_user_overrides_win(suite):
    cfg = compose("eval", [f"suite={suite}", "quick=true"], ("suite",))
    preset = list(cfg.suite.quick)
    assert preset, f"recipes/suite/{suite}.yaml has no suite.quick"
    plain = compose("eval", [f"suite={suite}"], ("suite",))
    for item in preset:
        key, _, _ = item.partition("=")
        expected = compose("eval", [f"suite={suite}", item], ("suite",))
        assert OmegaConf.select(cfg, key) == OmegaConf.select(expected, key), item
    changed = [i for i in preset if OmegaConf.select(cfg, i.partition("=")[0]) != OmegaConf.select(plain,
                                                                                               i.partition("=")[0])]
    assert changed, f"suite.quick of {suite} changes nothing"
    mine = compose("eval", [f"suite={suite}", "quick=true", "limit=7"], ("suite",))
    assert mine.limit == 7


def test_a_misspelt_quick_is_one_line_error():
    from smith.errors import ConfigError

    with pytest.raises(ConfigError, match="quick=maybe must be true or false"):
        compose("eval", ["suite=lomekwi", "quick=maybe"], ("suite",))


def test_every_suite_documents_its_quick_command():
    assert {re.search(r"suite=(\w+)", c).group(1) for c in QUICK} == set(options("suite"))


def _run(command: str, out) -> dict:
    args = shlex.split(command)[1:]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, *args, f"output_dir={out}"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    return json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize("command", [c for c in QUICK if any(f in c for f in FAST)])
def test_fast_quick_commands_run(command, tmp_path):
    summary = _run(command, tmp_path / "out")
    assert summary["suite"] in command


@pytest.mark.slow
@pytest.mark.parametrize("command", [c for c in QUICK if not any(f in c for f in FAST)])
def test_model_quick_commands_run(command, tmp_path):
    summary = _run(command.split(" (")[0].replace("`", ""), tmp_path / "out")
    assert summary["suite"] in command
