"""Runs and evaluations survive crashes (through the CLI, as a user meets them): a damaged
checkpoint, a second process on one run dir, a kill before the first checkpoint, a start that
fails before training, and a killed `bench eval`; a run killed by SIGTERM or SIGKILL reads as
`killed` in its own directory; a run that placed its learner ranks, killed outright, leaves none
training."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from results.rundir import BUSY_EXIT_CODE, RunDir, RunOutcome
from tests.integration.test_cli_run import REPO, _assert_no_process_mentions, _common, _env, bench

pytestmark = pytest.mark.slow


def _run_cmd(base: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bench.cli",
        "run",
        "--algo",
        "grpo",
        "--mode",
        "sync",
        "--out",
        str(out),
        *_common(base),
        *extra,
    ]


def _steps(out: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]


def _start_and_wait(cmd: list[str], ready, timeout: float = 240) -> subprocess.Popen:
    """Start `cmd` and return once `ready()` holds (the process still running)."""
    proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while not ready():
        assert proc.poll() is None, "the process ended before it was ready"
        assert time.time() < deadline, "not ready in time"
        time.sleep(0.05)
    return proc


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_a_damaged_latest_checkpoint_resumes_from_the_newest_intact_one(base_checkpoint, tmp_path):
    out = tmp_path / "run"
    res = subprocess.run(
        _run_cmd(base_checkpoint, out, "--steps", "4", "--checkpoint-every", "2"),
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    weights = out / "checkpoints" / "step_000004" / "policy" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # truncated, as by a full disk
    res = bench("run", "--resume", str(out), "--steps", "6", "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "checkpoint step_000004 is damaged (policy/model.safetensors has 1000 bytes" in res.stdout
    assert "from step_000002" in res.stdout
    assert _steps(out) == [1, 2, 3, 4, 5, 6]
    assert (out / "checkpoints" / "damaged_step_000004").is_dir()
    assert json.loads((out / "config.json").read_text())["steps"] == 6  # the extension is recorded
    event = json.loads((out / "events.jsonl").read_text().splitlines()[-1])
    assert event["event"] == "resume" and event["from_step"] == 2 and event["changed"] == {"steps": [4, 6]}
    third = json.loads((out / "metrics.jsonl").read_text().splitlines()[2])
    assert third["resume/from_step"] == 2


def test_a_second_process_cannot_train_into_a_running_run_dir(base_checkpoint, tmp_path):
    out = tmp_path / "run"
    proc = _start_and_wait(
        _run_cmd(base_checkpoint, out, "--steps", "500"),
        lambda: (out / "metrics.jsonl").exists() and _steps(out),
    )
    try:
        res = bench("run", "--resume", str(out), "--no-progress")
        # its own exit code, so that a scheduler tells a duplicate start from a failure
        assert res.returncode == BUSY_EXIT_CODE and f"is in use by pid {proc.pid}" in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
        assert RunDir(out).read_outcome().outcome is RunOutcome.RUNNING  # the other process trains it
    finally:
        _kill(proc)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_run_reads_as_killed(sig, base_checkpoint, tmp_path):
    """SIGTERM: the run writes `killed` itself and ends with 143; SIGKILL: it cannot, and a
    reader sees `running` with no live holder of the run's lock."""
    out = tmp_path / "run"
    proc = _start_and_wait(
        _run_cmd(base_checkpoint, out, "--steps", "500"),
        lambda: (out / "metrics.jsonl").exists() and _steps(out),
    )
    proc.send_signal(sig)
    assert proc.wait(timeout=120) == (143 if sig == signal.SIGTERM else -signal.SIGKILL)
    end = RunDir(out).read_outcome()
    assert end.outcome is RunOutcome.KILLED and end.pid == proc.pid and end.stopped_by is None
    summary = json.loads((out / "summary.json").read_text())
    assert summary["outcome"] == ("killed" if sig == signal.SIGTERM else "running")


def test_a_run_killed_before_its_first_checkpoint_resumes_from_step_0(base_checkpoint, tmp_path):
    out = tmp_path / "run"
    proc = _start_and_wait(
        _run_cmd(base_checkpoint, out, "--steps", "4", "--checkpoint-every", "100"),
        lambda: (out / "metrics.jsonl").exists() and len(_steps(out)) >= 2,
    )
    _kill(proc)
    assert not list((out / "checkpoints").glob("step_*"))
    res = bench("run", "--resume", str(out), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "from step 0 (no intact checkpoint yet)" in res.stdout
    assert _steps(out) == [1, 2, 3, 4]


def test_a_start_that_fails_before_training_removes_its_run_dir(tmp_path):
    not_a_model = tmp_path / "empty-model"
    not_a_model.mkdir()
    out = tmp_path / "run"
    res = bench("run", "--model", str(not_a_model), "--out", str(out), "--no-progress")
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and f"removed {out}" in res.stderr
    assert not out.exists()  # so the same --out can be used again


def _eval_cmd(base: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bench.cli",
        "eval",
        "--model",
        str(base),
        "--bench",
        "arith",
        "--k",
        "4",
        "--limit",
        "100",
        "--seed",
        "3",
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]


def _without_timing(path: Path) -> list[dict]:
    return [
        {k: v for k, v in json.loads(line).items() if k != "seconds"}
        for line in path.read_text().splitlines()
    ]


def test_a_killed_evaluation_resumes_and_matches_an_uninterrupted_one(base_checkpoint, tmp_path):
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    res = subprocess.run(
        _eval_cmd(base_checkpoint, whole), cwd=REPO, env=_env(), capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    partial = resumed / "arith.partial.jsonl"
    proc = _start_and_wait(
        _eval_cmd(base_checkpoint, resumed),
        lambda: partial.exists() and len(partial.read_text().splitlines()) > 10,
    )
    _kill(proc)
    kept = len(partial.read_text().splitlines()) - 1
    res = subprocess.run(
        _eval_cmd(base_checkpoint, resumed), cwd=REPO, env=_env(), capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert f"resumed an interrupted evaluation ({kept} samples kept)" in res.stdout
    assert _without_timing(resumed / "arith.jsonl") == _without_timing(whole / "arith.jsonl")
    assert not partial.exists()
    # a finished evaluation: kept as it is under the same settings, refused under others
    res = subprocess.run(
        _eval_cmd(base_checkpoint, resumed), cwd=REPO, env=_env(), capture_output=True, text=True
    )
    assert res.returncode == 0 and "kept as it is" in res.stdout, res.stderr
    other = _eval_cmd(base_checkpoint, resumed, "--seed", "4")
    res = subprocess.run(other, cwd=REPO, env=_env(), capture_output=True, text=True)
    assert res.returncode == 2 and "other settings (seed); pass --overwrite" in res.stderr, res.stderr
    res = subprocess.run([*other, "--overwrite"], cwd=REPO, env=_env(), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert json.loads((resumed / "arith.summary.json").read_text())["settings"]["seed"] == 4


def test_kill_9_of_a_run_that_placed_its_ranks_stops_them_and_resume_has_no_gap(base_checkpoint, tmp_path):
    """`bench run --set learner_ranks=2` places torchrun and two ranks; killed outright, it leaves
    nothing training (torchrun gets SIGTERM with it and stops its ranks, which checkpoint), and
    `--resume` places them again and trains every step once."""
    out = tmp_path / "placed"
    ranks = ["--set", "learner_ranks=2", "--set", "trajectories_per_step=16", "--set", "algo.group_size=4"]
    proc = _start_and_wait(
        _run_cmd(base_checkpoint, out, "--steps", "6", "--checkpoint-every", "2", *ranks),
        lambda: (out / "checkpoints" / "step_000002").exists(),
    )
    _kill(proc)
    _assert_no_process_mentions(str(out), within_s=60)  # torchrun and both ranks
    killed_at = _steps(out)
    assert killed_at[-1] < 6, killed_at  # stopped, not trained to the end beside the resume
    res = bench("run", "--resume", str(out), "--no-progress")
    assert res.returncode == 0, res.stderr[-3000:]
    assert _steps(out) == [1, 2, 3, 4, 5, 6]
