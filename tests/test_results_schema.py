"""One results schema for every suite: each suite's quick run writes a summary.json that is strict JSON (no NaN /
Infinity) and validates against smith/evals/results.schema.json; run.json refuses a rerun with other settings
(one line, exit 2) and lets the same settings resume; `smith report` reads only that schema, with working links."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from smith.entry import ConfigError, eval_config
from smith.evals.common import SCHEMA_FILE, validate_summary, write_json

from .conftest import ROOT
from .test_eval_bfcl import needs_bfcl
from .test_eval_ood import FILES


def _strict_load(path: Path) -> dict:
    def refuse(name: str) -> None:
        raise ValueError(f"{path}: {name} is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def _check(out: Path, suite: str) -> dict:
    """summary.json and run.json of `out`: strict JSON, the schema, and the same recorded config."""
    summary = _strict_load(out / "summary.json")
    validate_summary(summary)
    assert summary["suite"] == suite and summary["metrics"], suite
    assert _strict_load(out / "run.json")["config"] == summary["config"]
    assert summary["versions"]["smith"] and summary["versions"]["python"]
    assert (out / "results.md").is_file()
    return summary


QUICK = {  # the suites that run without a model server, through eval.py's own entry (smith.evals.run)
    "lomekwi": ["model=scripted:optimal"],
    "recognition_mcp": ["model=scripted:manual"],
    "lots": ["model=scripted:gold"],
    "bor": [],
    "rg": ["model=tiny"],
    "tabmwp": ["model=tiny", *FILES["tabmwp"]],
    "gqa": ["model=tiny", *FILES["gqa"]],
}


@pytest.mark.parametrize("suite", sorted(QUICK))
def test_every_suite_writes_the_one_schema(suite, tmp_path, tiny_model_dir, rg_cache):
    from smith.evals import run

    extra = [f"suite.cache_dir={rg_cache}"] if suite == "rg" else []
    out = tmp_path / suite
    cfg = eval_config([f"suite={suite}", *QUICK[suite], "quick=true", f"tiny_dir={tiny_model_dir}",
                       f"output_dir={out}", *extra])
    returned = run(cfg)
    summary = _check(out, suite)
    assert returned == summary
    assert summary["config"]["quick"] is True and "output_dir" not in summary["config"]
    for m in summary["metrics"].values():
        assert all(v is None or math.isfinite(v) for v in (m["value"], m["lo"], m["hi"], m["se"]))
        assert (m["interval"] is None) == (m["lo"] is None and m["hi"] is None) or m["value"] is None


@needs_bfcl
def test_bfcl_writes_the_one_schema(tmp_path, tiny_model_dir):
    from smith.evals.bfcl import run
    from tests.test_eval_bfcl import _cfg, _served

    _, server = _served(tiny_model_dir)
    with server as url:
        run(_cfg(url, tmp_path / "bfcl"))
    summary = _check(tmp_path / "bfcl", "bfcl")
    assert summary["metrics"]["simple_python/accuracy"]["interval"] == "wilson-95"
    assert summary["metrics"]["tokens/input"]["unit"] == "tokens per item"


def test_nan_and_infinity_are_written_as_null(tmp_path):
    """A rate over zero episodes is undefined: null, so strict parsers read the file (lomekwi wrote NaN)."""
    import numpy as np

    write_json(tmp_path / "x.json", {"a": float("nan"), "b": [np.float64("inf"), -math.inf], "c": np.int64(3)})
    assert _strict_load(tmp_path / "x.json") == {"a": None, "b": [None, None], "c": 3}


def test_schema_file_is_a_valid_json_schema():
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA_FILE.read_text()))


def _eval(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "eval.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def test_a_rerun_with_other_settings_is_refused_and_the_same_resumes(tmp_path):
    out = tmp_path / "lomekwi"
    base = ("suite=lomekwi", "model=scripted:optimal", "quick=true", "suite.plots=false", f"output_dir={out}")
    assert _eval(*base).returncode == 0
    log = (out / "episodes.jsonl").read_text()
    again = _eval(*base, "suite.max_new_tokens=300", "suite.hint=false")
    assert again.returncode == 2
    (line,) = again.stderr.strip().splitlines()[-1:]
    assert line.startswith("error: ") and "other settings" in line
    assert "suite.max_new_tokens: 256 -> 300" in line and "suite.hint: true -> false" in line
    assert (out / "episodes.jsonl").read_text() == log  # nothing played, nothing mixed
    assert _eval(*base, "limit=2").returncode == 0  # more items, same settings: resumes
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 4
    assert _strict_load(out / "summary.json")["config"]["limit"] == 2


def test_a_model_directory_reached_by_another_path_resumes(tmp_path):
    """run.json's `model` names a directory; the same directory by another path (a symlink, as when runs are
    gathered into one place, or a relative path) is the same model and resumes, another directory is refused."""
    from smith.evals.common import check_run

    model, other = tmp_path / "checkpoint-20", tmp_path / "checkpoint-10"
    model.mkdir()
    other.mkdir()
    (tmp_path / "gathered").symlink_to(model)
    out = tmp_path / "out"
    base = ["suite=rg", "mode=build_use", f"output_dir={out}"]  # (lomekwi may change its model: keyed by it)
    out.mkdir()
    check_run(eval_config([*base, f"model={model}"]), out)
    (out / "episodes.jsonl").write_text("{}\n")  # results made
    check_run(eval_config([*base, f"model={tmp_path / 'gathered'}"]), out)
    assert json.loads((out / "run.json").read_text())["config"]["model"] == str(tmp_path / "gathered")
    check_run(eval_config([*base, f"model={os.path.relpath(model)}"]), out)  # relative to the working directory
    with pytest.raises(ConfigError, match="other settings"):
        check_run(eval_config([*base, f"model={other}"]), out)


def test_report_reads_only_the_schema_and_links_what_exists(tmp_path):
    from smith.evals import run
    from smith.evals.report import build_report

    runs = tmp_path / "runs"
    run(eval_config(["suite=lomekwi", "model=scripted:optimal", "quick=true", "suite.plots=false",
                     f"output_dir={runs / 'lomekwi'}"]))
    old = runs / "old"
    old.mkdir()
    (old / "summary.json").write_text('{"suite": "lomekwi", "models": {"m": {"R": NaN}}}')
    md = build_report([runs], tmp_path / "report").read_text()
    assert f"skipped `{old}`: not strict JSON" in md
    links = re.findall(r"\[results\.md\]\(([^)]+)\)", md)
    assert links and all((tmp_path / "report" / link).resolve().is_file() for link in links)
