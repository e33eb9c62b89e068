"""Where a run directory sits (`results.experiments.run_place`): trackers group runs by it."""

from __future__ import annotations

import json
from pathlib import Path

from results.experiments import run_place


def _spec(path: Path, arms: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"arms": [{"name": a} for a in arms]}))


def test_a_comparisons_run_is_its_arm_and_seed_in_the_comparison(tmp_path):
    _spec(tmp_path / "cmp" / "comparison.json", ["sao", "ppo:vapo"])
    run = tmp_path / "cmp" / "runs" / "ppo_vapo-s2"
    run.mkdir(parents=True)
    place = run_place(run, {"algo": "ppo", "algo_preset": "vapo", "seed": 2})
    assert (place.experiment, place.group) == ((tmp_path / "cmp").resolve(), "cmp")
    assert (place.arm, place.seed, place.name, place.member) == ("ppo:vapo", 2, "ppo:vapo-s2", "s2")


def test_a_sweeps_run_is_named_by_its_trial_slot(tmp_path):
    _spec(tmp_path / "sw" / "sweep.json", ["grpo+dis"])
    run = tmp_path / "sw" / "grpo+dis" / "t3-s0"
    run.mkdir(parents=True)
    place = run_place(run, {"algo": "grpo", "algo_preset": "dis", "seed": 0})
    assert (place.group, place.arm, place.name, place.member) == ("sw", "grpo+dis", "grpo+dis-t3-s0", "t3-s0")


def test_a_run_on_its_own_is_its_algorithm_and_preset(tmp_path):
    run = tmp_path / "runs" / "my-run"  # a folder named runs/ without a comparison.json above it
    run.mkdir(parents=True)
    place = run_place(run, {"algo": "grpo", "algo_preset": "dis", "seed": 1})
    assert (place.experiment, place.group, place.arm, place.name) == (None, None, "grpo:dis", "my-run")
    assert run_place(run, {"algo": "sao"}).arm == "sao"
