"""`python -m smith.evals.bor`: every command docs/bor.md shows, run as written, and one-line errors (exit 2)."""

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from smith.evals.bor.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "bor.md"

# what each documented command must print (worked out by hand in tests/test_bor_audit.py and
# tests/test_bor_metric.py, and the reference's output for the same inputs); None: it must fail with exit 2
DOCUMENTED = {
    "python -m smith.evals.bor --N 400000 --R 20000 --K 100 --observed 1.0": [
        "Random baseline: 0.9941", "Bits-over-Random: 0.0086", "BoR ceiling: 0.0086", "lambda: 5.0000",
        "warning: random baseline is already near 1.0", "warning: lambda is in the collapse zone"],
    "python -m smith.evals.bor calc --N 600 --R 6 --K 40 --observed 0.8 --m 2": [
        "Random baseline: 0.0548", "Bits-over-Random: 3.8672", "BoR ceiling: 4.1891", "lambda: 0.4000"],
    "python -m smith.evals.bor audit tests/fixtures/bor/retrieval_log.jsonl": [
        "observed success P_obs  0.8000", "random baseline P_rand  0.3676", "Bits-over-Random        +1.1220",
        "BoR ceiling (mean)      2.4740", "lambda (mean)           0.4720", "collapse-zone queries   20%",
        "SELECTIVE: 1.12 bits over random"],
    "python -m smith.evals.bor audit tests/fixtures/bor/retrieval_log.csv --csv --default-R 2": [
        "queries                 4", "random baseline P_rand  0.2355", "Bits-over-Random        +1.0865",
        "note: rows without an R field"],
    "python -m smith.evals.bor audit tests/fixtures/bor/retrieval_log.csv --csv --R-frac 0.1 "
    "--bootstrap 500 --seed 1": [
        "random baseline P_rand  0.3992", "Bits-over-Random        +0.3246", "WEAK: 0.32 bits over random"],
    "python -m smith.evals.bor audit tests/fixtures/bor/custom_columns.jsonl --map N=corpus,K=shown,hit=ok,R=rel": [
        "queries                 2", "random baseline P_rand  0.1000", "Bits-over-Random        +2.3219"],
    "python -m smith.evals.bor audit tests/fixtures/bor/retrieval_log.jsonl --strict": None,
}  # fmt: skip


def _documented_commands() -> list[str]:
    return re.findall(r"^(python -m smith\.evals\.bor\b.*)$", DOC.read_text(), re.M)


def test_every_documented_command_has_a_check():
    assert sorted(_documented_commands()) == sorted(DOCUMENTED)


@pytest.mark.parametrize("command", sorted(DOCUMENTED))
def test_documented_command_runs_as_written(command):
    args = command.split()[1:]
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    expected = DOCUMENTED[command]
    if expected is None:
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.strip() == (
            "python -m smith.evals.bor: error: line 7: no N field; keys present: ['found', 'num_relevant', "
            "'query_id', 'top_k']")
        return
    assert done.returncode == 0, done.stderr
    for line in expected:
        assert line in done.stdout, (line, done.stdout)


def test_documented_python_snippet_runs(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    block = re.search(r"```python\n(from smith\.evals\.bor import audit.*?)```", DOC.read_text(), re.S).group(1)
    exec(block, {})
    out = capsys.readouterr().out
    assert out.startswith("SELECTIVE 1.122\n") and "+1.1220" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--N", "10.5", "--R", "1", "--K", "2", "--observed", "0.5"], "argument --N: invalid int value: '10.5'"),
    (["calc", "--N", "10", "--R", "11", "--K", "1", "--observed", "0.5"], "0 <= R <= N, 0 <= K <= N; got N=10, R=11"),
    (["calc", "--N", "10", "--R", "1", "--K", "2", "--observed", "1.5"], "--observed is a success rate in [0, 1]"),
    (["calc", "--N", "10", "--R", "1", "--K", "2"], "the following arguments are required: --observed"),
    (["audit", "/nonexistent/log.jsonl"], "No such file or directory"),
    (["audit", "tests/fixtures/bor/retrieval_log.csv", "--csv"], "line 2: no relevant-count field (R)"),
    (["audit", "tests/fixtures/bor/retrieval_log.jsonl", "--map", "N"], "--map takes FIELD=COLUMN pairs"),
    (["audit", "tests/fixtures/bor/retrieval_log.jsonl", "--map", "depth=top_k"], "mapping names unknown fields"),
    (["audit", "tests/fixtures/bor/retrieval_log.jsonl", "--bootstrap", "0"], "at least one resample"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(capsys, monkeypatch, argv, message):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.match(r"python -m smith\.evals\.bor( calc| audit)?: error: ", err), err
    assert message in err, err


def test_calc_at_zero_chance_prints_nan_and_inf(capsys):
    main(["--N", "50", "--R", "0", "--K", "10", "--observed", "0"])
    out = capsys.readouterr().out
    assert "Random baseline: 0.0000" in out and "Bits-over-Random: nan" in out and "BoR ceiling: inf" in out
    assert math.isnan(float(re.search(r"Bits-over-Random: (\S+)", out).group(1)))
