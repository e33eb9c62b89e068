"""`bench compare` on the local backend refuses, in one line before any worker starts, a
comparison whose runs are held by workers of another machine (`sweeps.queue.foreign_holds`):
this machine cannot see whether they live, and several machines are a Ray cluster's business."""

from __future__ import annotations

import pytest

from bench.commands import run_experiment
from sweeps.comparison import ComparisonSpec
from sweeps.errors import ExperimentError
from sweeps.launch import LaunchOptions
from sweeps.queue import RunQueue, open_storage
from sweeps.spec import Arm, save_spec


def test_a_comparison_held_on_another_machine_is_refused_before_any_worker_starts(tmp_path, monkeypatch):
    import sweeps.launch

    spec = ComparisonSpec(
        task="arith", arms=(Arm(name="sao", algo="sao"),), budget=("trajectories", 8.0), seeds=(0, 1)
    )
    save_spec(tmp_path, spec, {"storage": "", "study": "cmp"})
    queue = RunQueue(open_storage("", tmp_path / "study.journal"), "cmp")
    queue.ensure(spec.run_names())
    queue.worker = "other-host:b00t:4242:1"
    queue.claim()
    started = []
    monkeypatch.setattr(sweeps.launch, "run_workers", lambda *a: started.append(a) or [0])
    with pytest.raises(ExperimentError, match=r"held by workers of another machine \(sao-s0 on other-host\)"):
        run_experiment(tmp_path, LaunchOptions(workers=1), cluster=None)
    assert started == []
