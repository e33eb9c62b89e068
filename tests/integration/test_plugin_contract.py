"""Installed plugins as a user has them: real entry points in the `bench.algorithms` group of
two distributions on PYTHONPATH, one deliberately broken and one written to the previous
contract (plugin API 1). The broken one breaks only itself; the old ones load, train 2 steps
through `bench run` and print exactly one warning each, naming what to change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.integration.conftest import TASK_ARGS

REPO = Path(__file__).resolve().parents[2]

API1_PLUGINS = '''
"""Two plugins as their authors wrote them for plugin API 1 (commit 96e0e82)."""
from dataclasses import dataclass

import torch

from algorithms.advantages import broadcast_to_tokens, group_zscore
from algorithms.aggregation import aggregate
from algorithms.base import AdvantageResult, Algorithm, LossOutput, Trajectories, doc
from algorithms.objectives import select_tokens


@dataclass(frozen=True)
class Config:
    group_size: int = doc("rollouts per prompt", default=4)
    ratio: bool = doc("weigh by the ratio to the old policy", default=True)


class _Base(Algorithm):
    Config = Config

    def advantages(self, traj):
        adv_B = group_zscore(traj.rewards_B, self.group_size)
        return AdvantageResult(broadcast_to_tokens(adv_B, traj.action_mask_B_T))

    def policy_loss(self, inp):
        mask = inp.action_mask_B_T
        logp, adv = select_tokens(mask, inp.logp_B_T, inp.advantages_B_T)
        if inp.old_logp_B_T is not None:
            (old,) = select_tokens(mask, inp.old_logp_B_T)
            loss_B_T = -adv * torch.exp(logp - old)
        else:
            loss_B_T = -adv * logp
        loss = aggregate(loss_B_T, mask, "token-mean")
        return LossOutput(loss, {"loss/policy": loss.item()})


class NeedsInInit(_Base):
    name = "api1-needs"
    summary = "plugin API 1: sets self.needs in __init__"

    def __init__(self, config=None):
        super().__init__(config)
        self.needs = frozenset({"old_logp"}) if self.config.ratio else frozenset()


class OldTrajectories(_Base):
    name = "api1-traj"
    summary = "plugin API 1: builds Trajectories with group_index_B and truncated_B"

    def advantages(self, traj):
        B = traj.rewards_B.shape[0]
        clipped = Trajectories(
            rewards_B=traj.rewards_B.clamp(0.0, 1.0),
            action_mask_B_T=traj.action_mask_B_T,
            response_mask_B_T=traj.response_mask_B_T,
            group_index_B=torch.arange(B) // self.group_size,
            prompt_keys=traj.prompt_keys,
            max_response_tokens=traj.max_response_tokens,
            truncated_B=traj.response_mask_B_T.sum(-1) >= traj.max_response_tokens,
        )
        return super().advantages(clipped)
'''


def _dist(root: Path, name: str, entry_points: str) -> None:
    """An installed distribution: a dist-info with METADATA and entry_points.txt."""
    info = root / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[bench.algorithms]\n{entry_points}\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A folder on PYTHONPATH holding two plugin distributions, as `pip install --target` leaves them."""
    root = tmp_path_factory.mktemp("site")
    (root / "broken_bench.py").write_text("import torch\nraise RuntimeError('plugin init failed')\n")
    _dist(root, "broken-bench", "broken = broken_bench:Broken")
    (root / "old_bench.py").write_text(textwrap.dedent(API1_PLUGINS))
    _dist(root, "old-bench", "api1-needs = old_bench:NeedsInInit\napi1-traj = old_bench:OldTrajectories")
    return root


def bench(site: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    return subprocess.run(
        [sys.executable, "-m", "bench.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=timeout,
    )


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("bench: warning: ")]


BROKEN = (
    "algorithm 'broken' from entry point (broken-bench) cannot be used: cannot load broken_bench:Broken: "
    "RuntimeError: plugin init failed"
)


def test_algos_lists_every_plugin_that_loads_and_reports_the_broken_one_in_one_line(site):
    res = bench(site, "algos")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    listed = [line.split()[0] for line in res.stdout.splitlines()[2:] if line.strip() and line[0] != "`"]
    assert {"sao", "grpo", "ppo", "api1-needs", "api1-traj"} <= set(listed) and "broken" not in listed
    assert f"bench: warning: {BROKEN}" in _warnings(res.stderr)
    as_json = bench(site, "algos", "--json")
    assert as_json.returncode == 0 and BROKEN in as_json.stderr
    rows = {row["name"]: row for row in json.loads(as_json.stdout)}
    assert rows["api1-needs"]["source"] == "entry point (old-bench)" and "broken" not in rows


def test_asking_for_the_broken_plugin_is_a_one_line_error(site):
    for args in (("algos", "broken"), ("run", "--algo", "broken", "--steps", "1")):
        res = bench(site, *args)
        assert res.returncode == 2 and res.stderr.strip() == f"bench: error: {BROKEN}", res.stderr
    check = bench(site, "algos", "--check", "broken")
    assert check.returncode == 1 and check.stdout.strip() == f"FAIL {BROKEN}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "algo, warning",
    [
        ("api1-needs", "api1-needs: `self.needs = ...` in __init__ is plugin API 1's form"),
        (
            "api1-traj",
            "Trajectories(group_index_B=..., truncated_B=...): removed in plugin API 2 and ignored",
        ),
    ],
)
def test_a_plugin_written_to_the_previous_contract_trains_with_one_warning(
    site, base_checkpoint, tmp_path, algo, warning
):
    out = tmp_path / "run"
    task = [a for k, v in TASK_ARGS.items() for a in ("--set", f"task.{k}={v}")]
    res = bench(
        site,
        "run",
        "--algo",
        algo,
        "--model",
        str(base_checkpoint),
        "--steps",
        "2",
        "--mode",
        "sync",
        "--set",
        "trajectories_per_step=8",
        "--set",
        "max_new_tokens=32",
        "--set",
        "policy_lr=1e-3",
        *task,
        "--no-progress",
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    (line,) = _warnings(res.stderr)
    assert line.startswith(f"bench: warning: {warning}")
    steps = [json.loads(row) for row in (out / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    config = json.loads((out / "config.json").read_text())
    assert config["algo_source"]["distribution"] == "old-bench"
