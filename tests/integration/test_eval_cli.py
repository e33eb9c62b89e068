"""`bench eval` as a user runs it: through a subprocess, on a tiny checkpoint made here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("eval-cache")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A tiny arith model after 30 supervised steps (scores are beside the point here)."""
    from bench.models.pretrain import pretrain

    out = tmp_path_factory.mktemp("eval-ckpt") / "ckpt"
    pretrain("arith", {"max_operands": 2}, seed=0, out=out, steps=30, n_examples=2000, progress=False)
    return out


def bench_eval(
    *args: str, cache: Path, cwd: Path, hf_home: Path | None = None, timeout: int = 120, **more_env: str
):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "BENCH_CACHE_DIR": str(cache)}
    env.update(more_env)
    if hf_home is not None:  # an empty HF cache: no stray local copy of a hub dataset
        env.update(
            HF_HOME=str(hf_home), HF_HUB_CACHE=str(hf_home / "hub"), HF_DATASETS_CACHE=str(hf_home / "ds")
        )
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "bench.cli", "eval", *args, "--no-progress"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


def _one_line_error(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench: error: "), res.stderr
    return lines[0]


def test_eval_arith_checkpoint(checkpoint, cache_dir, tmp_path):
    out = tmp_path / "evals"
    res = bench_eval(
        "--model",
        str(checkpoint),
        "--bench",
        "arith",
        "--limit",
        "5",
        "--k",
        "2",
        "--out",
        str(out),
        cache=cache_dir,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    records = [json.loads(line) for line in (out / "arith.jsonl").read_text().splitlines()]
    assert len(records) == 10 and {r["problem_id"] for r in records} and records[0]["benchmark"] == "arith"
    summary = json.loads((out / "arith.summary.json").read_text())
    assert summary["n_problems"] == 5 and summary["k"] == 2
    assert summary["provenance"]["model"] == str(checkpoint.resolve())
    assert "avg@k" in res.stdout and "95% CI" in res.stdout and str(out / "arith.jsonl") in res.stdout


@pytest.mark.slow
def test_eval_multi_turn_benchmarks_write_episodes_and_swe_predictions(checkpoint, cache_dir, tmp_path):
    out = tmp_path / "evals"
    for bench_name in ("swe-mini", "agent"):
        res = bench_eval(
            "--model",
            str(checkpoint),
            "--bench",
            bench_name,
            "--limit",
            "2",
            "--k",
            "1",
            "--out",
            str(out),
            cache=cache_dir,
            cwd=tmp_path,
        )
        assert res.returncode == 0, res.stderr
        records = [json.loads(line) for line in (out / f"{bench_name}.jsonl").read_text().splitlines()]
        assert len(records) == 2 and all(r["grader_method"] == "episode" and r["turns"] >= 1 for r in records)
    predictions = [json.loads(line) for line in (out / "swe-mini.predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 2 and all(p["instance_id"].startswith("swe-mini__") for p in predictions)
    assert set(predictions[0]) == {"instance_id", "model_name_or_path", "model_patch"}
    summary = json.loads((out / "swe-mini.summary.json").read_text())
    assert summary["predictions_files"] == [str(out / "swe-mini.predictions.jsonl")]


def test_eval_imo_answerbench_local_data(checkpoint, cache_dir, tmp_path, benchmark_data):
    data = benchmark_data("imobench/answerbench_v2.csv").path
    out = tmp_path / "evals"
    res = bench_eval(
        "--model",
        str(checkpoint),
        "--bench",
        "imo-answerbench",
        "--data",
        str(data),
        "--limit",
        "3",
        "--k",
        "1",
        "--max-new-tokens",
        "16",
        "--out",
        str(out),
        cache=cache_dir,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    summary = json.loads((out / "imo-answerbench.summary.json").read_text())
    prov = summary["provenance"]
    assert summary["version"] == prov["version"] == 1 and summary["n_problems"] == 3
    assert len(prov["data_hash"]) == 64 and len(prov["data_file_sha256"]) == 64
    assert prov["data_path"] == str(data.resolve()) and prov["sampling"]["max_new_tokens"] == 16
    assert len((out / "imo-answerbench.jsonl").read_text().splitlines()) == 3


def test_hub_benchmark_offline_without_data_fails_fast(checkpoint, cache_dir, tmp_path):
    start = time.perf_counter()
    res = bench_eval(
        "--model",
        str(checkpoint),
        "--bench",
        "beyond-aime",
        cache=cache_dir,
        cwd=tmp_path,
        hf_home=tmp_path / "hf",
    )
    elapsed = time.perf_counter() - start
    assert "--data" in _one_line_error(res)
    assert elapsed < 10, f"took {elapsed:.1f}s"


def test_unknown_benchmark(checkpoint, cache_dir, tmp_path):
    res = bench_eval("--model", str(checkpoint), "--bench", "aime2025", cache=cache_dir, cwd=tmp_path)
    assert "did you mean" in _one_line_error(res)


@pytest.mark.slow
def test_swe_verified_says_exactly_what_is_missing(checkpoint, cache_dir, tmp_path):
    # offline: the hub copy is unreachable, and the error names the --data override
    res = bench_eval("--model", str(checkpoint), "--bench", "swe-verified", cache=cache_dir, cwd=tmp_path)
    assert "--data" in _one_line_error(res)
    # with a local copy of the instances: the episodes need the Docker runtime, made missing here
    # (CI runs a daemon for the docker-marked tests): a socket nothing listens on
    row = {
        "repo": "astropy/astropy",
        "instance_id": "astropy__astropy-12907",
        "base_commit": "a" * 40,
        "patch": "",
        "test_patch": "",
        "problem_statement": "issue",
        "version": "4.3",
        "FAIL_TO_PASS": '["t.py::test_a"]',
        "PASS_TO_PASS": "[]",
        "environment_setup_commit": "b" * 40,
        "image": "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest",
        "eval_script": "#!/bin/bash\n",
        "log_parser": "parse_log_astropy",
        "eval_type": "pass_and_fail",
    }
    (tmp_path / "verified.json").write_text(json.dumps([row]))
    res = bench_eval(
        "--model",
        str(checkpoint),
        "--bench",
        "swe-verified",
        "--data",
        "verified.json",
        cache=cache_dir,
        cwd=tmp_path,
        DOCKER_HOST=f"unix://{tmp_path / 'no-docker.sock'}",
    )
    assert "--runtime docker needs" in _one_line_error(res)
