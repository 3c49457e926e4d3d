"""Issue 19: `scripts/gpu_check.sh --dry-run`, the prepared one-GPU check at tiny dimensions on CPU (~40 s): the
same script and driver a GPU machine runs, down to the table and the JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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
