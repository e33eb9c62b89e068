"""`bench run` as a user runs it: through a subprocess, with run-dir contents, one-line errors,
kill -9 and resume, and the non-finite-loss guard."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bench.engines.weight_wire import free_port
from tests.integration.conftest import TASK_ARGS

REPO = Path(__file__).resolve().parents[2]


def _env(extra_path: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(extra_path), env.get("PYTHONPATH", "")])
    return env


def _common(base: Path) -> list[str]:
    args = [
        "--model",
        str(base),
        "--set",
        "trajectories_per_step=8",
        "--set",
        "max_new_tokens=48",
        "--set",
        "engine_slots=8",
        "--set",
        "policy_lr=1e-3",
        "--no-progress",
    ]
    for key, value in TASK_ARGS.items():
        args += ["--set", f"task.{key}={value}"]
    return args


def bench(*args: str, env=None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env or _env(),
        timeout=timeout,
    )


def test_cli_run_writes_a_complete_run_dir(base_checkpoint, tmp_path):
    out = tmp_path / "run"
    res = bench(
        "run",
        "--algo",
        "grpo",
        "--task",
        "arith",
        "--steps",
        "2",
        "--out",
        str(out),
        *_common(base_checkpoint),
    )
    assert res.returncode == 0, res.stderr
    for name in ("config.json", "env.json", "metrics.jsonl", "summary.json"):
        assert (out / name).is_file(), name
    assert (out / "checkpoints" / "step_000002" / "policy" / "config.json").is_file()
    config = json.loads((out / "config.json").read_text())
    assert config["algo"] == "grpo" and config["trajectories_per_step"] == 8 and config["steps"] == 2
    env = json.loads((out / "env.json").read_text())
    assert {"git_commit", "git_dirty", "packages", "seed"} <= set(env)
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    required = {
        "reward/mean",
        "loss/policy",
        "policy/clip_frac",
        "policy/approx_kl",
        "policy/entropy",
        "staleness/mean",
        "staleness/max",
        "rollout/tokens",
        "time/step_s",
        "memory/learner_peak_rss_gib",
        "memory/engine_peak_rss_gib",  # the engine's own process (the CPU default)
    }
    assert [r["step"] for r in lines] == [1, 2] and required <= set(lines[0])
    assert (
        0.05 < lines[1]["memory/learner_peak_rss_gib"] < 16
        and 0.05 < lines[1]["memory/engine_peak_rss_gib"] < 16
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy_lr"] == 1e-3 and summary["critic_lr"] is None  # the rate used; no critic


# bad input of `bench run`: tests/integration/test_bad_input.py (every command's, in one table)


def _assert_no_process_mentions(text: str, within_s: float) -> None:
    """Wait until no live process has `text` in its command line."""
    deadline = time.time() + within_s
    while True:
        alive = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if text in cmdline.read_bytes().decode(errors="replace"):
                    alive.append(cmdline.parent.name)
            except OSError:  # the process ended while we looked
                pass
        if not alive or time.time() > deadline:
            break
        time.sleep(0.2)
    assert not alive, f"processes of the killed run still alive: {alive}"


@pytest.mark.slow
def test_kill_9_then_resume_has_no_gap_or_duplicate(base_checkpoint, tmp_path):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "bench.cli",
        "run",
        "--algo",
        "sao",
        "--steps",
        "8",
        "--checkpoint-every",
        "2",
        "--mode",
        "sync",
        "--out",
        str(out),
        *_common(base_checkpoint),
        "--set",
        "algo.critic_warmup_steps=1",
    ]
    proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 240
        while not (out / "checkpoints" / "step_000004").exists():
            assert proc.poll() is None, "run ended before it could be killed"
            assert time.time() < deadline, "no checkpoint appeared"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    _assert_no_process_mentions(str(out), within_s=10)  # e.g. an orphaned rollout-engine child
    res = bench("run", "--resume", str(out), "--no-progress")
    assert res.returncode == 0, res.stderr
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 9))
    assert json.loads((out / "summary.json").read_text())["steps"] == 8


NAN_PLUGIN = """
from dataclasses import dataclass
from algorithms.advantages import broadcast_to_tokens
from algorithms.base import AdvantageResult, Algorithm, LossOutput

@dataclass(frozen=True)
class Config:
    pass

class AlwaysNaN(Algorithm):
    name = "always-nan"
    summary = "returns a NaN loss (test of the non-finite guard)"
    Config = Config

    def advantages(self, traj):
        return AdvantageResult(broadcast_to_tokens(traj.rewards_B, traj.action_mask_B_T))

    def policy_loss(self, inp):
        return LossOutput((inp.logp_B_T * 0).sum() * float("nan"), {"loss/policy": float("nan")})
"""


def test_nonfinite_losses_are_skipped_then_the_run_stops(base_checkpoint, tmp_path):
    (tmp_path / "nan_plugin.py").write_text(textwrap.dedent(NAN_PLUGIN))
    out = tmp_path / "run"
    res = bench(
        "run",
        "--plugin",
        "nan_plugin",
        "--algo",
        "always-nan",
        "--steps",
        "10",
        "--mode",
        "sync",
        "--out",
        str(out),
        "--set",
        "nan_patience=3",
        *_common(base_checkpoint),
        env=_env(tmp_path),
    )
    assert res.returncode == 1, res.stderr
    assert "run stopped: 3 consecutive non-finite losses" in res.stderr and "Traceback" not in res.stderr
    summary = json.loads((out / "summary.json").read_text())  # the run says how it ended, typed
    assert (summary["outcome"], summary["stopped_by"]) == ("non-finite", None)
    assert summary["detail"].startswith("3 consecutive non-finite losses")
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["loss/nonfinite_skipped"] for r in lines] == [1.0, 2.0]
    assert all(r["loss/policy"] is None for r in lines)  # NaN is written as null


@pytest.mark.slow
def test_data_parallel_ranks_stay_identical(base_checkpoint, tmp_path):
    """Two CPU ranks (gloo) on different rollouts: after 2 steps both hold the same weights,
    and those weights moved away from the base checkpoint."""
    out = tmp_path / "dp"
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--main_process_port",  # a port of its own, not the default 29500 another launch may hold
        str(free_port()),
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "-m",
        "bench.cli",
        "run",
        "--algo",
        "sao",
        "--steps",
        "2",
        "--out",
        str(out),
        "--set",
        "algo.critic_warmup_steps=0",
        *_common(base_checkpoint),
    ]
    # PYTHONFAULTHANDLER: a rank that aborts prints every Python thread's stack (where it was)
    env = {**_env(), "ACCELERATE_USE_CPU": "1", "PYTHONFAULTHANDLER": "1"}
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    # the ranks' own errors come first; torchrun's summary of who died comes last
    assert res.returncode == 0, (
        f"{res.stderr[:4000]}\n...\n{res.stderr[-1500:]}\nstdout (ends with the run's summary "
        f"if training finished):\n{res.stdout[-1000:]}"
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2
    first, second = summary["policy_checksum_per_rank"]
    assert first == second

    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_checkpoint)
    base_sum = sum(float(p.detach().double().sum()) for p in base.parameters())
    assert abs(base_sum - first) > 1e-6


@pytest.mark.slow
def test_two_torchrun_ranks_train_the_global_batch_and_resume_in_one_process(base_checkpoint, tmp_path):
    """`bench run` on 2 ranks (torchrun, gloo, FSDP2): trajectories_per_step is the global batch,
    config.json records the world size, the policy moves; the run resumes in one process."""
    out = tmp_path / "ranks"
    common = [*_common(base_checkpoint), "--set", "trajectories_per_step=16"]  # 8 a rank, 2 groups of 4
    args = ["run", "--algo", "grpo", "--set", "algo.group_size=4", "--mode", "sync", "--steps", "2"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--master-port", str(free_port())]  # not 29500
    cmd += ["--nproc-per-node", "2", "-m", "bench.cli"]
    env = {**_env(), "PYTHONFAULTHANDLER": "1"}
    res = subprocess.run(
        [*cmd, *args, "--out", str(out), *common],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=900,
    )
    assert res.returncode == 0, f"{res.stderr[:4000]}\n...\n{res.stderr[-1500:]}"
    config = json.loads((out / "config.json").read_text())
    assert config["world_size"] == 2 and config["trajectories_per_step"] == 16
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["budget/step_trajectories"] for r in lines] == [16.0, 16.0]  # global, not 2 x 16
    assert [r["budget/trajectories"] for r in lines] == [16.0, 32.0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and len(set(summary["policy_checksum_per_rank"])) == 1
    assert (out / "checkpoints" / "step_000002" / "state" / ".metadata").is_file()  # sharded, DCP

    from transformers import AutoModelForCausalLM

    def checksum(path: Path) -> float:
        return sum(
            float(p.detach().double().sum()) for p in AutoModelForCausalLM.from_pretrained(path).parameters()
        )

    trained = checksum(out / "checkpoints" / "step_000002" / "policy")
    assert abs(trained - checksum(base_checkpoint)) > 1e-6 and trained == pytest.approx(
        summary["policy_checksum_per_rank"][0]
    )
    res = bench("run", "--resume", str(out), "--steps", "3", "--no-progress")  # one process
    assert res.returncode == 0, res.stderr
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2, 3] and lines[-1]["budget/trajectories"] == 48.0
    assert json.loads((out / "config.json").read_text())["world_size"] == 1
    event = json.loads((out / "events.jsonl").read_text().splitlines()[-1])
    assert (event["event"], event["from_step"], event["world_size"]) == ("resume", 2, 1)


def test_a_global_batch_that_does_not_split_across_ranks_is_refused(tmp_path):
    env = {**_env(), "WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}  # what torchrun sets
    res = bench(
        "run", "--algo", "grpo", "--set", "trajectories_per_step=24", "--out", str(tmp_path / "x"), env=env
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert (
        "trajectories_per_step=24 is the global batch and must divide by 2 learner ranks x grpo's 8"
        in res.stderr
    )
    assert not (tmp_path / "x").exists()
