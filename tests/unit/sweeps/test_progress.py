"""The live view of `bench compare` and `bench sweep` (`sweeps.progress`): every run's state read
from the experiment's directory (status records, metrics, summaries, final evaluations; no log
line), shown as a table redrawn in place on a terminal and as one line per event elsewhere."""

from __future__ import annotations

import io
import json
from pathlib import Path

from sweeps.progress import LiveView, budget_progress, last_metrics, read_rows

SPEC = {
    "task": "arith",
    "arms": [{"name": "sao"}, {"name": "ppo:vapo"}],
    "seeds": [0, 1],
    "budget": {"kind": "trajectories", "amount": 1024},
    "eval": {"benchmarks": ["arith"]},
}


def _status(out: Path, run: str, **record) -> None:
    (out / "status").mkdir(exist_ok=True)
    (out / "status" / f"{run}.json").write_text(json.dumps({"run": run, **record}))


def _metrics(run_dir: Path, steps: int, per_step: int = 128) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    rows = [
        {"step": s, "reward/mean": 0.1 * s, "budget/trajectories": float(per_step * s)}
        for s in range(1, steps + 1)
    ]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 9, "rew')


def _comparison(out: Path) -> Path:
    out.mkdir()
    (out / "comparison.json").write_text(json.dumps(SPEC))
    runs = out / "runs"
    _status(out, "sao-s0", state="finished", detail="trajectories")
    _metrics(runs / "sao-s0", 8)
    final = runs / "sao-s0" / "evals" / "final"
    final.mkdir(parents=True)
    (final / "arith.summary.json").write_text(json.dumps({"avg_at_k": 0.625}))
    _status(out, "sao-s1", state="running")
    _metrics(runs / "sao-s1", 3)
    _status(out, "ppo_vapo-s0", state="failed", detail="CUDA out of memory")
    _metrics(runs / "ppo_vapo-s0", 1)
    return out


def test_each_run_is_read_from_its_directory_not_its_log(tmp_path):
    rows = {r.run: r for r in read_rows(_comparison(tmp_path / "cmp"))}
    assert [r for r in rows] == ["sao-s0", "sao-s1", "ppo_vapo-s0", "ppo_vapo-s1"]
    assert (rows["sao-s0"].state, rows["sao-s0"].result) == ("finished", "arith 62.5%")
    assert rows["sao-s1"].state == "running" and rows["sao-s1"].reward == "0.300"
    assert rows["sao-s1"].progress == "step 3, trajectories 384/1,024 (38%)"  # the torn last line is skipped
    assert (rows["ppo_vapo-s0"].state, rows["ppo_vapo-s0"].result) == ("failed", "CUDA out of memory")
    assert rows["ppo_vapo-s1"].state == "queued"


def test_a_trained_run_whose_status_is_still_running_is_evaluating(tmp_path):
    out = _comparison(tmp_path / "cmp")
    (out / "runs" / "sao-s1" / "summary.json").write_text(json.dumps({"outcome": "finished"}))
    rows = {r.run: r for r in read_rows(out)}
    assert rows["sao-s1"].state == "evaluating"


def test_a_run_whose_worker_here_is_gone_is_interrupted_not_running(tmp_path):
    import subprocess
    import sys

    from sweeps.queue import worker_id

    out = _comparison(tmp_path / "cmp")
    _status(out, "sao-s1", state="running", worker=worker_id())  # this process: alive
    assert {r.run: r for r in read_rows(out)}["sao-s1"].state == "running"
    child = subprocess.run(
        [sys.executable, "-c", "from sweeps.queue import worker_id; print(worker_id())"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    _status(out, "sao-s1", state="running", worker=child.stdout.strip())  # a worker that has ended
    row = {r.run: r for r in read_rows(out)}["sao-s1"]
    assert row.state == "interrupted" and row.progress == "step 3, trajectories 384/1,024 (38%)"
    assert row.result.startswith("its worker is gone: it resumes from its last checkpoint")


def test_off_a_terminal_each_event_is_one_line(tmp_path):
    out = _comparison(tmp_path / "cmp")
    stream = io.StringIO()
    view = LiveView(out, stream, table=False)
    view.poll()
    first = stream.getvalue().splitlines()
    assert len(first) == 3 and all(line.startswith("[") for line in first)  # the queued run says nothing
    assert first[0].endswith("sao-s0: finished: arith 62.5%")
    assert first[1].endswith("sao-s1: running: step 3, trajectories 384/1,024 (38%)")
    assert first[2].endswith("ppo_vapo-s0: failed: CUDA out of memory")
    view.poll()
    assert stream.getvalue().splitlines() == first  # nothing changed: nothing printed
    _status(out, "ppo_vapo-s1", state="running")
    view.poll()
    assert stream.getvalue().splitlines()[-1].endswith("ppo_vapo-s1: running: starting")


def test_on_a_terminal_the_table_is_redrawn_in_place(tmp_path):
    out = _comparison(tmp_path / "cmp")
    stream = io.StringIO()
    view = LiveView(out, stream, table=True)
    view.poll()
    view.poll()
    text = stream.getvalue()
    assert text.startswith("\x1b[J") and "\x1b[7F\x1b[J" in text  # header, rule, 4 runs, summary: 7 lines up
    assert "4 runs: 1 finished, 1 running, 1 failed, 1 queued" in text


def test_a_sweeps_trials_show_their_current_seed_and_their_value(tmp_path):
    out = tmp_path / "sweep"
    (out / "status" / "sao").mkdir(parents=True)
    spec = {
        "arms": [{"name": "sao"}],
        "trials": 3,
        "seeds": [0, 1],
        "budget": {"kind": "trajectories", "amount": 256},
    }
    (out / "sweep.json").write_text(json.dumps(spec))
    (out / "status" / "sao" / "trial-000.json").write_text(json.dumps({"state": "complete", "value": 0.55}))
    (out / "status" / "sao" / "trial-001.json").write_text(json.dumps({"state": "running"}))
    _metrics(out / "sao" / "trial-001-s1", 1)
    rows = {r.run: r for r in read_rows(out)}
    assert (rows["sao/trial-000"].state, rows["sao/trial-000"].result) == ("complete", "0.55")
    assert rows["sao/trial-001"].progress == "s1: step 1, trajectories 128/256 (50%)"
    assert rows["sao/trial-002"].state == "queued"


def test_budget_progress_counts_the_budget_in_its_unit(tmp_path):
    assert budget_progress({"step": 4, "budget/elapsed_s": 90.0}, {"kind": "minutes", "amount": 3}) == (
        "step 4, minutes 1.5/3 (50%)"
    )
    assert budget_progress({}, {"kind": "minutes", "amount": 3}) == "starting"
    assert last_metrics(tmp_path / "missing.jsonl") == {}


def test_a_run_placed_by_a_cluster_shows_where_it_runs_or_what_it_waits_for(tmp_path):
    out = _comparison(tmp_path / "cmp")
    _status(out, "sao-s1", state="running", where="vm node 1a2b3c4d gpu 0,1")
    _status(out, "ppo_vapo-s1", state="queued", asks="1 CPU, 2 GPU")
    rows = {r.run: r for r in read_rows(out)}
    assert rows["sao-s1"].where == "vm node 1a2b3c4d gpu 0,1"
    assert (rows["ppo_vapo-s1"].state, rows["ppo_vapo-s1"].where) == ("queued", "asks 1 CPU, 2 GPU")
    assert rows["sao-s0"].where == ""  # a local worker's run: no column entry
    stream = io.StringIO()
    LiveView(out, stream, table=True).poll()
    assert "where" in stream.getvalue().splitlines()[0] and "asks 1 CPU, 2 GPU" in stream.getvalue()
    stream = io.StringIO()
    LiveView(out, stream, table=False).poll()
    assert (
        "sao-s1: running: step 3, trajectories 384/1,024 (38%) (vm node 1a2b3c4d gpu 0,1)"
        in stream.getvalue()
    )
