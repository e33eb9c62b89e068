"""scripts/gpu_check.sh without a GPU: refused with its one JSON object, or with
GPU_CHECK_ALLOW_CPU=1 a dry run of the same plumbing (the GPU tests skip, the learner benchmark
runs on a tiny shape) ending in the one JSON object a GPU run prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.perf.gpu_check import junit_counts, main

REPO = Path(__file__).resolve().parents[3]
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="5">
<testcase classname="tests.gpu.test_a" name="test_ok"/>
<testcase classname="tests.gpu.test_a" name="test_ok_too"/>
<testcase classname="tests.gpu.test_a" name="test_bad"><failure message="assert 1 == 2"/></testcase>
<testcase classname="tests.gpu.test_b" name="test_broken"><error message="fixture"/></testcase>
<testcase classname="tests.gpu.test_b" name="test_skipped"><skipped message="needs a CUDA GPU"/></testcase>
</testsuite></testsuites>"""


def test_junit_counts_read_pytests_xml(tmp_path):
    (tmp_path / "tests.xml").write_text(JUNIT)
    assert junit_counts(tmp_path / "tests.xml") == {
        "passed": 2,
        "failed": 1,
        "errors": 1,
        "skipped": 1,
        "failed_names": ["tests.gpu.test_a::test_bad", "tests.gpu.test_b::test_broken"],
    }


def test_the_json_names_every_failed_part_and_goes_on(tmp_path, capsys):
    (tmp_path / "arith_run.json").write_text(json.dumps({"steps": 30}))
    rc = main(["--out", str(tmp_path), "--install-rc", "3", "--tests-rc", "2", "--no-benchmark"])
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 1 and record["install_rc"] == 3 and record["tests"] == {"rc": 2}
    assert record["arith_run"] == {"steps": 30} and record["learner_benchmark"] is None
    assert record["problems"] == [
        f"install: rc 3, see {tmp_path / 'install.log'}",
        f"tests: rc 2, see {tmp_path / 'tests.log'}",
        f"tests: no junit XML at {tmp_path / 'tests.xml'}",
    ]


def test_a_clean_record_exits_zero(tmp_path, capsys):
    (tmp_path / "tests.xml").write_text(JUNIT.replace('errors="1" failures="1"', 'errors="0" failures="0"'))
    assert main(["--out", str(tmp_path), "--install-rc", "0", "--tests-rc", "0", "--no-benchmark"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["problems"] == [] and record["tests"]["rc"] == 0


def _check(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    environ = {**os.environ, "PYTHON": sys.executable, "GPU_CHECK_OUT": str(tmp_path / "check"), **env}
    res = subprocess.run(
        ["bash", "scripts/gpu_check.sh"], capture_output=True, text=True, cwd=REPO, env=environ, timeout=900
    )
    return res, json.loads(res.stdout.strip().splitlines()[-1])


@cpu_only
def test_without_a_gpu_the_check_says_so_in_its_json(tmp_path):
    res, record = _check(tmp_path)
    assert res.returncode == 1 and record["problems"] == ["no CUDA device visible to torch"]
    assert "GPU_CHECK_ALLOW_CPU=1" in res.stderr


@cpu_only
@pytest.mark.slow
def test_a_dry_run_on_the_cpu_goes_through_every_part(tmp_path):
    res, record = _check(
        tmp_path,
        GPU_CHECK_ALLOW_CPU="1",
        GPU_WHEELS=str(tmp_path / "no-wheels"),  # no wheel folder: the installed packages, checked
        GPU_CHECK_TESTS="tests/gpu/test_learner_gpu.py",
    )
    assert res.returncode == 0, res.stderr
    assert "no wheel folder" in res.stderr and record["install_rc"] == 0
    assert record["device"] == "cpu (dry run)" and record["problems"] == []
    tests = record["tests"]
    assert tests["rc"] == 0 and tests["skipped"] == 11 and tests["passed"] == tests["failed"] == 0
    bench = record["learner_benchmark"]
    assert bench["step_s"] > 0 and bench["tokens_per_step"] == 512 and bench["timed_steps"] == 2
    assert bench["mfu"] is None and bench["peak_allocated_gib"] is None  # no GPU: nothing to measure
    assert bench["plan_gib_without_cuda_allowance"] > 0 and bench["model_tflop_per_step"] > 0
