"""A data-parallel rank's `bench` ends by `os._exit` once its command is done (bench.cli.main):
its output must still arrive whole and its exit code must be the command's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _bench_as_rank(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WORLD_SIZE": "2"}  # what torchrun sets for each rank
    env.pop("PYTHONUNBUFFERED", None)  # stdout to a pipe is then block-buffered: os._exit would drop it
    return subprocess.run(
        [sys.executable, "-m", "bench.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )


def test_a_rank_flushes_its_output_before_exiting():
    res = _bench_as_rank("algos", "sao", "--json")  # a few KB: less than the pipe's buffer
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["name"] == "sao"


def test_a_rank_keeps_its_exit_code_and_error_line():
    res = _bench_as_rank("run", "--algo", "grp")
    assert res.returncode == 2
    assert "did you mean 'grpo'?" in res.stderr and "Traceback" not in res.stderr
