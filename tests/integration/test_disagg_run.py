"""`bench run --engine http` against one CPU double server process (vLLM's routes over the torch
engine, weights over gloo): one learner process, and two FSDP2 learner ranks under torchrun
(rank 0 pushes the weights, both generate), train arith asynchronously and the policy changes; a
server killed mid-run stops the run with one line and outcome "failed", and `--resume`
continues from the last checkpoint once a server answers at the same URL again (on 2 ranks too)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from urllib.parse import urlsplit

import pytest
import torch

from bench.engines.server_procs import start_double
from bench.engines.weight_wire import free_port
from tests.integration.test_cli_run import REPO, _common, _env, bench


@pytest.fixture
def server(base_checkpoint):
    process = start_double(base_checkpoint, slots=8)
    yield process
    process.stop()


def run_args(out, url, steps: int) -> list[str]:
    return [
        "run",
        "--algo",
        "grpo",
        "--steps",
        str(steps),
        "--checkpoint-every",
        "2",
        "--mode",
        "async",
        "--out",
        str(out),
        "--engine",
        "http",
        "--set",
        f"rollout_urls={url}",
    ]


def test_an_async_run_against_a_server_trains(base_checkpoint, server, tmp_path):
    out = tmp_path / "run"
    # weights pushed every 3rd version: the evaluation at step 2 must push the current one first
    evals = ["--eval-bench", "arith", "--eval-every", "2", "--set", "eval_limit=4", "--set", "eval_k=1"]
    cadence = ["--set", "weight_sync_every=3", "--set", "max_staleness=3"]
    res = bench(*run_args(out, server.url, 4), *evals, *cadence, *_common(base_checkpoint))
    assert res.returncode == 0, res.stderr
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0, 1, 2, 3, 4]  # step 0: the evaluation before training
    # evaluated on the run's server (no policy copy on the learner); the push before it: a unit test
    for step in (0, 2, 4):
        summary = json.loads((out / "evals" / f"step_{step:06d}" / "arith.summary.json").read_text())
        assert summary["provenance"]["engine"] == "HTTPEngine"
    env = json.loads((out / "env.json").read_text())
    assert env["engine"] == {"engine": "HTTPEngine", "rollout_urls": [server.url]}
    before = _policy(base_checkpoint)
    after = _policy(sorted((out / "checkpoints").iterdir())[-1])
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the policy learnt something


@pytest.mark.slow
def test_two_learner_ranks_train_against_one_server_and_resume(base_checkpoint, server, tmp_path):
    out = tmp_path / "ranks"
    # the global batch: 8 trajectories a rank, two groups of 4
    common = [*_common(base_checkpoint), "--set", "trajectories_per_step=16", "--set", "algo.group_size=4"]
    env = {**_env(), "PYTHONFAULTHANDLER": "1"}

    def run(*args: str) -> None:
        # a port of its own for each launch, not the default 29500 another launch may hold
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--master-port", str(free_port())]
        torchrun += ["--nproc-per-node", "2", "-m", "bench.cli", *args]
        res = subprocess.run(torchrun, capture_output=True, text=True, cwd=REPO, env=env, timeout=900)
        assert res.returncode == 0, f"{res.stderr[:4000]}\n...\n{res.stderr[-1500:]}"

    run(*run_args(out, server.url, 4), *common)
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]
    assert {m["budget/step_trajectories"] for m in metrics} == {16.0}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and len(set(summary["policy_checksum_per_rank"])) == 1
    before = _policy(base_checkpoint)
    after = _policy(out / "checkpoints" / "step_000004")
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the policy learnt something

    run("run", "--resume", str(out), "--steps", "6", "--no-progress")
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6]
    resumed = _policy(out / "checkpoints" / "step_000006")
    assert any(not torch.equal(after[k], resumed[k]) for k in after)


def _policy(folder) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(folder.rglob("model.safetensors"))
    assert files, f"no model.safetensors under {folder}"
    return load_file(files[0])


def test_a_dead_server_stops_the_run_and_resume_continues(base_checkpoint, server, tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "bench.cli", *run_args(out, server.url, 8), *_common(base_checkpoint)]
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.time() + 240
        while not (out / "checkpoints" / "step_000004").exists():
            assert proc.poll() is None, "run ended before its server could be killed"
            assert time.time() < deadline, "no checkpoint appeared"
            time.sleep(0.05)
        server.process.send_signal(signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, stderr
    assert stderr.strip().splitlines()[-1].startswith(f"bench: run stopped: rollout server {server.url}")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["outcome"] == "failed" and "rollout server" in summary["detail"]
    again = start_double(base_checkpoint, slots=8, port=urlsplit(server.url).port)
    try:
        res = bench("run", "--resume", str(out), "--no-progress", timeout=600)
    finally:
        again.stop()
    assert res.returncode == 0, res.stderr
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 9))


def test_a_server_that_does_not_answer_is_refused_before_the_model_loads(base_checkpoint, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    res = bench(*run_args(tmp_path / "run", url, 2), *_common(base_checkpoint))
    assert res.returncode == 2 and res.stderr.strip() == (
        f"bench: error: rollout_urls: rollout server {url} does not answer (/health): "
        "<urlopen error [Errno 111] Connection refused>"
    )
    assert not (tmp_path / "run").exists()


def _placed_server(stderr: str) -> str:
    line = next(x for x in stderr.splitlines() if x.startswith("bench: placing "))
    return line.rsplit("server ", 1)[1].strip()


@pytest.mark.slow
def test_bench_run_places_two_ranks_and_a_server_then_resume_places_them_again(base_checkpoint, tmp_path):
    """No launcher, no server started by hand: `--set learner_ranks=2 --set rollout_servers=1`
    makes `bench run` start a CPU double server and two learner ranks, and stop the server at the
    end; `--resume` starts new ones (new URL) from config.json."""
    from bench.engines.http_engine import ServerFailed, call
    from bench.engines.vllm_routes import Route

    out = tmp_path / "placed"
    placed = ["--engine", "http", "--set", "rollout_servers=1", "--set", "learner_ranks=2"]
    batch = ["--set", "trajectories_per_step=16", "--set", "algo.group_size=4"]
    res = bench(
        "run", "--algo", "grpo", "--steps", "2", "--out", str(out), *placed, *_common(base_checkpoint), *batch
    )
    assert res.returncode == 0, res.stderr[-3000:]
    config = json.loads((out / "config.json").read_text())
    first = _placed_server(res.stderr)
    assert config["world_size"] == 2 and config["rollout_urls"] == first
    with pytest.raises(ServerFailed):  # stopped with the run
        call(first, Route.HEALTH, timeout=5)

    res = bench("run", "--resume", str(out), "--steps", "3", "--no-progress")
    assert res.returncode == 0, res.stderr[-3000:]
    again = _placed_server(res.stderr)
    assert again != first and json.loads((out / "config.json").read_text())["rollout_urls"] == again
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
