"""`bench sweep` as a user runs it, on the small test base checkpoint: a 4-trial sweep finishes
with two workers, each slot run once, the paper's defaults first, parameters in config.json and
the trial in summary.json; a kill -9 mid-sweep is resumed by the same command (the killed
trial retried); --show and bench report read it; two commands share one study kept in PostgreSQL;
then `bench compare --params-from-sweep` re-runs the best parameters on fresh seeds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.conftest import TASK_ARGS
from tests.integration.journal_cuts import TEARS, tear
from tests.integration.test_cli_run import REPO, _env
from tests.integration.test_compare import postgres_db  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow


def _args(base: Path, out: Path, *extra: str, trials: int = 4) -> list[str]:
    shared = {
        "model": str(base),
        "trajectories_per_step": 8,
        "max_new_tokens": 48,
        "engine_slots": 8,
        **{f"task.{k}": v for k, v in TASK_ARGS.items()},
    }
    sets = [a for key, value in shared.items() for a in ("--set", f"{key}={value}")]
    return [
        sys.executable,
        "-m",
        "bench.cli",
        "sweep",
        "--algo",
        "grpo",
        "--trials",
        str(trials),
        "--budget",
        "trajectories=16",
        "--eval-limit",
        "10",
        "--eval-k",
        "1",
        "--out",
        str(out),
        *sets,
        *extra,
    ]


def _run(cmd: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=timeout)


def _trials(out: Path, storage: str = "") -> list:
    import optuna

    from sweeps.queue import open_storage
    from sweeps.spec import load_spec
    from sweeps.sweep import SweepSpec

    spec, _ = load_spec(out, SweepSpec)
    study = optuna.load_study(
        study_name=spec.study_name(spec.arms[0]), storage=open_storage(storage, out / "study.journal")
    )
    return study.get_trials(deepcopy=False)


def _assert_every_slot_done_once(out: Path, n: int, storage: str = "") -> list:
    trials = _trials(out, storage)
    done = [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]
    assert sorted(t.user_attrs["run"] for t in done) == [f"trial-{i:03d}" for i in range(n)]
    return done


def test_a_sweep_runs_every_trial_once_and_reports(base_checkpoint, tmp_path):
    out = tmp_path / "sweep"
    # no pruning: every trial completes whatever the scores (the pruners have tests of their own)
    res = _run(_args(base_checkpoint, out, "--workers", "2", "--pruner", "none"))
    assert res.returncode == 0, res.stdout + res.stderr
    done = _assert_every_slot_done_once(out, 4)
    first = next(t for t in done if t.user_attrs["run"] == "trial-000")
    assert (
        first.params["policy_lr"] == pytest.approx(1e-4) and first.params["algo.beta"] == 0.0
    )  # the defaults
    # issue 36: grpo's PPO clip cannot act at one policy update per batch, so it is not searched
    assert not {"algo.clip_eps_low", "algo.clip_eps_high"} & set(first.params)
    run_dir = out / "grpo" / "trial-001-s0"
    config = json.loads((run_dir / "config.json").read_text())
    params = next(t for t in done if t.user_attrs["run"] == "trial-001").params
    assert config["policy_lr"] == pytest.approx(params["policy_lr"]) and config["max_trajectories"] == 16
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["optuna"]["params"]["policy_lr"] == pytest.approx(params["policy_lr"])
    # the objective: the validation chains of the config trained on (TASK_ARGS)
    assert (run_dir / "evals" / "final" / "arith-val@max_operands=2.jsonl").exists()
    assert "grpo: " in res.stdout and "optuna-dashboard --host 127.0.0.1" in res.stdout
    assert (out / "plots" / "grpo" / "optimization_history.png").stat().st_size > 0
    overhead = json.loads((out / "sweep_summary.json").read_text())["arms"]["grpo"]["overhead"]
    assert overhead["n_trials"] == 4 and "sweep overhead: median" in res.stdout
    for row in overhead["trials"]:  # training and evaluation inside the trial's wall time
        assert 0 < row["work_s"] < row["wall_s"] and row["overhead"] == pytest.approx(
            1 - row["work_s"] / row["wall_s"]
        )
    res = _run([sys.executable, "-m", "bench.cli", "report", str(out)])
    assert res.returncode == 0 and (out / "report" / "index.html").exists(), res.stderr
    # issue 38: the report draws its own history (Optuna's plots stay under plots/ for --show)
    assert "sweep_grpo_history.png" in (out / "report" / "index.html").read_text()
    # a trial's run directory lost (deleted, a machine gone): the study keeps its value, --show
    # says what is gone instead of failing on it
    import shutil

    shutil.rmtree(out / "grpo" / "trial-002-s0")
    res = _run([sys.executable, "-m", "bench.cli", "sweep", "--show", str(out)])
    assert res.returncode == 0, res.stderr
    assert "1 completed trial(s) have no run directory left" in res.stdout
    overhead = json.loads((out / "sweep_summary.json").read_text())["arms"]["grpo"]["overhead"]
    assert overhead["n_trials"] == 3 and overhead["without_runs"] == 1

    cmp_out = tmp_path / "tuned"
    cmd = [
        sys.executable,
        "-m",
        "bench.cli",
        "compare",
        "--params-from-sweep",
        str(out),
        "--seeds",
        "1",
        "--budget",
        "trajectories=8",
        "--eval-limit",
        "5",
        "--eval-k",
        "1",
        "--workers",
        "1",
        "--out",
        str(cmp_out),
        "--set",
        f"model={base_checkpoint}",
        "--set",
        "trajectories_per_step=8",
        "--set",
        "max_new_tokens=48",
        "--set",
        "task.max_operands=2",
        "--no-report",
    ]
    res = _run(cmd)
    assert res.returncode == 0, res.stdout + res.stderr
    spec = json.loads((cmp_out / "comparison.json").read_text())
    assert spec["seeds"] == [1] and spec["tuning"]["trials_per_arm"] == 4  # a fresh seed; the tuning stated
    best = spec["tuning"]["best"]["grpo"]["params"]
    config = json.loads((cmp_out / "runs" / "grpo-s1" / "config.json").read_text())
    assert config["policy_lr"] == pytest.approx(best["policy_lr"])


def test_kill_9_mid_sweep_then_the_same_command_retries_the_killed_trial(base_checkpoint, tmp_path):
    out = tmp_path / "sweep"
    cmd = _args(base_checkpoint, out, "--workers", "1", trials=2)
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    metrics = out / "grpo" / "trial-000-s0" / "metrics.jsonl"
    deadline = time.time() + 300
    while not (metrics.exists() and metrics.read_text().strip()):
        assert proc.poll() is None and time.time() < deadline, "the sweep ended before it could be killed"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    res = _run(cmd)
    assert res.returncode == 0, res.stdout + res.stderr
    _assert_every_slot_done_once(out, 2)
    taken = [t for t in _trials(out) if str(t.user_attrs.get("fail_reason", "")).startswith("holder gone")]
    assert len(taken) == 1 and taken[0].user_attrs["run"] == "trial-000"
    assert "1 taken_over" in res.stdout


def test_a_torn_journal_is_repaired_and_the_sweep_resumes_without_losing_a_trial(base_checkpoint, tmp_path):
    """As for a comparison (test_compare): whatever byte a tear of the journal's last record
    falls on, the same command resumes the sweep; a trial whose end was lost is taken over and
    finds its runs trained and evaluated, with the same parameters."""
    out = tmp_path / "sweep"
    cmd = _args(base_checkpoint, out, "--workers", "1", trials=2)
    res = _run(cmd)
    assert res.returncode == 0, res.stdout + res.stderr
    params = {t.user_attrs["run"]: t.params for t in _assert_every_slot_done_once(out, 2)}
    for where in TEARS:
        left = tear(out / "study.journal", where)
        res = _run(cmd)
        assert res.returncode == 0 and "Traceback" not in res.stderr, (where, res.stdout + res.stderr)
        note = f"{out / 'study.journal'}: dropped {left} bytes of a torn last record"
        assert (note in res.stderr) == (left > 0), (where, res.stderr)
        done = _assert_every_slot_done_once(out, 2)
        assert {t.user_attrs["run"]: t.params for t in done} == params, where
        for slot in params:
            events = out / "grpo" / f"{slot}-s0" / "events.jsonl"
            assert not events.exists() or '"resume"' not in events.read_text(), where  # never trained again


@pytest.mark.postgres
def test_two_commands_share_one_sweep_kept_in_postgresql(base_checkpoint, tmp_path, postgres_db):  # noqa: F811
    out = tmp_path / "shared-filesystem" / "sweep"
    cmd = _args(base_checkpoint, out, "--workers", "1", "--storage", postgres_db)
    first = subprocess.Popen(
        cmd, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    while not (out / "sweep.json").exists():
        assert first.poll() is None
        time.sleep(0.05)
    second = _run(cmd)
    _, first_err = first.communicate(timeout=900)
    assert first.returncode == 0 and second.returncode == 0, first_err + second.stderr
    _assert_every_slot_done_once(out, 4, storage=postgres_db)
