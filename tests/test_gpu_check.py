"""Issue 19: `scripts/gpu_check.sh --dry-run`, the prepared one-GPU check at tiny dimensions on CPU (~40 s): the
same script and driver a GPU machine runs, down to the table and the JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from .conftest import ROOT


def test_gpu_check_dry_run(tmp_path):
    out = tmp_path / "gpu_check.json"
    proc = subprocess.run(["scripts/gpu_check.sh", "--dry-run", "--work", str(tmp_path / "work"), "--out", str(out)],
                          cwd=ROOT, env={**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "step | generation s | grading s | update s" in proc.stdout and f"gpu_check: wrote {out}" in proc.stdout
    result = json.loads(out.read_text())
    assert [s["step"] for s in result["steps"]] == [1, 2, 3]
    assert all(s["generation_s"] > 0 and s["update_s"] > 0 and s["tokens_per_s"] > 0 for s in result["steps"])
    assert len(result["evaluator_sync_s"]) == 2  # synced at the start of steps 2 and 3
    assert result["checkpoint"] == "checkpoint-3" and result["checkpoint_mb"] > 0
    assert result["peak_gpu_memory_gb"] is None and result["device"] == "cpu (dry run)"
    assert {r["role"] for r in result["roles"]} >= {"policy"} and all(r["engine"] == "hf" for r in result["roles"])
    decode = result["decode"]  # smith's loop against transformers generate on one batch, both caches
    assert "smith / best generate:" in proc.stdout and decode["rows"] == 64
    assert all(decode[k]["tokens_per_s"] > 0 for k in ("smith", "generate_dynamic", "generate_static"))
    assert decode["ratio"] > 0 and decode["same_tokens"] == 1.0 and decode["met"] == (decode["ratio"] >= 1.0)


def test_gpu_check_real_dry_run(tmp_path):
    """Issue 29 item 6: `--real --dry-run`, the real-weights learning check's pipeline on CPU (the tiny random model
    in SmolLM2's place, about 1.5 min): cold start, smith and a learning-rate-0 control for 2 steps from it, held-out
    build_use accuracy of the three, the verdict against the targets."""
    out = tmp_path / "real.json"
    proc = subprocess.run(["scripts/gpu_check.sh", "--real", "--dry-run", "--work", str(tmp_path / "work"),
                           "--out", str(out)], cwd=ROOT,
                          env={**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "arm | evaluation, first -> last 5" in proc.stdout and "paired (smith - control, last 5)" in proc.stdout
    result = json.loads(out.read_text())
    assert result["steps"] == 2 and set(result["held_out_accuracy"]) == {"cold_start", "smith", "control"}
    assert all(0.0 <= x <= 1.0 for x in result["held_out_accuracy"].values())
    assert set(result["verdict"]) == {"paired", "held_out"} and result["met"] == all(result["verdict"].values())
    work = tmp_path / "work" / "real-dry"
    for arm in ("smith", "control"):
        rows = [json.loads(x) for x in (work / f"run-{arm}" / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == [1, 2] and result["arms"][arm]["evaluation"][0] is not None
        u = result["arms"][arm]["use_answers"]
        assert u["episodes"] > 0 and 0 <= u["right_without_tool"] <= u["right"] <= u["episodes"]
    control = yaml.safe_load((work / "run-control" / "config.yaml").read_text())
    assert control["dapo"]["learning_rate"] == 0 and control["model"]["name_or_path"] == str(work / "cold-start")


def test_a_missing_gguf_file_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "smith.gpu_check", "--real", "--gguf", str(tmp_path / "none.gguf"),
                           "--work", str(tmp_path / "work")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and proc.stderr.strip() == f"error: --gguf {tmp_path / 'none.gguf'} is not a file; " \
        "pass the SmolLM2-135M-Instruct GGUF file"
    assert not (tmp_path / "work").exists()
