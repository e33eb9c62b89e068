"""`bench compare --params-from-sweep`'s arms from one or several sweep directories: each arm
takes its study's best completed trial; sweeps tuned differently (trials, budget, seeds,
objective, ...) or naming one arm twice are refused in one line, since a fair comparison
gives every arm the same search."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from sweeps.errors import ExperimentError
from sweeps.queue import open_storage
from sweeps.show import best_arms
from sweeps.spec import Arm, save_spec
from sweeps.sweep import SweepSpec


def _sweep(
    out: Path, arms: list[Arm], values: dict[str, list[float]], trials: int = 20, budget: float = 12800
) -> Path:
    """A sweep directory whose studies hold completed trials with these policy_lr -> values."""
    spec = SweepSpec(
        task="arith",
        arms=tuple(arms),
        trials=trials,
        objective="eval/arith-val/avg_at_k",
        direction="maximize",
        budget=("trajectories", budget),
        seeds=(0,),
        eval_k=2,
        eval_limit=200,
        eval_every=25,
        pruner="hyperband",
    )
    save_spec(out, spec, {"storage": ""})
    storage = open_storage("", out / "study.journal")
    lr = optuna.distributions.FloatDistribution(1e-6, 1e-2, log=True)
    for arm in arms:
        study = optuna.create_study(study_name=spec.study_name(arm), storage=storage, direction="maximize")
        for i, value in enumerate(values.get(arm.name, [])):
            study.add_trial(
                optuna.trial.create_trial(
                    params={"policy_lr": 1e-4 * (i + 1), "algo.eps_high": 0.2},
                    distributions={
                        "policy_lr": lr,
                        "algo.eps_high": optuna.distributions.FloatDistribution(0.1, 0.4),
                    },
                    value=value,
                )
            )
    return out


def test_arms_of_two_sweeps_take_their_best_trials_under_current_names(tmp_path):
    # the studies name the band `algo.eps_high`, as sweeps stored before plugin API 2 did: sao's DIS
    # band and grpo's PPO clip; the arms carry the current names (changed with the rename)
    from algorithms.deprecation import DeprecatedFormWarning, forget_warnings

    forget_warnings()
    first = _sweep(tmp_path / "sao", [Arm("sao", "sao")], {"sao": [0.60, 0.67, 0.62]})
    second = _sweep(
        tmp_path / "rest",
        [Arm("grpo", "grpo"), Arm("sao:dis-only", "sao", "dis-only")],
        {"grpo": [0.55, 0.50], "sao:dis-only": [0.58, 0.59, 0.64]},
    )
    with pytest.warns(DeprecatedFormWarning) as caught:
        arms, tuning = best_arms([first, second])
    assert sorted(str(w.message).split(";")[0] for w in caught) == [
        "grpo: algo.eps_high is now algo.clip_eps_high",
        "sao: algo.eps_high is now algo.dis_eps_high",
    ]
    by_name = {a.name: a for a in arms}
    assert list(by_name) == ["sao", "grpo", "sao:dis-only"]
    assert by_name["sao"].run_args["policy_lr"] == pytest.approx(2e-4)  # trial 1, 0.67
    assert by_name["grpo"].run_args["policy_lr"] == pytest.approx(1e-4)
    assert by_name["sao:dis-only"].preset == "dis-only" and by_name["sao:dis-only"].algo_args == {
        "dis_eps_high": 0.2
    }
    assert by_name["grpo"].algo_args == {"clip_eps_high": 0.2}
    # issue 36: at one policy update per batch grpo's clip cannot act: the arm keeps the trial's value,
    # the tuning record shows only what could act
    assert tuning["best"]["grpo"]["params"] == {"policy_lr": pytest.approx(1e-4)}
    assert tuning["best"]["grpo"]["not_acting"] == ["algo.clip_eps_high"]
    assert tuning["best"]["sao:dis-only"]["params"]["algo.dis_eps_high"] == 0.2
    assert tuning["best"]["sao:dis-only"]["trial"] == 2 and tuning["best"]["sao"]["value"] == pytest.approx(
        0.67
    )
    assert tuning["trials_per_arm"] == 20 and tuning["seeds"] == [0] and tuning["task"] == "arith"
    assert tuning["sweep"] == f"{first}, {second}"


def test_sweeps_tuned_with_different_budgets_or_trials_are_refused(tmp_path):
    first = _sweep(tmp_path / "a", [Arm("sao", "sao")], {"sao": [0.6]})
    fewer = _sweep(tmp_path / "b", [Arm("grpo", "grpo")], {"grpo": [0.5]}, trials=10)
    with pytest.raises(
        ExperimentError, match=r"differ in trials \(20 vs 10\); every arm needs the same tuning"
    ):
        best_arms([first, fewer])
    cheaper = _sweep(tmp_path / "c", [Arm("grpo", "grpo")], {"grpo": [0.5]}, budget=6400)
    with pytest.raises(ExperimentError, match="differ in budget"):
        best_arms([first, cheaper])


def test_an_arm_in_two_sweeps_or_without_a_completed_trial_is_refused(tmp_path):
    first = _sweep(tmp_path / "a", [Arm("sao", "sao")], {"sao": [0.6]})
    again = _sweep(tmp_path / "b", [Arm("sao", "sao")], {"sao": [0.7]})
    with pytest.raises(ExperimentError, match="arm sao is in more than one sweep"):
        best_arms([first, again])
    empty = _sweep(tmp_path / "c", [Arm("grpo", "grpo")], {})
    with pytest.raises(ExperimentError, match="grpo has no completed trial yet"):
        best_arms([first, empty])
