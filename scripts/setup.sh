#!/usr/bin/env bash
# One-time setup on a fresh machine: OS packages for the sandbox, a virtualenv, smith and its pins.
# Idempotent: a second run only checks. Needs root (or sudo) for apt on Debian; skips apt elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS="bubblewrap libseccomp2 iproute2 procps"
if command -v apt-get >/dev/null; then
  missing=$(for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
  if [ -n "$missing" ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq $missing >/dev/null
  fi
fi
PY=${PYTHON:-python3.11}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch first, exactly: the CPU wheel (any looser spec can pull a multi-GB CUDA build)
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[dev]"
# BFCL v4 lives in its own venv (bfcl-eval pins numpy 1.26); without it the bfcl tests skip and say why
.venv/bin/python -m smith.evals.bfcl.venv || echo "warning: the BFCL venv was not built; bfcl tests will be skipped"
# The warm-started tiny policy of `recipe=tiny` and of the learning test (SFT with TRL; about 12 minutes on
# 2 cores the first time, cached in checkpoints/.tiny-warm afterwards)
.venv/bin/smith tiny-model checkpoints/.tiny-warm --warm
