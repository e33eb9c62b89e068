"""What the sandbox costs per test run, for `bench perf` ("sandbox overhead for a trivial test file").

A test run in the SWE and math-with-Python settings is one interpreter start that imports a
module and calls a test function. `measure_test_file_overhead` times exactly that, as a plain
subprocess and inside `envs.sandbox.Sandbox` (rlimits, namespaces, dedicated uid where the
machine allows), and reports the medians and their difference. Standard library only.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from envs.sandbox import Sandbox, SandboxLimits

TEST_MODULE = "test_trivial"
TEST_SOURCE = "def test_ok():\n    assert 1 + 1 == 2\n"
"""The trivial test file: one passing assert function."""

# `-I` in Python 3.11+ implies -P (the working directory is not on sys.path): add it explicitly.
RUNNER = f"import sys; sys.path.insert(0, '.'); import {TEST_MODULE}; {TEST_MODULE}.test_ok()"
"""The `python -I -c` program that imports the test module and calls its test."""


def measure_test_file_overhead(n: int = 10) -> dict[str, float]:
    """Median wall seconds of running the trivial test file plainly vs in a Sandbox (n runs each).

    Returns {"n", "plain_median_s", "sandbox_median_s", "overhead_s"}; overhead is the
    difference of the medians. Runs alternate (plain, sandbox) so that machine load affects
    both alike; one untimed warm-up of each comes first (disk cache, the capability probe).
    Raises RuntimeError if a run fails, since a failed run's timing would mean nothing.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    argv = [sys.executable, "-I", "-c", RUNNER]
    plain, boxed = [], []
    with tempfile.TemporaryDirectory(prefix="rlbench-perf-") as tmp, Sandbox(SandboxLimits()) as box:
        (Path(tmp) / f"{TEST_MODULE}.py").write_text(TEST_SOURCE)
        box.run(argv, files={f"{TEST_MODULE}.py": TEST_SOURCE})  # warm-up; also writes the file
        subprocess.run(argv, cwd=tmp, capture_output=True)
        for _ in range(n):
            t = time.perf_counter()
            done = subprocess.run(argv, cwd=tmp, capture_output=True, text=True)
            plain.append(time.perf_counter() - t)
            if done.returncode != 0:
                raise RuntimeError(f"plain test run failed: {done.stderr.strip()[-500:]}")
            t = time.perf_counter()
            result = box.run(argv)
            boxed.append(time.perf_counter() - t)
            if result.returncode != 0:
                raise RuntimeError(f"sandboxed test run failed: {result.as_observation()[-500:]}")
    p, b = statistics.median(plain), statistics.median(boxed)
    return {"n": n, "plain_median_s": p, "sandbox_median_s": b, "overhead_s": b - p}
