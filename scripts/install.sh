#!/usr/bin/env bash
# Install the harness into the active Python environment.
#   scripts/install.sh            -> runtime only
#   scripts/install.sh dev        -> runtime + test tools (pytest, ruff, trl as test oracle)
#   scripts/install.sh gpu        -> runtime + vLLM (GPU machines only)
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
if [ -n "$extras" ]; then
  python -m pip install -q -e ".[${extras}]"
else
  python -m pip install -q -e .
fi
