"""`bench compare` on a comparison whose finished run lost its directory: the study's record
alone no longer counts it as done (`run_dir_lost`, asked by `RunQueue.redo`)."""

from __future__ import annotations

import json

from bench.commands.compare import run_dir_lost
from sweeps.queue import RunQueue, open_storage


def _summary(out, run: str, outcome: str) -> None:
    (out / "runs" / run).mkdir(parents=True)
    (out / "runs" / run / "summary.json").write_text(
        json.dumps({"outcome": outcome, "stopped_by": "trajectories"})
    )


def test_a_run_recorded_finished_without_its_finished_directory_is_lost(tmp_path):
    _summary(tmp_path, "kept-s0", "finished")
    _summary(tmp_path, "killed-s0", "killed")  # finished per the study, its directory says otherwise
    queue = RunQueue(open_storage(f"journal:{tmp_path / 'study.journal'}", tmp_path / "unused"), "study")
    queue.ensure(["kept-s0", "gone-s0", "killed-s0", "running-s0"])
    claims = {c.run: c for c in (queue.claim() for _ in range(4))}
    for run in ("kept-s0", "gone-s0", "killed-s0"):  # no directory at all for gone-s0
        queue.finish(claims[run], 0.5, {})
    # running-s0 is not done yet: not lost, whatever its directory; never-s0 has no trial
    runs = ["kept-s0", "gone-s0", "killed-s0", "running-s0", "never-s0"]
    assert queue.redo(runs, lambda run: run_dir_lost(tmp_path, run)) == ["gone-s0", "killed-s0"]
