"""Issue 16, item 6: one error boundary for train.py, eval.py and `smith`. Bad input is one `error:` line naming
the bad value, exit code 2, before any model loads; Ctrl-C is `interrupted`, exit 130; SMITH_TRACEBACK=1 or
hydra.verbose=true shows the traceback; anything else is a bug and keeps its traceback.

The bad-input cases call the scripts' entry points in this process (`train_main` / `eval_main`, what train.py and
eval.py call), with loading a model made a bug: a fresh interpreter per case spent 15 s importing torch to print one
line. The real scripts, as processes, are checked by the traceback, Ctrl-C and `smith` tests below."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from smith.errors import ConfigError

from .conftest import MODEL_LOADING, ROOT, models_endpoint


def _run(*cmd: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *cmd], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "WANDB_MODE": "disabled", **(env or {})})


def _one_line_error(proc: subprocess.CompletedProcess, *names: str) -> str:
    """The run failed with exit 2 and one `error:` line naming `names`, before any model loaded."""
    shown = proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.returncode == 2, shown
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), shown
    assert "Traceback" not in proc.stderr and MODEL_LOADING not in proc.stdout + proc.stderr, shown
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


@pytest.fixture
def not_a_dir(tmp_path: Path) -> Path:
    """A path whose parent is a regular file: no one, root included, can create it."""
    (tmp_path / "file").write_text("x")
    return tmp_path / "file" / "out"


@pytest.fixture
def bad_pool(tmp_path: Path) -> Path:
    path = tmp_path / "tool_pool.json"
    path.write_text(json.dumps({"format_version": 999, "cap_per_category": 20, "entries": []}))
    return path


# ------------------------------------------------------------------------------------------------ eval.py
EVAL_CASES = {
    "missing model dir": (["suite=rg", "model={tmp}/no-model"], ["{tmp}/no-model"]),
    "openai spec without #model": (["suite=rg", "model=openai:http://127.0.0.1:9/v1"], ["openai:http://127.0.0.1:9/v1"]),
    "refused endpoint": (["suite=rg", "model=openai:http://127.0.0.1:9/v1#m"], ["http://127.0.0.1:9/v1/models",
                                                                                 "not answering"]),
    "unknown model prefix": (["suite=lomekwi", "model=ollama:llama3"], ["ollama:llama3"]),
    "limit not a number": (["suite=rg", "limit=abc"], ["limit=abc"]),
    "limit zero": (["suite=lomekwi", "model=scripted:random", "limit=0"], ["limit=0"]),
    "limit negative": (["suite=bor", "limit=-3"], ["limit=-3"]),
    "unknown mode": (["suite=rg", "mode=cott"], ["mode=cott", "build_use"]),
    "unknown rg category": (["suite=rg", "suite.categories=[lcm,nope]"], ["'nope'", "suite.categories"]),
    "rg sandbox timeout 0": (["suite=rg", "suite.sandbox.timeout_s=0"], ["suite.sandbox", "timeout_s"]),
    "unknown bfcl category": (["suite=bfcl", "suite.categories=[nope]"], ["'nope'"]),
    "unknown bor scorer": (["suite=bor", "suite.scorers=[bm25,bm52]"], ["'bm52'", "suite.scorers"]),
    "unknown lots family": (["suite=lots", "model=scripted:gold", "suite.families=[nope]"], ["'nope'"]),
    "unknown scripted agent": (["suite=lomekwi", "model=scripted:smart"], ["'smart'"]),
    "scripted agent where a suite has none": (["suite=rg", "model=scripted:optimal"], ["scripted:optimal"]),
    "unwritable output_dir": (["suite=lomekwi", "model=scripted:random", "output_dir={not_a_dir}"],
                              ["output_dir={not_a_dir}", "not a writable directory"]),
    "missing pool": (["suite=rg", "mode=pool", "suite.pool={tmp}/no-pool"], ["{tmp}/no-pool"]),
    "invalid pool file": (["suite=bor", "suite.pool={bad_pool}"], ["{bad_pool}", "format_version 999"]),
    "missing import_logs": (["suite=lomekwi", "import_logs={tmp}/no-logs"], ["{tmp}/no-logs"]),
    "unknown suite": (["suite=nope"], ["suite 'nope' not found"]),
}


@pytest.mark.parametrize("case", EVAL_CASES)
def test_eval_bad_input_is_one_line_before_loading(case, tmp_path, not_a_dir, bad_pool, in_process):
    from smith.entry import eval_main

    args, names = EVAL_CASES[case]
    fill = {"tmp": tmp_path, "not_a_dir": not_a_dir, "bad_pool": bad_pool}
    args = [a.format(**fill) for a in args]
    if not any(a.startswith("output_dir=") for a in args):
        args.append(f"output_dir={tmp_path / 'out'}")
    _one_line_error(in_process(eval_main, args), *(n.format(**fill) for n in names))
    if case != "unwritable output_dir":
        assert not (tmp_path / "out" / "summary.json").exists()


def test_eval_refuses_an_endpoint_that_does_not_serve_the_model(tmp_path):
    with models_endpoint("served-model") as url:
        spec = f"openai:{url}#other-model"
        _one_line_error(_run("eval.py", "suite=rg", f"model={spec}", f"output_dir={tmp_path / 'out'}"),
                        "serves ['served-model']", f"model={spec}")


def test_eval_refuses_an_output_dir_of_another_suite(tmp_path):
    """A directory a lomekwi run wrote into (marked .smith-suite), or an older one with a lomekwi summary.json,
    is refused by rg in one line instead of mixing logs (this used to be `KeyError: 'key'`)."""
    marked = tmp_path / "marked"
    proc = _run("eval.py", "suite=lomekwi", "model=scripted:random", "limit=1", "suite.n_values=[9]",
                "suite.t_values=[2]", "suite.plots=false", f"output_dir={marked}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (marked / ".smith-suite").read_text().strip() == "lomekwi"
    line = _one_line_error(_run("eval.py", "suite=rg", f"output_dir={marked}"), str(marked), "suite lomekwi")
    assert "another output_dir" in line
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "summary.json").write_text(json.dumps({"suite": "lomekwi"}))
    _one_line_error(_run("eval.py", "suite=recognition_mcp", "model=scripted:prober", f"output_dir={legacy}"),
                    str(legacy), "suite lomekwi")


def test_a_log_of_another_kind_is_a_config_error(tmp_path):
    from smith.evals.common import EpisodeLog

    (tmp_path / "episodes.jsonl").write_text(json.dumps({"cell": "x"}) + "\n")
    with pytest.raises(ConfigError, match=r"rows without 'key'.*another output_dir"):
        EpisodeLog(tmp_path / "episodes.jsonl")


# ------------------------------------------------------------------------------------------------ train.py
TRAIN_CASES = {
    "unwritable output_dir": (["output_dir={not_a_dir}"], ["output_dir={not_a_dir}", "not a writable directory"]),
    "missing resume dir": (["resume={tmp}/no-run"], ["resume={tmp}/no-run"]),
    "number of the wrong type": (["max_steps=abc"], ["max_steps=abc"]),
    "unknown category": (["tasks.categories=[lcm,nope]"], ["'nope'"]),
    "batch that does not split": (["dapo.prompts_per_step=3"], ["dapo.prompts_per_step=3"]),
    "missing generation script": (["generation.backend=scripted", "generation.script=tests.nope:fn"],
                                  ["tests.nope:fn"]),
    "refused judge endpoint": (["judge.kind=external", "judge.base_url=http://127.0.0.1:9/v1", "judge.model_name=m"],
                               ["http://127.0.0.1:9/v1/models"]),
    "unknown recipe": (["recipe=nope"], ["recipe 'nope' not found"]),
    "unwritable model.warm_dir": (["model.name_or_path=tiny-warm", "model.warm_dir={not_a_dir}/warm"],
                                  ["model.warm_dir={not_a_dir}/warm", "cannot be built"]),
    "unwritable tasks.cache_dir": (["tasks.cache_dir={not_a_dir}"], ["tasks.cache_dir={not_a_dir}"]),
    "pool.retrieval dir without a retriever": (["pool.retrieval={tmp}"], ["pool.retrieval={tmp}", "retriever.json"]),
    "sandbox.url not answering": (["sandbox.url=http://127.0.0.1:9"], ["http://127.0.0.1:9/health"]),
}


@pytest.mark.parametrize("case", TRAIN_CASES)
def test_train_bad_input_is_one_line_before_loading(case, tmp_path, not_a_dir, in_process):
    from smith.entry import train_main

    args, names = TRAIN_CASES[case]
    fill = {"tmp": tmp_path, "not_a_dir": not_a_dir}
    args = [a.format(**fill) for a in args]
    if not any(a.startswith(("output_dir=", "resume=")) for a in args):
        args.append(f"output_dir={tmp_path / 'run'}")
    _one_line_error(in_process(train_main, ["recipe=tiny-random", *args]),
                    *(n.format(**fill) for n in names))
    assert not (tmp_path / "run").exists()  # no run directory left behind


def _interrupt(cmd: list[str], ready: bytes, stream: str) -> tuple[subprocess.Popen, str, str]:
    """Start `cmd`, send SIGINT to its process group (what Ctrl-C in a terminal sends) once the pattern `ready`
    matches on `stream` (stdout or stderr), and collect what it wrote."""
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    # a shell may start background jobs with SIGINT ignored, and children inherit that: give it the default back
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = {"stdout": b"", "stderr": b""}
    try:
        while not re.search(ready, seen[stream]):
            chunk = os.read(getattr(proc, stream).fileno(), 4096)
            assert chunk, f"it ended before {ready!r}: {seen[stream][-2000:]!r}"
            seen[stream] += chunk
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc, (seen["stdout"] + out).decode(), (seen["stderr"] + err).decode()


def _one_line_interrupted(proc: subprocess.Popen, err: str) -> None:
    assert proc.returncode == 130, err[-3000:]
    assert err.strip().splitlines()[-1] == "interrupted" and "Traceback" not in err, err[-3000:]


def test_ctrl_c_is_one_line_and_exit_130(tiny_model_dir, tmp_path):
    """Once training is running."""
    proc, out, err = _interrupt([sys.executable, "train.py", "recipe=tiny-random", f"model.tiny_dir={tiny_model_dir}",
                                 "max_steps=50", f"tasks.cache_dir={tmp_path / 'items'}",
                                 f"output_dir={tmp_path / 'run'}"], rb"(?m)^step ", "stdout")
    _one_line_interrupted(proc, err)
    assert "trained tiny-random" not in out  # it stopped, it did not finish


def test_ctrl_c_on_eval_is_one_line_and_exit_130(tmp_path):
    """Once episodes are being played (the progress bar has counted one): a scripted agent, 9,000 episodes."""
    proc, _, err = _interrupt([sys.executable, "eval.py", "suite=lomekwi", "model=scripted:random",
                               "suite.reps=1000", "suite.plots=false", f"output_dir={tmp_path / 'out'}"],
                              rb"[1-9][0-9]*/9000", "stderr")
    _one_line_interrupted(proc, err)
    assert not (tmp_path / "out" / "summary.json").exists()  # it stopped, it did not finish


def test_the_boundary_passes_bugs_through_and_shows_tracebacks_on_request(monkeypatch, capsys):
    from smith.errors import guarded

    def bug():
        raise RuntimeError("a bug")

    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(RuntimeError, match="a bug"):  # not bad input: its traceback is Python's own
        guarded(bug)
    monkeypatch.setenv("SMITH_TRACEBACK", "1")
    with pytest.raises(SystemExit) as stop:
        guarded(interrupted)
    err = capsys.readouterr().err
    assert stop.value.code == 130 and "Traceback" in err and err.strip().splitlines()[-1] == "interrupted"


@pytest.mark.parametrize("switch", ["SMITH_TRACEBACK=1", "hydra.verbose=true"])
@pytest.mark.parametrize("script", ["eval.py", "train.py"])
def test_smith_traceback_or_hydra_verbose_shows_the_traceback(script, switch):
    bad = "limit=abc" if script == "eval.py" else "max_steps=abc"
    args = [script, "suite=rg" if script == "eval.py" else "recipe=tiny-random", bad]
    proc = _run(*args, env={"SMITH_TRACEBACK": "1"}) if switch.startswith("SMITH") else _run(*args, switch)
    assert proc.returncode == 2
    assert "Traceback (most recent call last)" in proc.stderr and "smith.errors.ConfigError" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: {bad}")


def test_hydra_verbose_values():
    from smith.entry import hydra_verbose

    assert hydra_verbose(["recipe=tiny", "hydra.verbose=true"]) and hydra_verbose(["hydra.verbose=[smith]"])
    assert not hydra_verbose(["hydra.verbose=false"]) and not hydra_verbose(["recipe=tiny"])


# ------------------------------------------------------------------------------------------------ smith
def test_smith_bad_input_is_one_line(tmp_path):
    _one_line_error(_run("-m", "smith.cli", "export-pool", str(tmp_path / "no-run"), "--format", "jsonl", "--out",
                         str(tmp_path / "x.jsonl")), str(tmp_path / "no-run"))
    tool = tmp_path / "tool.py"
    tool.write_text("def f(question: str) -> str:\n    return question\n")
    _one_line_error(_run("-m", "smith.cli", "grade", "--category", "nope", "--tool", str(tool)), "'nope'")
    _one_line_error(_run("-m", "smith.cli", "report", str(tmp_path / "no-dir")), str(tmp_path / "no-dir"))
    (tmp_path / "file").write_text("x")
    _one_line_error(_run("-m", "smith.cli", "tiny-model", str(tmp_path / "file" / "model")), "DIR=", "cannot be built")
    pool = tmp_path / "pool.json"
    pool.write_text(json.dumps({"format_version": 1, "cap_per_category": 4, "entries": []}))
    _one_line_error(_run("-m", "smith.cli", "export-pool", str(pool), "--format", "jsonl", "--out", str(tmp_path)),
                    f"--out {tmp_path} is a directory")
    _one_line_error(_run("-m", "smith.cli", "serve-pool", str(pool), "--retriever", str(tmp_path)), "retriever.json")
    no_def = tmp_path / "no_def.py"
    no_def.write_text("X = 1\n")
    _one_line_error(_run("-m", "smith.cli", "grade", "--category", "lcm", "--tool", str(no_def)),
                    "no top-level function")


BUG = """
import sys
import smith.pool.export as export

def broken(*args, **kwargs):
    raise {exc}("a bug in smith, not bad input")

export.export = broken
from smith.cli import main

main(sys.argv[1:])
"""


@pytest.mark.parametrize("exc", ["FileNotFoundError", "ValueError"])
def test_smith_reports_a_bug_with_its_traceback_not_as_bad_input(exc, tmp_path):
    """The CLI maps only its argument checks to exit 2: the same exception types from inside a subcommand are a
    bug, exit 1 with Python's traceback."""
    pool = tmp_path / "pool.json"
    pool.write_text(json.dumps({"format_version": 1, "cap_per_category": 4, "entries": []}))
    proc = _run("-c", BUG.format(exc=exc), "export-pool", str(pool), "--format", "jsonl", "--out",
                str(tmp_path / "out.jsonl"))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback (most recent call last)" in proc.stderr and "error:" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"{exc}: a bug in smith, not bad input"
