"""Comparison and sweep specs: arms from a list or a TOML file, budgets, the run configs every
arm gets, and the fingerprint that tells one experiment from another (the same for spec files
written before the specs shared a base class)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bench.config import build_config
from sweeps.comparison import ComparisonSpec, EvalPlan, parse_select
from sweeps.errors import ExperimentError
from sweeps.spec import Arm, load_spec, parse_arms, parse_budget, save_spec
from sweeps.sweep import SweepSpec

LEGACY = Path(__file__).with_name("legacy_specs.json")
"""A comparison.json and a sweep.json written by the code before `sweeps.spec` (commit 2988a4b),
with their fingerprints."""


def _spec(**kw) -> ComparisonSpec:
    base = dict(
        task="arith",
        arms=tuple(parse_arms("sao,grpo+dis,ppo:vapo")),
        seeds=(0, 1),
        budget=("trajectories", 1280),
        eval=EvalPlan(("arith",), every=20, k=4, limit=100, seed=7),
        shared={"mode": "sync", "trajectories_per_step": 64},
    )
    return ComparisonSpec(**{**base, **kw})


def test_arms_from_a_list_with_presets_and_the_paper_alias():
    arms = parse_arms("sao, grpo+dis ,ppo:vapo")
    assert [(a.name, a.algo, a.preset, a.slug) for a in arms] == [
        ("sao", "sao", None, "sao"),
        ("grpo+dis", "grpo", "dis", "grpo+dis"),
        ("ppo:vapo", "ppo", "vapo", "ppo_vapo"),
    ]
    with pytest.raises(ExperimentError, match="names the arm 'sao' twice"):
        parse_arms("sao,sao")


def test_arms_from_a_toml_file(tmp_path):
    path = tmp_path / "arms.toml"
    path.write_text(
        '[arms.sao-k1]\nalgo = "sao"\npreset = "single-critic-update"\nalgo_args = { eps_high = 4.0 }\n'
        '[arms.grpo]\nalgo = "grpo"\nset = { policy_lr = 5e-5 }\n'
    )
    arms = parse_arms(str(path))
    assert arms[0] == Arm("sao-k1", "sao", "single-critic-update", {"eps_high": 4.0}, {})
    assert arms[1].config_layer() == {"algo": "grpo", "policy_lr": 5e-5}
    path.write_text('[arms.x]\npreset = "dis"\n')
    with pytest.raises(ExperimentError, match="arm 'x' needs 'algo'"):
        parse_arms(str(path))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("trajectories=1280", ("trajectories", 1280)),
        ("tokens=5e5", ("tokens", 500000)),
        ("minutes=2.5", ("minutes", 2.5)),
        ("flops=1e15", ("flops", 10**15)),
        # read exactly: through a float, 3.217e16 and 12345678901234567 would not stay whole numbers
        ("flops=3.217e16", ("flops", 32_170_000_000_000_000)),
        ("flops=12345678901234567", ("flops", 12_345_678_901_234_567)),
    ],
)
def test_budgets(text, expected):
    assert parse_budget(text) == expected
    assert type(parse_budget(text).amount) is type(expected[1])


@pytest.mark.parametrize(
    "text",
    [
        "steps=10",
        "trajectories",
        "trajectories=-1",
        "tokens=1.5",
        "minutes=nan",
        "x=1",
        "flops=1.5e0",
        "flops=inf",
        "tokens=1e16",  # above 2**53: not every whole number is a float there
        "flops=1e31",  # above the FLOPs bound (FLOPs budgets are ints, exact above 2**53)
    ],
)
def test_bad_budgets_name_the_valid_kinds_or_the_problem(text):
    with pytest.raises(ExperimentError, match="--budget"):
        parse_budget(text)


def test_every_arm_gets_the_same_shared_settings_budget_and_evaluation():
    spec = _spec()
    configs = [build_config(*spec.config_layers(arm, 1)) for arm in spec.arms]
    for c in configs:
        assert (c.task, c.seed, c.mode, c.trajectories_per_step) == ("arith", 1, "sync", 64)
        assert (c.max_trajectories, c.steps) == (1280, None)  # the budget stops it, no step limit
        assert (c.eval_every, c.eval_bench, c.eval_k, c.eval_limit, c.eval_seed) == (20, "arith", 4, 100, 7)
    assert [(c.algo, c.algo_preset) for c in configs] == [("sao", None), ("grpo", "dis"), ("ppo", "vapo")]


def test_best_on_selection_keeps_every_evaluated_checkpoint():
    plan = EvalPlan(("arith",), every=10, k=4, select=parse_select("best-on=gsm8k", ("arith",), 10))
    config = build_config(*_spec(eval=plan).config_layers(_spec().arms[0], 0))
    assert (config.eval_bench, config.checkpoint_every, config.keep_checkpoints) == ("arith,gsm8k", 10, 0)
    with pytest.raises(ExperimentError, match="also a reported benchmark"):
        parse_select("best-on=arith", ("arith",), 10)
    with pytest.raises(ExperimentError, match="needs in-training evaluation"):
        parse_select("best-on=gsm8k", ("arith",), 0)


def test_the_spec_round_trips_and_another_comparison_is_refused(tmp_path):
    spec = _spec()
    assert ComparisonSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    assert spec.run_names() == [
        "sao-s0",
        "sao-s1",
        "grpo+dis-s0",
        "grpo+dis-s1",
        "ppo_vapo-s0",
        "ppo_vapo-s1",
    ]
    assert spec.arm_and_seed("ppo_vapo-s1") == (spec.arms[2], 1)
    save_spec(tmp_path, spec, {"command": "bench compare A", "study": "compare-a"})
    save_spec(tmp_path, spec, {"command": "bench compare A"})  # the same comparison: resumed
    other = _spec(budget=("trajectories", 2560))
    assert other.fingerprint() != spec.fingerprint()
    with pytest.raises(ExperimentError, match="holds a different comparison \\(bench compare A\\)"):
        save_spec(tmp_path, other, {})


def test_more_seeds_extend_a_saved_comparison_and_fewer_are_refused(tmp_path):
    spec = _spec()  # seeds 0, 1
    save_spec(tmp_path, spec, {"command": "bench compare A", "study": "compare-a", "created": "t0"})
    more = _spec(seeds=(0, 1, 2, 3))
    assert more.seeds_added_to(json.loads((tmp_path / "comparison.json").read_text())) == (2, 3)
    saved = save_spec(tmp_path, more, {"command": "bench compare B", "study": "compare-b", "created": "t1"})
    # the study (and so every run's trial) and the first command stay; the extension is recorded
    assert (saved["study"], saved["command"], saved["created"]) == ("compare-a", "bench compare A", "t0")
    assert saved["seeds"] == [0, 1, 2, 3] and saved["fingerprint"] == more.fingerprint()
    assert saved["extended"] == [{"seeds": [2, 3], "command": "bench compare B", "created": "t1"}]
    assert save_spec(tmp_path, more, {"study": "compare-c"})["study"] == "compare-a"  # resumed as extended
    with pytest.raises(ExperimentError, match="more seeds: give all of them"):
        save_spec(tmp_path, _spec(seeds=(4, 5)), {})  # new seeds without the saved ones: another comparison
    with pytest.raises(ExperimentError, match="holds a different comparison"):
        save_spec(tmp_path, _spec(seeds=(0, 1)), {})  # fewer seeds than it has
    with pytest.raises(ExperimentError, match="holds a different comparison"):
        save_spec(tmp_path, _spec(seeds=(0, 1, 2, 3, 4), budget=("trajectories", 2560)), {})  # and more


def test_workers_get_disjoint_cores_and_gpus(monkeypatch):
    from sweeps import launch

    monkeypatch.setattr(launch.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert launch.core_sets(2) == [[0, 1], [2, 3]]
    assert launch.core_sets(8) == [None] * 8  # more workers than cores: they share
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    # each run gets the GPUs it asks for (one; issue 35 changed this from "an equal share")
    assert launch.gpu_sets(4) == ["4", "5", "6", "7"] and launch.gpu_sets(2) == ["4", "5"]
    assert launch.gpu_sets(2, gpus_per_run=2) == ["4,5", "6,7"]
    with pytest.raises(ExperimentError, match="--workers 5: each run needs 1 GPU.* 4 are visible"):
        launch.gpu_sets(5)  # more workers than GPUs: refused, not stacked on one GPU
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert launch.gpu_sets(3) == [None] * 3  # no GPU: nothing to assign


@pytest.mark.parametrize("cls", [ComparisonSpec, SweepSpec])
def test_spec_files_of_the_previous_layout_load_with_their_fingerprints(cls, tmp_path):
    saved = json.loads(LEGACY.read_text())[cls.SPEC_FILE]
    (tmp_path / cls.SPEC_FILE).write_text(json.dumps(saved))
    spec, data = load_spec(tmp_path, cls)
    assert spec.fingerprint() == saved["fingerprint"]
    assert json.loads(json.dumps(spec.to_json())) == {k: v for k, v in saved.items() if k != "fingerprint"}
    assert save_spec(tmp_path, spec, {}) == data  # the same experiment: resumed, not refused


def test_a_budget_layer_names_its_field_from_the_budget_table():
    assert parse_budget("minutes=2.5").layer() == {"max_minutes": 2.5, "steps": None}
    assert parse_budget("tokens=5e5").layer() == {"max_tokens": 500000, "steps": None}
    assert parse_budget("flops=2e15").layer() == {"max_flops": 2 * 10**15, "steps": None}


def test_policy_updates_per_batch_are_shared_by_every_arm(tmp_path):
    path = tmp_path / "arms.toml"
    path.write_text('[arms.a]\nalgo = "grpo"\nset = { minibatches = 4 }\n')
    with pytest.raises(
        ExperimentError, match="minibatches .policy updates per batch. is shared by every arm"
    ):
        parse_arms(str(path))
    from sweeps.comparison import ComparisonSpec

    spec = ComparisonSpec(arms=(Arm("grpo", "grpo"),), budget=("trajectories", 64))
    assert spec.updates_per_batch() == 1
    assert dataclasses.replace(spec, shared={"minibatches": 4}).updates_per_batch() == 4


def test_the_largest_budget_of_each_kind():
    from results.budgets import MAX_AMOUNT, MAX_FLOPS, check_amount

    assert check_amount("x", MAX_AMOUNT, "tokens") is None
    assert "2**53" in check_amount("x", MAX_AMOUNT + 2, "tokens")
    assert check_amount("x", 3.2e16, "flops") is None and check_amount("x", MAX_FLOPS, "flops") is None
    assert "1e30" in check_amount("x", 10 * MAX_FLOPS, "flops")
    assert "finite" in check_amount("x", float("nan"), "flops")
