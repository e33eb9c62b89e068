"""`bench perf` through the real CLI: one JSON object with the documented keys and positive
numbers. Never a wall-clock assertion: speed is reported by the benchmark, not tested."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _perf(*args: str, tmp_path: Path) -> tuple[dict, dict]:
    out = tmp_path / "perf.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BENCH_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "bench.cli", "perf", *args, "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = json.loads(proc.stdout)  # stdout is exactly one JSON object
    return printed, json.loads(out.read_text())


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0


@pytest.mark.slow
def test_perf_quick_engine_and_learner(tmp_path):
    result, written = _perf(
        "--quick", "--repeats", "1", "--only", "engine,learner,length_buckets", tmp_path=tmp_path
    )
    assert written == result
    assert result["command"] == "bench perf"
    only = ["engine", "learner", "length_buckets"]
    assert result["settings"] == {"repeats": 1, "quick": True, "only": only, "threads": 1}
    machine = result["machine"]
    assert _positive(machine["cpu_count"]) and machine["torch_threads"] == 1 and machine["torch_version"]
    assert "new_tiny_model(0)" in result["model"]["source"] and _positive(result["model"]["parameters"])
    assert set(result["sections"]) == set(only)
    metrics = {
        "engine": "tokens_per_s",
        "learner": "response_tokens_per_s",
        "length_buckets": "seconds_per_learner_step",
    }
    for name, metric in metrics.items():
        section = result["sections"][name]
        assert section["metric"] == metric
        for key in ("ours", "peer", "ratio", "section_seconds"):
            assert _positive(section[key]), (name, key, section[key])
        assert section["peer_name"] and section["ratio_definition"] and section["notes"]
        assert len(section["runs"]["ours"]) == len(section["runs"]["peer"]) == 1
        assert all(_positive(v) for v in section["runs"]["ours"] + section["runs"]["peer"])
    buckets = result["sections"]["length_buckets"]["setup"]
    assert sum(buckets["buckets"]) == 16 and len(buckets["buckets"]) > 1
    assert buckets["padded_tokens"]["bucketed"] < buckets["padded_tokens"]["one_batch"]
    engine = result["sections"]["engine"]
    assert engine["target"] == ">= 1.5" and isinstance(engine["reached"], bool)
    assert engine["setup"]["prompts"] == 8 and engine["setup"]["new_tokens_per_prompt"] == 16
    assert result["summary"] == {
        "engine": {"ratio": engine["ratio"], "target": ">= 1.5", "reached": engine["reached"]}
    }


@pytest.mark.parametrize("bad", [["--only", "engine,warp"], ["--repeats", "0"]])
def test_perf_rejects_bad_options(tmp_path, bad):
    proc = subprocess.run(
        [sys.executable, "-m", "bench.cli", "perf", *bad],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("bench: error:") and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_perf_quick_kv_cache(tmp_path):
    result, _ = _perf("--quick", "--repeats", "1", "--only", "kv_cache", tmp_path=tmp_path)
    section = result["sections"]["kv_cache"]
    assert section["metric"] == "tokens_per_s" and _positive(section["ours"]) and _positive(section["peer"])
    assert section["setup"]["prompts"] == 4 and section["setup"]["new_tokens_per_prompt"] == 16
    assert "full forward" in section["peer_name"] and "model" not in result  # needs no --model


@pytest.mark.slow
def test_perf_quick_weight_transfer_reports_the_copies_beside_the_broadcast(tmp_path):
    result, _ = _perf("--quick", "--repeats", "1", "--only", "weight_transfer", tmp_path=tmp_path)
    section = result["sections"]["weight_transfer"]
    assert section["metric"] == "seconds_per_update" and section["size"] == "tiny"
    for key in ("ours", "peer", "packed_broadcast_seconds", "copy_seconds", "copy_ratio"):
        assert _positive(section[key]), key
    assert section["bytes"] == section["sizes"]["tiny"]["bytes"] > 0
    assert section["copy_ratio"] == pytest.approx(section["copy_seconds"] / section["peer"])
