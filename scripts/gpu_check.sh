#!/usr/bin/env bash
# The GPU check: one command on a machine with one NVIDIA GPU and no network, Python 3.12 with
# torch, transformers and accelerate installed (no vLLM). From the repository root:
#   scripts/gpu_check.sh                     # prints ONE JSON object (last line of stdout)
# Steps, each with its own log in $GPU_CHECK_OUT (default gpu-check/), each allowed to fail
# without stopping the others (the JSON names every problem; the exit code is 1 if any):
#   1. install: the wheel folder of scripts/gpu_wheels.sh (.gpu-wheels/, or $GPU_WHEELS) with
#      `pip install --no-index`, then the project with --no-deps (GPU_CHECK_SKIP_INSTALL=1 skips);
#   2. tests: pytest on tests/gpu (the gpu-marked learner tests, a 30-step arith run, and the
#      torch engine's contract, which runs on CUDA where there is a GPU), junit XML for the counts;
#   3. the learner benchmark and the JSON (bench/perf/gpu_check.py): step time, tokens/s, peak
#      memory beside `bench plan`'s figure, MFU on a random Qwen3-0.6B shape at 16k tokens a step.
# Budget: under 8 minutes (tests 330 s, benchmark 150 s at most, by `timeout`).
# GPU_CHECK_ALLOW_CPU=1: a dry run without a GPU (GPU tests skip, the benchmark uses a tiny shape
# on the CPU): it proves the plumbing, its numbers mean nothing. GPU_CHECK_TESTS: the test paths.
# Without a wheel folder the packages already installed are used if the project imports with
# them; otherwise install_rc is 3 and the JSON says what is missing.
# The repository root goes first on PYTHONPATH, so the check runs this checkout's code even where
# the editable install failed. From the project's device tool: run "scripts/gpu_check.sh" with
# carry [".gpu-wheels"] (the wheel folder is git-ignored, so it travels only when carried).
set -uo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
out="${GPU_CHECK_OUT:-gpu-check}"
wheels="${GPU_WHEELS:-.gpu-wheels}"
tests="${GPU_CHECK_TESTS:-tests/gpu}"
started="$(date +%s)"
mkdir -p "$out"
rm -f "$out/tests.xml" "$out/arith_run.json"
export GPU_CHECK_OUT="$out" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

say() { echo "gpu_check: $*" >&2; }
tiny=()
if ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  if [[ "${GPU_CHECK_ALLOW_CPU:-0}" != "1" ]]; then
    say "no CUDA device visible to torch (set GPU_CHECK_ALLOW_CPU=1 for a dry run on the CPU)"
    echo '{"gpu_check": 1, "device": null, "problems": ["no CUDA device visible to torch"]}'
    exit 1
  fi
  say "no CUDA device: a dry run on the CPU (GPU_CHECK_ALLOW_CPU=1)"
  tiny=(--tiny)
fi

install_rc=0
if [[ "${GPU_CHECK_SKIP_INSTALL:-0}" == "1" ]]; then
  say "install skipped (GPU_CHECK_SKIP_INSTALL=1)"
elif [[ ! -f "$wheels/requirements.txt" ]]; then
  say "no wheel folder at $wheels (scripts/gpu_wheels.sh makes one): using the installed packages"
  if ! "$python" -c 'import pytest, bench.config, bench.train.loop, bench.perf.gpu_check' \
    >"$out/install.log" 2>&1; then
    say "the project does not import without the wheels: $(tail -n 1 "$out/install.log")"
    install_rc=3
  fi
else
  say "installing from $wheels (log: $out/install.log)"
  { "$python" -m pip install --no-index --find-links "$wheels" -r "$wheels/requirements.txt" &&
    "$python" -m pip install --no-index --no-deps --no-build-isolation -e .; } >"$out/install.log" 2>&1
  install_rc=$?
  [[ $install_rc -ne 0 ]] && say "install failed (rc $install_rc): $(tail -n 3 "$out/install.log" | tr '\n' ' ')"
fi

say "tests: $tests (log: $out/tests.log)"
per_test=()  # a test that hangs fails alone (pytest-timeout), so the junit XML still gets written
"$python" -c 'import pytest_timeout' 2>/dev/null && per_test=(--timeout 150)
# shellcheck disable=SC2086  # GPU_CHECK_TESTS may name several paths
timeout 330 "$python" -m pytest -q -p no:cacheprovider --junitxml="$out/tests.xml" "${per_test[@]}" $tests \
  >"$out/tests.log" 2>&1
tests_rc=$?
say "tests rc $tests_rc: $(tail -n 1 "$out/tests.log")"

say "learner benchmark (log: $out/benchmark.log)"
timeout 150 "$python" -m bench.perf.gpu_check --out "$out" "${tiny[@]}" --install-rc "$install_rc" \
  --tests-rc "$tests_rc" --started "$started" >"$out/result.json" 2>"$out/benchmark.log"
bench_rc=$?
if [[ -s "$out/result.json" ]]; then
  tail -n 1 "$out/result.json"
else
  say "the benchmark printed no JSON (rc $bench_rc): $(tail -n 3 "$out/benchmark.log" | tr '\n' ' ')"
  printf '{"gpu_check": 1, "install_rc": %s, "tests": {"rc": %s}, "problems": ["benchmark: rc %s, see %s"]}\n' \
    "$install_rc" "$tests_rc" "$bench_rc" "$out/benchmark.log"
  exit 1
fi
exit "$bench_rc"
