"""`bench compare` and `bench report` as a user runs them, on the small test base checkpoint:
the grid finishes with every run done exactly once by two workers, a kill -9 of everything
mid-run is resumed by the same command without a gap or a duplicate step, a failed run is
reported as failed, and (with a PostgreSQL server) two commands share one comparison whose
study is kept in PostgreSQL (on one machine: several machines are a Ray cluster's, tested in
test_ray_cluster)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.integration.conftest import OWN_BENCHMARK, TASK_ARGS
from tests.integration.journal_cuts import TEARS, tear
from tests.integration.test_cli_run import REPO, _assert_no_process_mentions, _env
from tests.requires import POSTGRES_URL_VARIABLE

pytestmark = pytest.mark.slow


def _args(
    base: Path, out: Path, *extra: str, algos: str = "sao,grpo", seeds: str = "2", budget: int = 24
) -> list[str]:
    shared = {
        "model": str(base),
        "trajectories_per_step": 8,
        "max_new_tokens": 48,
        "engine_slots": 8,
        "policy_lr": 1e-3,
        "checkpoint_every": 1,
        **{f"task.{k}": v for k, v in TASK_ARGS.items()},
    }
    sets = [a for key, value in shared.items() for a in ("--set", f"{key}={value}")]
    return [
        sys.executable,
        "-m",
        "bench.cli",
        "compare",
        "--algos",
        algos,
        "--seeds",
        seeds,
        "--budget",
        f"trajectories={budget}",
        "--eval-limit",
        "10",
        "--eval-k",
        "2",
        "--out",
        str(out),
        *sets,
        *extra,
    ]


def _compare(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=timeout)


def _trials(out: Path, storage: str = "") -> list:
    from sweeps.comparison import ComparisonSpec
    from sweeps.queue import RunQueue, open_storage
    from sweeps.spec import load_spec

    _, data = load_spec(out, ComparisonSpec)
    return RunQueue(open_storage(storage, out / "study.journal"), data["study"]).study.get_trials(
        deepcopy=False
    )


def _steps(out: Path, run: str) -> list[int]:
    lines = (out / "runs" / run / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["step"] for line in lines]


def _assert_each_run_completed_once(out: Path, runs: list[str], storage: str = "") -> None:
    complete = [t.user_attrs["run"] for t in _trials(out, storage) if t.state.name == "COMPLETE"]
    assert sorted(complete) == sorted(runs)
    for run in runs:
        status = json.loads((out / "status" / f"{run}.json").read_text())
        assert status["state"] == "finished", status
        assert _steps(out, run) == [1, 2, 3]
        assert (out / "runs" / run / "evals" / "final" / f"{OWN_BENCHMARK}.jsonl").exists()


def _tensorboard_scalars(path: Path) -> set[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(path))
    acc.Reload()
    return set(acc.Tags()["scalars"])


def test_two_workers_finish_the_grid_once_and_the_report_is_written(base_checkpoint, tmp_path):
    out = tmp_path / "cmp"
    tensorboard = importlib.util.find_spec("tensorboard") is not None  # CI installs it
    trackers = ("--set", "report_to=tensorboard") if tensorboard else ()
    res = _compare(*_args(base_checkpoint, out, "--workers", "2", *trackers))
    assert res.returncode == 0, res.stdout + res.stderr
    _assert_each_run_completed_once(out, ["sao-s0", "sao-s1", "grpo-s0", "grpo-s1"])
    if tensorboard:  # laid out by arm and seed, with the final evaluation and the report's numbers
        scalars = _tensorboard_scalars(out / "tensorboard" / "sao" / "s1")
        assert {
            "reward/mean",
            f"final/{OWN_BENCHMARK}/avg_at_k",
            f"report/{OWN_BENCHMARK}/score",
            f"report/{OWN_BENCHMARK}/diff_vs_grpo",
        } <= scalars
    assert "sao" in res.stdout and "vs grpo" in res.stdout and "report:" in res.stdout
    # off a terminal the live view is one line per event, read from the runs' files
    assert "] sao-s0: running" in res.stdout and f"] grpo-s1: finished: {OWN_BENCHMARK} " in res.stdout
    for name in ("scores", "differences", "budget", "runs", "per_seed"):
        for ext in ("md", "csv", "tex"):
            assert (out / "report" / "tables" / f"{name}.{ext}").stat().st_size > 0
    assert (out / "report" / "index.html").exists()
    # running it again (the same arguments) resumes a finished comparison: nothing is trained twice
    res = _compare(*_args(base_checkpoint, out, "--workers", "2", *trackers))
    assert res.returncode == 0, res.stderr
    assert all(json.loads(p.read_text())["attempts"] == 1 for p in (out / "status").glob("*.json"))
    res = subprocess.run(
        [sys.executable, "-m", "bench.cli", "report", str(out), "--baseline", "sao"],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0 and "vs sao" in res.stdout, res.stderr


def test_kill_9_of_the_comparison_then_the_same_command_resumes_it(base_checkpoint, tmp_path):
    out = tmp_path / "cmp"
    cmd = _args(base_checkpoint, out, "--workers", "1", seeds="1")
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    metrics = out / "runs" / "sao-s0" / "metrics.jsonl"
    deadline = time.time() + 300
    while not (metrics.exists() and len(metrics.read_text().splitlines()) >= 2):
        assert proc.poll() is None and time.time() < deadline, (
            "the comparison ended before it could be killed"
        )
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the command, its worker and the run: a crashed machine
    proc.wait()
    _assert_no_process_mentions(str(out / "runs"), within_s=10)
    res = _compare(*cmd)
    assert res.returncode == 0, res.stdout + res.stderr
    _assert_each_run_completed_once(out, ["sao-s0", "grpo-s0"])
    status = json.loads((out / "status" / "sao-s0.json").read_text())
    assert status["attempts"] == 2
    resumes = [
        e for e in (out / "runs" / "sao-s0" / "events.jsonl").read_text().splitlines() if '"resume"' in e
    ]
    assert len(resumes) == 1  # continued from its checkpoint, not started again
    reasons = [t.user_attrs.get("fail_reason", "") for t in _trials(out) if t.state.name == "FAIL"]
    assert len(reasons) == 1 and reasons[0].startswith("holder gone")


def test_a_torn_journal_is_repaired_and_the_comparison_resumes_without_losing_a_run(
    base_checkpoint, tmp_path
):
    """A kill or a full disk mid-append tears the journal's last record; whatever byte the tear
    falls on, the same command resumes: the torn record is dropped, a run whose end it recorded
    is found finished in its directory (not trained again, its evaluation kept)."""
    out = tmp_path / "cmp"
    cmd = [*_args(base_checkpoint, out, "--workers", "1", algos="sao", seeds="1"), "--no-report"]
    res = _compare(*cmd)
    assert res.returncode == 0, res.stdout + res.stderr
    records = (out / "runs" / "sao-s0" / "evals" / "final" / f"{OWN_BENCHMARK}.jsonl").read_bytes()
    for where in TEARS:
        left = tear(out / "study.journal", where)
        res = _compare(*cmd)
        assert res.returncode == 0 and "Traceback" not in res.stderr, (where, res.stdout + res.stderr)
        note = f"{out / 'study.journal'}: dropped {left} bytes of a torn last record"
        assert (note in res.stderr) == (left > 0), (where, res.stderr)
        _assert_each_run_completed_once(out, ["sao-s0"])
        events = out / "runs" / "sao-s0" / "events.jsonl"
        assert not events.exists() or '"resume"' not in events.read_text(), where  # never trained again
        assert (
            out / "runs" / "sao-s0" / "evals" / "final" / f"{OWN_BENCHMARK}.jsonl"
        ).read_bytes() == records
    assert all(json.loads(line) for line in (out / "study.journal").read_bytes().splitlines())


def test_more_seeds_extend_the_comparison_and_keep_its_finished_runs(base_checkpoint, tmp_path):
    out = tmp_path / "cmp"
    first = _compare(
        *_args(base_checkpoint, out, "--workers", "1", "--no-report", algos="sao", seeds="1", budget=8)
    )
    assert first.returncode == 0, first.stdout + first.stderr
    trained = (out / "runs" / "sao-s0" / "metrics.jsonl").read_text()
    more = _compare(
        *_args(base_checkpoint, out, "--workers", "1", "--no-report", algos="sao", seeds="2", budget=8)
    )
    assert more.returncode == 0, more.stdout + more.stderr
    assert f"comparison: {out} extended by seed(s) 1; its finished runs are kept" in more.stdout
    spec = json.loads((out / "comparison.json").read_text())
    assert spec["seeds"] == [0, 1] and [e["seeds"] for e in spec["extended"]] == [[1]]
    assert (out / "runs" / "sao-s0" / "metrics.jsonl").read_text() == trained  # not trained again
    complete = sorted(t.user_attrs["run"] for t in _trials(out) if t.state.name == "COMPLETE")
    assert complete == ["sao-s0", "sao-s1"]  # one study: the first seed's trial and the new one's
    assert json.loads((out / "status" / "sao-s1.json").read_text())["state"] == "finished"


def test_a_failed_run_is_reported_as_failed(base_checkpoint, tmp_path):
    out = tmp_path / "cmp"
    (out / "runs").mkdir(parents=True)
    (out / "runs" / "grpo-s0").write_text("a file where the run directory should be")
    res = _compare(*_args(base_checkpoint, out, "--workers", "1", seeds="1", budget=8))
    assert res.returncode == 1
    assert "failed: grpo-s0: bench run exited with 2: bench: error: --out" in res.stderr
    status = json.loads((out / "status" / "sao-s0.json").read_text())
    assert status["state"] == "finished"  # the other run was not taken down
    runs = (out / "report" / "tables" / "runs.csv").read_text()
    assert "grpo-s0,grpo,0,failed" in runs


@pytest.fixture
def postgres_db():
    """A fresh database on the server of BENCH_TEST_POSTGRES_URL (.ci/run starts one), dropped after;
    for tests marked `postgres`, which are skipped without that variable."""
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    assert url, "a test that uses postgres_db is marked postgres (skipped without the server)"
    import sqlalchemy

    name = f"bench_test_{uuid.uuid4().hex[:10]}"
    admin = sqlalchemy.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f"CREATE DATABASE {name}"))
    yield url.rsplit("/", 1)[0] + f"/{name}"
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f"DROP DATABASE {name} WITH (FORCE)"))
    admin.dispose()


@pytest.mark.postgres
def test_two_commands_share_one_comparison_kept_in_postgresql(base_checkpoint, tmp_path, postgres_db):
    out = tmp_path / "shared-filesystem" / "cmp"
    cmd = _args(base_checkpoint, out, "--workers", "1", "--storage", postgres_db)
    first = subprocess.Popen(
        cmd, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    while not (out / "comparison.json").exists():  # the second command joins the same comparison
        assert first.poll() is None
        time.sleep(0.05)
    second = _compare(*cmd)
    first_out, first_err = first.communicate(timeout=600)
    assert first.returncode == 0 and second.returncode == 0, first_err + second.stderr
    _assert_each_run_completed_once(out, ["sao-s0", "sao-s1", "grpo-s0", "grpo-s1"], storage=postgres_db)
    workers = {json.loads(p.read_text())["worker"].split(":")[2] for p in (out / "status").glob("*.json")}
    assert len(workers) == 2  # both commands' workers ran runs
