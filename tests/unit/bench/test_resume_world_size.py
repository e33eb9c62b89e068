"""A run recorded on N learner ranks resumes on another number: no note about the algorithm,
config.json and the resume event record the new world size; a config.json from before the world
size was recorded is left as it is."""

from __future__ import annotations

import json

from bench.config import build_run
from bench.train.start import recorded_config, resume_run
from results.rundir import RunDir


def test_a_two_rank_run_resumes_in_one_process(tmp_path, monkeypatch, capsys):
    parts = build_run({"algo": "grpo", "trajectories_per_step": 16})
    monkeypatch.setenv("WORLD_SIZE", "2")  # what torchrun set when the run started
    recorded = recorded_config(parts)
    monkeypatch.delenv("WORLD_SIZE")
    assert recorded["world_size"] == 2
    RunDir.create(tmp_path / "run", recorded, {})
    run, _, checkpoint = resume_run(tmp_path / "run")
    try:
        assert checkpoint is None and "differs from the one recorded" not in capsys.readouterr().out
        assert run.read_config() == {**recorded, "world_size": 1}
        event = json.loads((tmp_path / "run" / "events.jsonl").read_text().splitlines()[-1])
        assert (event["event"], event["world_size"], event["changed"]) == ("resume", 1, {})
    finally:
        run.unlock()


def test_a_config_without_a_world_size_is_not_rewritten(tmp_path):
    recorded = recorded_config(build_run({"algo": "grpo"}))
    del recorded["world_size"]  # written before the field existed
    RunDir.create(tmp_path / "run", recorded, {})
    run, _, _ = resume_run(tmp_path / "run")
    try:
        assert run.read_config() == recorded
    finally:
        run.unlock()
