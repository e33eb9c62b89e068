#!/usr/bin/env bash
# Download, on a networked machine, the wheels a GPU machine without network needs to run the
# project, besides what its image already has (torch, transformers, accelerate and their own
# dependencies), for CPython 3.12 on manylinux x86_64, into one folder:
#   scripts/gpu_wheels.sh [DIR]          # default DIR: .gpu-wheels (git-ignored)
# On the GPU machine, from the repository root (docs/gpu.md):
#   pip install --no-index --find-links .gpu-wheels -r .gpu-wheels/requirements.txt
#   pip install --no-index --no-deps --no-build-isolation -e .
#
# What goes in: the runtime dependencies of pyproject.toml except torch, transformers, tokenizers
# and accelerate (the image's) and except datasets and scipy, plus pytest and pytest-timeout; each
# with its dependencies, minus the ones the image already has (ASSUMED_PRESENT below: what torch,
# transformers and accelerate install) and setuptools for the editable install. Left out on purpose:
# - datasets (with pyarrow ~45 MB): only benchmarks fetched from the Hugging Face hub need it, and
#   the GPU machine cannot reach the hub;
# - scipy (~35 MB): only Optuna's Wilcoxon pruner (bench sweep --pruner wilcoxon) imports it.
# The folder stays a few tens of MB; the script prints its size and its wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.gpu-wheels}"
python="${PYTHON:-python3}"

# The image's packages: torch 2.11 with its CUDA libraries and its own dependencies (sympy, mpmath,
# typing-extensions, jinja2, markupsafe, networkx, filelock, fsspec), transformers and accelerate
# with theirs (numpy, packaging, pyyaml, tqdm, regex, safetensors, huggingface-hub, psutil). A
# package listed here that the machine lacks makes the first install command fail with its name
# ("No matching distribution found for NAME"): take it out of this list and run the script again.
ASSUMED_PRESENT="torch triton transformers tokenizers accelerate huggingface-hub hf-xet safetensors \
regex tqdm numpy packaging pyyaml psutil filelock fsspec typing-extensions sympy mpmath networkx \
jinja2 markupsafe"
EXCLUDED="torch transformers tokenizers accelerate datasets scipy"

requirements=$("$python" - "$EXCLUDED" <<'PY'
import re, sys, tomllib
excluded = set(sys.argv[1].split())
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
dev = [r for r in project["optional-dependencies"]["dev"] if re.match(r"pytest", r)]
for requirement in project["dependencies"] + dev + ["setuptools>=68"]:
    name = re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]
    if name.lower() not in excluded:
        print(requirement)
PY
)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "gpu_wheels.sh: resolving for CPython 3.12, manylinux x86_64:" $requirements
# shellcheck disable=SC2086  # one argument per requirement
"$python" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d "$tmp" $requirements

rm -rf "$out"
mkdir -p "$out"
kept=0
for wheel in "$tmp"/*.whl; do
  # a wheel's file name starts with its project name, '-' and '.' spelled '_' (PEP 427)
  name="$(basename "$wheel" | cut -d- -f1 | tr '[:upper:]_.' '[:lower:]--')"
  if [[ " $ASSUMED_PRESENT " == *" $name "* ]]; then
    continue
  fi
  cp "$wheel" "$out/"
  kept=$((kept + 1))
done
printf '%s\n' $requirements >"$out/requirements.txt"
echo "gpu_wheels.sh: $kept wheels in $out ($(du -sh "$out" | cut -f1)):"
ls -1 "$out" | grep '\.whl$' | sed 's/^/  /'
echo "install on the GPU machine: pip install --no-index --find-links $out -r $out/requirements.txt"
echo "                            pip install --no-index --no-deps --no-build-isolation -e ."
