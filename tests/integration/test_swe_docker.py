"""SWE-bench's path end to end on a real Docker daemon (issue 40), through the CLI as a user runs
it, on the offline instances of `envs.swe.docker_fixtures`: a few training steps with every
episode in its own container, `bench eval` graded by the runtime and by the official harness,
and no container outliving its run, SIGKILL included; without a daemon, one line before any
model loads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.requires import requires

requires("swebench", minversion="5")
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RUN_LABEL = "rl-bench.run"


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def train_args(rows: Path, out: Path, steps: int) -> list[str]:
    return [
        *(sys.executable, "-m", "bench.cli", "run", "--algo", "sao", "--task", "swe"),
        *("--set", "task.dataset=swe-verified", "--set", "task.runtime=docker", "--set", f"task.data={rows}"),
        *("--set", "trajectories_per_step=4", "--steps", str(steps), "--out", str(out), "--no-progress"),
    ]


def client():
    import docker

    return docker.from_env(timeout=60)


def left(label: str, value: str, seconds: float = 0) -> list[str]:
    """Names of the containers labelled `label=value` still there after up to `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        found = client().containers.list(all=True, filters={"label": f"{label}={value}"}, ignore_removed=True)
        if not found or time.monotonic() >= deadline:
            return [c.name for c in found]
        time.sleep(0.5)


@pytest.mark.docker
def test_a_few_training_steps_run_every_episode_in_its_own_container(swe_docker_rows, tmp_path):
    out, since = tmp_path / "run", int(time.time()) - 1
    done = subprocess.run(
        train_args(swe_docker_rows, out, 2),
        capture_output=True,
        text=True,
        env=env(),
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 2 and all(m["rollout/env_failed"] == 0 for m in metrics)
    starts = client().events(
        since=since,
        until=int(time.time()) + 1,
        filters={"label": f"{RUN_LABEL}={out.name}", "event": "start"},
        decode=True,
    )
    assert len(list(starts)) >= 8  # 8 episodes, each its own container (plus one per grading)
    assert left(RUN_LABEL, out.name) == []


@pytest.mark.docker
def test_kill_9_of_a_run_leaves_no_container(swe_docker_rows, tmp_path):
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        train_args(swe_docker_rows, out, 50),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env(),
        cwd=tmp_path,
        start_new_session=True,  # its own process group: the kill below takes its engine child too
    )
    try:
        deadline = time.monotonic() + 300
        while not left(RUN_LABEL, out.name) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        assert left(RUN_LABEL, out.name), "the run started no container"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert left(RUN_LABEL, out.name, seconds=30) == []


@pytest.mark.docker
def test_bench_eval_is_graded_by_the_runtime_and_by_the_official_harness(swe_docker_rows, tmp_path):
    out = tmp_path / "evals"
    args = ["--model", "tiny", "--bench", "swe-verified", "--data", str(swe_docker_rows), "--k", "1"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.cli",
            "eval",
            *args,
            "--out",
            str(out),
            "--max-workers",
            "2",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        env=env(),
        cwd=tmp_path,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "swe-verified.summary.json").read_text())
    harness = summary["official_harness"]
    assert harness["status"] == "ran", harness
    assert harness["runs"][0]["report"]["total_instances"] == 5
    predictions = [
        json.loads(line) for line in (out / "swe-verified.predictions.jsonl").read_text().splitlines()
    ]
    assert sorted(p["instance_id"] for p in predictions) == sorted(
        json.loads(line)["instance_id"] for line in swe_docker_rows.read_text().splitlines()
    )
    assert not client().containers.list(all=True, filters={"name": "sweb.eval."}, ignore_removed=True)
    assert not client().containers.list(all=True, filters={"label": "rl-bench.owner"}, ignore_removed=True)


@pytest.mark.docker
def test_an_image_missing_offline_is_one_warning_line_and_episodes_scored_0(swe_docker_rows, tmp_path):
    row = json.loads(swe_docker_rows.read_text().splitlines()[0])
    row["image"] = "swebench/sweb.eval.x86_64.nowhere_1776_none-1:latest"
    rows = tmp_path / "missing.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    out = tmp_path / "run"
    done = subprocess.run(
        train_args(rows, out, 1), capture_output=True, text=True, env=env(), cwd=tmp_path, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    warned = [line for line in done.stderr.splitlines() if line.startswith("bench: warning: ")]
    assert len(warned) == 1 and warned[0].startswith(
        f"bench: warning: {row['instance_id']}: image {row['image']}"
    )
    assert "could not be pulled" in warned[0] and warned[0].endswith(
        "the episode is scored 0 (rollout/env_failed)"
    )
    (metrics,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert metrics["rollout/env_failed"] == 4 and metrics["reward/mean"] == 0
    assert left(RUN_LABEL, out.name) == []


def test_without_a_daemon_run_and_eval_fail_in_one_line_before_any_model_loads(tmp_path):
    from envs.swe.docker_fixtures import select, write_rows

    rows = write_rows(tmp_path / "rows.jsonl", select(["swe-mini__account-1"]))  # no image needed
    no_daemon = {**env(), "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    run = train_args(rows, tmp_path / "run", 1)
    evaluate = [sys.executable, "-m", "bench.cli", "eval", "--model", "tiny", "--bench", "swe-verified"]
    for command in (run, [*evaluate, "--data", str(rows), "--out", str(tmp_path / "evals")]):
        done = subprocess.run(
            command, capture_output=True, text=True, env=no_daemon, cwd=tmp_path, timeout=120
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert lines[0].startswith("bench: error: ") and "needs a running Docker daemon" in lines[0]
    assert not (tmp_path / "run").exists() and not (tmp_path / "evals").exists()
