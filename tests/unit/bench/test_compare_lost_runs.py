"""`bench compare` on a comparison whose finished run lost its directory: the study's record
alone no longer counts it as done (`lost_runs`, then `RunQueue.redo`)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from optuna.trial import TrialState

from bench.commands.compare import lost_runs


class _Queue:
    def __init__(self, states: dict[str, TrialState]) -> None:
        self.states = states

    def latest(self) -> dict:
        return {run: SimpleNamespace(state=state) for run, state in self.states.items()}


def _summary(out, run: str, outcome: str) -> None:
    (out / "runs" / run).mkdir(parents=True)
    (out / "runs" / run / "summary.json").write_text(
        json.dumps({"outcome": outcome, "stopped_by": "trajectories"})
    )


def test_a_run_recorded_finished_without_its_finished_directory_is_lost(tmp_path):
    _summary(tmp_path, "kept-s0", "finished")
    _summary(tmp_path, "killed-s0", "killed")  # finished per the study, its directory says otherwise
    queue = _Queue(
        {
            "kept-s0": TrialState.COMPLETE,
            "gone-s0": TrialState.COMPLETE,  # no directory at all
            "killed-s0": TrialState.COMPLETE,
            "running-s0": TrialState.RUNNING,  # not done yet: not lost, whatever its directory
        }
    )
    runs = ["kept-s0", "gone-s0", "killed-s0", "running-s0", "never-s0"]
    assert lost_runs(tmp_path, queue, runs) == ["gone-s0", "killed-s0"]
