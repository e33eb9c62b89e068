"""`--report-to` trackers: names and missing packages answered in one line; the same records that
metrics.jsonl gets reach every tracker (eval scores included, the config once), read back offline
from each tracker's own files: TensorBoard's event file, W&B's offline run, trackio's local
database, MLflow's file store (each where its package is installed)."""

from __future__ import annotations

import importlib.util
import math
import os
import uuid
from pathlib import Path

import pytest

from bench.errors import UsageError
from bench.trackers import Trackers, check_report_to, numeric_metrics, open_trackers, parse_report_to
from tests.requires import requires

CONFIG = {"algo": "sao", "task": "arith", "trajectories_per_step": 8, "algo_config": {"eps_high": 5.0}}
RECORDS = [
    {"step": 0, "eval/arith/avg_at_k": 0.25},
    {"step": 1, "reward/mean": 0.5, "loss/policy": float("nan"), "policy/version": 1.0, "note": "text"},
    {"step": 2, "reward/mean": 0.75, "loss/policy": 0.1, "eval/arith/avg_at_k": 0.5},
]


def test_report_to_names_parse_and_unknown_ones_get_a_hint():
    assert parse_report_to("tensorboard, wandb,tensorboard") == ["tensorboard", "wandb"]
    assert parse_report_to("") == parse_report_to("none") == []
    with pytest.raises(
        UsageError, match=r"unknown tracker 'tensorbord' \(did you mean 'tensorboard'\?\); valid: "
    ):
        parse_report_to("tensorbord")


def test_a_missing_package_is_one_line_naming_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a)
    )
    with pytest.raises(UsageError) as err:
        check_report_to("wandb")
    assert str(err.value) == (
        "--report-to wandb: the wandb package is not installed; install it with pip install 'rl-bench[wandb]' "
        "(or scripts/install.sh wandb)"
    )


def test_records_become_finite_numbers_at_their_step():
    step, metrics = numeric_metrics(RECORDS[1])
    assert step == 1 and metrics == {"reward/mean": 0.5, "policy/version": 1.0}


class _Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.logged, self.closed, self.fail = [], False, fail

    def log(self, step, metrics):
        if self.fail:
            raise RuntimeError("network down")
        self.logged.append((step, metrics))

    def close(self):
        self.closed = True


def test_a_failing_tracker_is_dropped_and_the_others_go_on(capsys):
    good, bad = _Recorder(), _Recorder(fail=True)
    trackers = Trackers({"good": good, "bad": bad})
    for record in RECORDS:
        trackers.log(record)
    trackers.close()
    assert [s for s, _ in good.logged] == [0, 1, 2] and good.closed and not bad.closed
    assert capsys.readouterr().err.count("tracker bad failed (RuntimeError: network down)") == 1


# ---- each adapter, written then read back from its own files --------------------------------------


def _read_tensorboard(run_dir: Path, tracker) -> tuple[dict[str, list[tuple[int, float]]], bool]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    scalars = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    return scalars, any(tag.startswith("config") for tag in acc.Tags()["tensors"])


def _read_wandb(run_dir: Path, tracker) -> tuple[dict[str, list[tuple[int, float]]], bool]:
    """W&B's offline run file holds the protobuf records; keys and JSON values are plain bytes in it.
    (wandb's service process writes it, so it may still be catching up when `finish` returns.)"""
    import time

    wanted = (b"reward/mean", b"eval/arith/avg_at_k", b"trajectories_per_step", b"algo_config")
    deadline = time.monotonic() + 20
    while True:
        files = list(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
        data = files[0].read_bytes() if len(files) == 1 else b""
        if all(key in data for key in wanted) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    found = {key: [] for key in ("reward/mean", "eval/arith/avg_at_k") if key.encode() in data}
    return found, b"trajectories_per_step" in data and b"algo_config" in data


def _read_trackio(run_dir: Path, tracker) -> tuple[dict[str, list[tuple[int, float]]], bool]:
    from trackio.sqlite_storage import SQLiteStorage

    logs = SQLiteStorage.get_logs(tracker.project, run_dir.name)
    scalars: dict[str, list[tuple[int, float]]] = {}
    for row in logs:
        for key, value in row.items():
            if "/" in key and isinstance(value, int | float):
                scalars.setdefault(key, []).append((row["step"], value))
    config = SQLiteStorage.get_run_config(tracker.project, run_dir.name) or {}
    return scalars, config.get("trajectories_per_step") == 8


def _read_mlflow(run_dir: Path, tracker) -> tuple[dict[str, list[tuple[int, float]]], bool]:
    from mlflow.tracking import MlflowClient

    client, run_id = MlflowClient(), tracker.run.info.run_id
    scalars = {
        key: sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))
        for key in ("reward/mean", "loss/policy", "eval/arith/avg_at_k")
    }
    params = client.get_run(run_id).data.params
    return scalars, params.get("trajectories_per_step") == "8" and params.get("algo_config/eps_high") == "5.0"


READERS = {
    "tensorboard": _read_tensorboard,
    "wandb": _read_wandb,
    "trackio": _read_trackio,
    "mlflow": _read_mlflow,
}


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """Every tracker offline and inside tmp_path."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "trackio"))  # read when trackio is first imported
    # unique per test run: trackio fixes its storage dir at first import, so an earlier session's
    # project of the same name would still be there
    monkeypatch.setenv("TRACKIO_PROJECT", f"bench-test-{uuid.uuid4().hex[:12]}")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "bench-test")
    return tmp_path


@pytest.mark.parametrize("name", list(READERS))
def test_each_tracker_receives_the_metrics_stream_and_the_config(name, offline):
    requires(name)
    run_dir = offline / "run-a"
    run_dir.mkdir()
    trackers = open_trackers(name, run_dir, CONFIG)
    adapter = trackers.adapters[name]
    for record in RECORDS:
        trackers.log(record)
    trackers.close()
    if name == "trackio":
        adapter.project = os.environ["TRACKIO_PROJECT"]
    scalars, config_logged = READERS[name](run_dir, adapter)
    assert config_logged, f"{name}: the config was not logged"
    assert "reward/mean" in scalars and "eval/arith/avg_at_k" in scalars, scalars
    if name != "wandb":  # the W&B file is only searched for keys
        assert scalars["reward/mean"] == [(1, 0.5), (2, 0.75)]
        assert scalars["eval/arith/avg_at_k"] == [(0, 0.25), (2, 0.5)]
        assert all(
            math.isfinite(v) for _, v in scalars.get("loss/policy", [])
        )  # NaN is left out, as in metrics.jsonl


def test_a_resumed_run_continues_its_mlflow_run(offline):
    requires("mlflow")
    from mlflow.tracking import MlflowClient

    run_dir = offline / "run-b"
    run_dir.mkdir()
    ids = []
    for record in RECORDS[1:]:  # two processes: the start and a resume
        trackers = open_trackers("mlflow", run_dir, CONFIG)
        ids.append(trackers.adapters["mlflow"].run.info.run_id)
        trackers.log(record)
        trackers.close()
    assert ids[0] == ids[1]
    assert [m.step for m in MlflowClient().get_metric_history(ids[0], "reward/mean")] == [1, 2]


# ---- a comparison's runs, grouped; numbers about the finished run ---------------------------------


def _comparison_run(root: Path) -> Path:
    """The run `ppo_vapo-s1` of a comparison directory `cmp` (arm `ppo:vapo`, seed 1)."""
    import json

    out = root / "cmp"
    (out / "runs" / "ppo_vapo-s1").mkdir(parents=True)
    (out / "comparison.json").write_text(json.dumps({"arms": [{"name": "ppo:vapo"}], "seeds": [1]}))
    return out / "runs" / "ppo_vapo-s1"


def _group_tensorboard(run_dir: Path, tracker) -> dict:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir.parent.parent / "tensorboard" / "ppo_vapo" / "s1"))
    acc.Reload()
    final = [(e.step, e.value) for e in acc.Scalars("final/arith/avg_at_k")]
    return {"grouped": len(acc.Scalars("reward/mean")) == 2, "final": final}


def _group_wandb(run_dir: Path, tracker) -> dict:
    import time

    wanted = (b"cmp", b"ppo:vapo-s1", b"final/arith/avg_at_k")
    deadline = time.monotonic() + 20
    while True:
        data = b"".join(p.read_bytes() for p in run_dir.glob("wandb/offline-run-*/run-*.wandb"))
        if all(key in data for key in wanted) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    grouped = b"cmp" in data and b"ppo:vapo-s1" in data and b"arm:ppo:vapo" in data
    return {"grouped": grouped, "final": [(2, 0.5)] if b"final/arith/avg_at_k" in data else []}


def _group_trackio(run_dir: Path, tracker) -> dict:
    from trackio.sqlite_storage import SQLiteStorage

    project = os.environ["TRACKIO_PROJECT"]
    config = SQLiteStorage.get_run_config(project, "ppo:vapo-s1") or {}
    logs = SQLiteStorage.get_logs(project, "ppo:vapo-s1")
    final = [(row["step"], row["final/arith/avg_at_k"]) for row in logs if "final/arith/avg_at_k" in row]
    return {"grouped": config.get("_Group") == "cmp", "final": final}


def _group_mlflow(run_dir: Path, tracker) -> dict:
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    experiment = client.get_experiment_by_name("cmp")
    (run,) = client.search_runs([experiment.experiment_id])
    tags = run.data.tags
    grouped = (tags["mlflow.runName"], tags["bench.arm"], tags["bench.seed"]) == (
        "ppo:vapo-s1",
        "ppo:vapo",
        "1",
    )
    final = [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "final/arith/avg_at_k")]
    return {"grouped": grouped, "final": final}


GROUP_READERS = {
    "tensorboard": _group_tensorboard,
    "wandb": _group_wandb,
    "trackio": _group_trackio,
    "mlflow": _group_mlflow,
}


@pytest.mark.parametrize("name", list(GROUP_READERS))
def test_a_comparisons_run_is_grouped_and_its_final_numbers_follow_it(name, offline):
    import json

    from bench.trackers.final import log_to_run

    requires(name)
    run_dir = _comparison_run(offline)
    config = {**CONFIG, "seed": 1, "report_to": name}
    (run_dir / "config.json").write_text(json.dumps(config))
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    trackers = open_trackers(name, run_dir, config)
    adapter = trackers.adapters[name]
    for record in RECORDS:
        trackers.log(record)
    trackers.close()
    assert log_to_run(run_dir, {"final/arith/avg_at_k": 0.5, "final/arith/nan": float("nan")})
    found = GROUP_READERS[name](run_dir, adapter)
    assert found["grouped"], f"{name}: the run is not grouped as its comparison"
    assert found["final"] == [(2, 0.5)]  # at the run's last step, in the same tracker run


def test_a_final_evaluation_into_a_runs_evals_goes_to_its_trackers(tmp_path, monkeypatch):
    import bench.trackers.final as final

    sent = []
    monkeypatch.setattr(final, "log_to_run", lambda run, metrics: sent.append((run, metrics)) or True)
    run = tmp_path / "run"
    (run / "evals" / "final").mkdir(parents=True)
    (run / "config.json").write_text("{}")
    summary = {
        "benchmark": "arith",
        "k": 2,
        "avg_at_k": 0.25,
        "pass_at_k": {"1": 0.25, "2": 0.4},
        "ci95": [0.1, 0.4],
        "mean_tokens": 12.0,
    }
    assert final.log_final_evaluation(run / "evals" / "final", [summary])
    ((where, metrics),) = sent
    assert (
        where == run.resolve()
        and metrics["final/arith/avg_at_k"] == 0.25
        and metrics["final/arith/pass_at_2"] == 0.4
    )
    assert not final.log_final_evaluation(tmp_path / "elsewhere", [summary])  # not a run's evaluation


def test_the_reports_headline_numbers_are_each_arms_own():
    import pandas as pd

    from bench.trackers.final import report_metrics

    scores = pd.DataFrame(
        {
            "arm": ["sao", "grpo"],
            "benchmark": ["arith"] * 2,
            "mean": [0.6, 0.5],
            "ci_low": [0.5, 0.4],
            "ci_high": [0.7, 0.6],
        }
    )
    diffs = pd.DataFrame(
        {
            "arm": ["sao"],
            "baseline": ["grpo"],
            "benchmark": ["arith"],
            "diff": [0.1],
            "ci_low": [0.02],
            "ci_high": [0.18],
            "welch_low": [0.01],
            "welch_high": [0.19],
        }
    )
    assert report_metrics("sao", scores, diffs) == {
        "report/arith/score": 0.6,
        "report/arith/score_ci_low": 0.5,
        "report/arith/score_ci_high": 0.7,
        "report/arith/diff_vs_grpo": 0.1,
        "report/arith/diff_vs_grpo_ci_low": 0.02,
        "report/arith/diff_vs_grpo_ci_high": 0.18,
        "report/arith/diff_vs_grpo_seed_ci_low": 0.01,
        "report/arith/diff_vs_grpo_seed_ci_high": 0.19,
    }
    assert set(report_metrics("grpo", scores, diffs)) == {
        "report/arith/score",
        "report/arith/score_ci_low",
        "report/arith/score_ci_high",
    }
