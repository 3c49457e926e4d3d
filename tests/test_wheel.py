"""A built wheel, installed into a fresh venv outside the repository, runs `smith train` and `smith eval` with the
recipes it ships (no checkout on the path; the venv borrows the dependencies of the test environment)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from .conftest import ROOT


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # a copy: setuptools builds in the source tree, and the checkout stays clean
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".cache", "checkpoints", "build", "*.egg-info", "__pycache__", "fixtures"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp / "dist")], check=True, cwd=tmp)
    [wheel] = (tmp / "dist").glob("smith-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # the test environment's packages, as a plain path: its .pth files (smith's editable install) are not run
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
                   check=True)
    return venv


def _smith(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(OMP_NUM_THREADS="1", WANDB_MODE="disabled")
    return subprocess.run([str(venv / "bin" / "smith"), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_the_wheel_runs_train_and_eval_from_anywhere(installed, warm_model_dir, tmp_path):
    where = _smith(installed, tmp_path, "--version")
    assert where.returncode == 0 and where.stdout.startswith("smith "), where.stderr
    probe = subprocess.run([str(installed / "bin" / "python"), "-c", "import smith; print(smith.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert str(installed) in probe.stdout, probe  # the wheel's copy, not the checkout
    suites = _smith(installed, tmp_path, "suites")
    assert suites.returncode == 0 and "lomekwi" in suites.stdout and "rg" in suites.stdout

    ev = _smith(installed, tmp_path, "eval", "suite=lomekwi", "model=scripted:optimal", "quick=true",
                f"output_dir={tmp_path / 'eval'}")
    assert ev.returncode == 0, ev.stderr[-3000:]
    assert json.loads((tmp_path / "eval" / "summary.json").read_text())["suite"] == "lomekwi"

    tr = _smith(installed, tmp_path, "train", "recipe=tiny", f"model.warm_dir={warm_model_dir}", "max_steps=1",
                "save_every=1", f"output_dir={tmp_path / 'run'}")
    assert tr.returncode == 0, (tr.stdout + tr.stderr)[-3000:]
    assert "step   1/1" in tr.stdout and (tmp_path / "run" / "adapter_model.safetensors").exists()
