"""Comparisons and sweeps under a distributed launcher: refused at once, and their workers and
runs never see a launcher's variables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeps import launch, processes
from sweeps.errors import ExperimentError
from sweeps.launcher import launcher_variables, refuse_inside_launcher, without_launcher_variables

REPO = Path(__file__).resolve().parents[3]
TORCHRUN_RANK = {  # what torchrun's agent sets in each rank it starts (one of two)
    "WORLD_SIZE": "2",
    "RANK": "1",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "GROUP_RANK": "0",
    "ROLE_RANK": "1",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
    "TORCHELASTIC_RUN_ID": "none",
    "TORCHELASTIC_RESTART_COUNT": "0",
}


@pytest.mark.parametrize("var", ["WORLD_SIZE", "RANK", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"])
def test_any_rank_variable_refuses_a_comparison(var):
    with pytest.raises(
        ExperimentError, match=f"bench compare runs inside a distributed launcher \\({var} set\\)"
    ):
        refuse_inside_launcher("compare", {"PATH": "/bin", var: "0"})
    refuse_inside_launcher("compare", {"PATH": "/bin", "MASTER_PORT": "1"})  # a rendezvous alone: no rank


def test_launcher_variables_are_stripped_and_nothing_else():
    env = {**TORCHRUN_RANK, "PATH": "/bin", "CUDA_VISIBLE_DEVICES": "3", "OMP_NUM_THREADS": "2"}
    assert set(launcher_variables(env)) == set(TORCHRUN_RANK)
    assert without_launcher_variables(env) == {
        "PATH": "/bin",
        "CUDA_VISIBLE_DEVICES": "3",
        "OMP_NUM_THREADS": "2",
    }


def test_workers_and_runs_start_without_launcher_variables(monkeypatch, tmp_path):
    for key, value in TORCHRUN_RANK.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    seen = []

    class Recorded:
        def __init__(self, args, **kwargs):
            seen.append(kwargs["env"])

        def poll(self):  # ended at once
            return 0

        def wait(self):
            return 0

    monkeypatch.setattr(launch.subprocess, "Popen", Recorded)
    monkeypatch.setattr(processes.subprocess, "Popen", Recorded)
    launch.run_workers(tmp_path, 2)
    processes.start_bench(["run", "--steps", "1"], tmp_path / "log", None)
    assert len(seen) == 3
    for env in seen:
        assert not launcher_variables(env), launcher_variables(env)


@pytest.mark.parametrize("command", [["compare", "--algos", "sao"], ["sweep", "--algo", "sao"]])
def test_compare_and_sweep_exit_2_under_a_launcher(command, tmp_path):
    env = {**os.environ, **TORCHRUN_RANK, "HF_HUB_OFFLINE": "1"}
    args = [*command, "--budget", "trajectories=64", "--out", str(tmp_path / "x")]
    res = subprocess.run(
        [sys.executable, "-m", "bench.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert (
        f"bench {command[0]} runs inside a distributed launcher (WORLD_SIZE, RANK, LOCAL_RANK" in res.stderr
    )
    assert not (tmp_path / "x").exists()  # refused before anything was made
