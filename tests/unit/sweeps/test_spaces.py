"""Search spaces: every built-in algorithm's space names real config keys and its extremes and
paper defaults build valid run configs; overrides from a file or a plugin; the pruners prune."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import optuna
import pytest

from bench.config import build_config, make_algorithm
from sweeps.spaces import (
    Fixed,
    Param,
    SpaceError,
    as_layer,
    load_space_file,
    paper_defaults,
    param_from_table,
    space_for,
)
from sweeps.spec import Arm

TINY = {"policy_lr": 1e-4, "critic_lr": 1e-3}


def _space(algo: str, preset=None, overrides=None):
    base = {"algo": algo, "task": "arith", **({"algo_preset": preset} if preset else {})}
    algorithm = make_algorithm(build_config(base))
    config = dataclasses.asdict(algorithm.config)
    params, fixed = space_for(type(algorithm), config, TINY, overrides)
    return base, config, params, fixed


@pytest.mark.parametrize(
    "algo, preset",
    [
        ("sao", None),
        ("grpo", None),
        ("grpo", "dis"),
        ("dapo", None),
        ("ppo", None),
        ("ppo", "vapo"),
        ("rloo", None),
        ("running-mean", None),
    ],
)
def test_every_space_builds_valid_configs_at_its_extremes_and_defaults(algo, preset):
    base, config, params, _ = _space(algo, preset)
    assert params and params[0].name == "policy_lr" and params[0].low == pytest.approx(1e-5)
    for pick in (
        lambda p: p.low if p.kind != "categorical" else p.choices[0],
        lambda p: p.high if p.kind != "categorical" else p.choices[-1],
    ):
        values = {p.name: (int(pick(p)) if p.kind == "int" else pick(p)) for p in params}
        build_config(base, {"trajectories_per_step": 64}, as_layer(values))
    defaults = paper_defaults(params, config, TINY)
    build_config(base, as_layer(defaults))
    assert defaults["policy_lr"] == 1e-4


def test_the_first_trial_is_the_paper_s_defaults():
    _, config, params, _ = _space("sao")
    assert paper_defaults(params, config, TINY) == {
        "policy_lr": 1e-4,
        "algo.dis_eps_low": 0.3,
        "algo.dis_eps_high": 5.0,
        "algo.critic_updates_per_step": 2,
        "critic_lr": 1e-3,
        "algo.critic_warmup_steps": 10,
        "algo.alpha": 1.5,
    }
    _, config, params, _ = _space("grpo", "dis")  # the DIS preset searches the DIS band
    assert {"algo.dis_eps_low", "algo.dis_eps_high"} <= {p.name for p in params}


@pytest.mark.parametrize("preset", ["single-critic-update", "full-parameter-critic", "dis-only"])
def test_an_ablation_preset_keeps_the_critic_updates_that_define_it(preset):
    _, config, params, _ = _space("sao", preset)
    assert "algo.critic_updates_per_step" not in {p.name for p in params}  # tuning must not undo the ablation
    assert {"policy_lr", "algo.dis_eps_low", "critic_lr"} <= {p.name for p in params}


def test_a_space_file_replaces_adds_and_fixes_parameters(tmp_path):
    path = tmp_path / "space.toml"
    path.write_text(
        '[params."algo.dis_eps_high"]\ntype = "float"\nlow = 2.0\nhigh = 3.0\n'
        "[params.policy_lr]\nfixed = 5e-5\n"
        '[params.minibatches]\ntype = "categorical"\nchoices = [1, 2]\n'
    )
    overrides = load_space_file(path)
    assert overrides["policy_lr"] == Fixed(5e-5)
    _, _, params, fixed = _space("sao", overrides=overrides)
    by_name = {p.name: p for p in params}
    assert "policy_lr" not in by_name and fixed == {"policy_lr": 5e-5}
    assert (by_name["algo.dis_eps_high"].low, by_name["algo.dis_eps_high"].high) == (2.0, 3.0)
    assert by_name["minibatches"].choices == (1, 2)


@pytest.mark.parametrize(
    "algo, field",
    [("sao", "algo.dis_eps_high"), ("grpo", "algo.clip_eps_high"), ("dapo", "algo.clip_eps_high")],
)
def test_a_space_file_with_an_old_field_name_replaces_the_current_field(tmp_path, algo, field):
    from algorithms.deprecation import DeprecatedFormWarning, forget_warnings

    path = tmp_path / "space.toml"
    path.write_text(
        '[params."algo.eps_high"]\ntype = "float"\nlow = 0.25\nhigh = 0.3\n[params."algo.eps_low"]\nfixed = 0.1\n'
    )
    forget_warnings()
    with pytest.warns(DeprecatedFormWarning, match=rf"{algo}: algo.eps_high is now {field}") as caught:
        _, _, params, fixed = _space(algo, overrides=load_space_file(path))
    names = [p.name for p in params]
    assert names.count(field) == 1 and "algo.eps_high" not in names  # replaced, not added beside it
    assert {(p.low, p.high) for p in params if p.name == field} == {(0.25, 0.3)}
    assert fixed == {field.replace("high", "low"): 0.1}
    assert len([w for w in caught if issubclass(w.category, DeprecatedFormWarning)]) == 2  # one per old name


def test_bench_sweep_accepts_a_space_file_swept_with_old_names():
    from algorithms.deprecation import DeprecatedFormWarning, forget_warnings
    from bench.commands.sweep import resolve_spaces
    from sweeps.sweep import SweepSpec

    space = {"algo.eps_high": {"type": "float", "low": 2.0, "high": 3.0}}
    spec = SweepSpec(
        task="arith",
        arms=(Arm("sao", "sao"),),
        trials=2,
        objective="reward/final",
        direction="maximize",
        budget=("trajectories", 64),
        seeds=(0,),
    )
    forget_warnings()
    with pytest.warns(DeprecatedFormWarning, match="sao: algo.eps_high is now algo.dis_eps_high"):
        _, firsts = resolve_spaces(dataclasses.replace(spec, space=space), TINY)
    assert firsts["sao"]["algo.dis_eps_high"] == 3.0  # the paper's 5.0, clipped into the file's range


@pytest.mark.parametrize(
    "table, message",
    [
        ({"type": "gauss", "low": 0, "high": 1}, "type 'gauss'; valid types: float, int, categorical"),
        ({"type": "float", "low": 2, "high": 1}, "needs numbers low < high"),
        ({"type": "float", "low": 0.0, "high": 1, "log": True}, "a log scale needs low > 0"),
        ({"type": "categorical", "choices": []}, "needs a non-empty 'choices' list"),
    ],
)
def test_bad_distributions_are_one_line_errors(table, message):
    with pytest.raises(SpaceError, match=message.replace("(", r"\(").replace(")", r"\)")):
        param_from_table("x", table)


def test_a_plugin_brings_its_own_space():
    class Plugin:
        name = "mine"
        search_space = {"algo.temperature": {"type": "float", "low": 0.5, "high": 2.0}}

    params, _ = space_for(Plugin, {}, TINY)
    assert params == [Param("algo.temperature", "float", 0.5, 2.0)]


def test_grid_values():
    assert Param("x", "float", 1e-5, 1e-3, log=True).grid() == pytest.approx([1e-5, 1e-4, 1e-3])
    assert Param("k", "int", 1, 3).grid() == [1, 2, 3]


def _trial_run(study, seeds=(0,), pruner="wilcoxon"):
    from sweeps.sweep import SweepSpec
    from sweeps.trials import TrialRun

    spec = SweepSpec(
        task="arith",
        arms=(Arm("grpo", "grpo"),),
        trials=5,
        objective="eval/arith-val/avg_at_k",
        direction="maximize",
        budget=("trajectories", 64),
        seeds=seeds,
        pruner=pruner,
        eval_every=1,
    )
    trial = study.ask()
    return trial, TrialRun(Path("/nonexistent"), spec, spec.arms[0], trial, None, {}, None)


def test_the_wilcoxon_pruner_prunes_a_trial_worse_on_most_problems():
    from sweeps.trials import Pruned

    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.WilcoxonPruner(p_threshold=0.1))
    good = [0.9 if i % 4 else 0.6 for i in range(40)]
    for _ in range(2):
        trial, run = _trial_run(study)
        run._report_problems(0, good)
        study.tell(trial, sum(good) / len(good))
    trial, run = _trial_run(study)
    with pytest.raises(Pruned, match="Wilcoxon"):
        run._report_problems(0, [s - 0.4 for s in good])
    trial, run = _trial_run(study)
    run._report_problems(0, good)  # as good as the best: not pruned


# The curves of a 20-trial SAO sweep on arith (eval every 50 of 200 steps: 4 reports): four
# healthy trials, then collapsed ones (policy LR 5e-4 and 7e-4), which ran to the end.
HEALTHY = [
    [0.535, 0.605, 0.618, 0.645],
    [0.522, 0.61, 0.608, 0.657],
    [0.497, 0.5, 0.55, 0.477],
    [0.522, 0.593, 0.667, 0.642],
    [0.527, 0.62, 0.627, 0.69],
    [0.557, 0.615, 0.65, 0.66],
]
COLLAPSED = [[0.045, 0.0, 0.0, 0.0], [0.09, 0.043, 0.0, 0.022], [0.06, 0.01, 0.0, 0.0]]


def _report(tmp_path, study, curve, key="eval/arith-val/avg_at_k"):
    """Feed `curve` (one value per report) through a TrialRun; the reports made before it ended."""
    from results.rundir import RunDir
    from sweeps.trials import Pruned

    trial, run = _trial_run(study, pruner="hyperband")
    run_dir = RunDir.create(tmp_path / f"run{trial.number}", {}, {})
    for i, value in enumerate(curve):
        run_dir.append_metrics({"step": 50 * (i + 1), key: value})
    try:
        run._report_curve(run_dir, 0)
    except Pruned:
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        return run.reports
    study.tell(trial, curve[-1])
    return run.reports


def test_the_hyperband_pruner_cuts_collapsed_curves_at_a_rung(tmp_path):
    from sweeps.search import make_pruner

    study = optuna.create_study(
        study_name="sao-arith", direction="maximize", pruner=make_pruner("hyperband", 4)
    )
    assert [_report(tmp_path, study, c) for c in HEALTHY] == [4] * len(HEALTHY)
    # in every bracket (a max resource above the real report count put some brackets' first rung past the
    # end, and their trials ran to it: the sweep's bug)
    assert [_report(tmp_path, study, c) for c in COLLAPSED * 3] == [3] * 3 * len(
        COLLAPSED
    )  # the rung at report 3
    rising = [0.3, 0.45, 0.6, 0.7]  # low at first but still rising: never cut
    assert _report(tmp_path, study, rising) == 4


def test_the_hyperband_resource_is_the_trials_report_count():
    from sweeps.search import expected_reports
    from sweeps.sweep import FINAL_REWARD, SweepSpec

    def spec(budget, objective="eval/arith-val/avg_at_k", seeds=(0,), every=25):
        return SweepSpec(
            task="arith",
            arms=(Arm("sao", "sao"),),
            trials=20,
            objective=objective,
            direction="maximize",
            budget=budget,
            seeds=seeds,
            pruner="hyperband",
            eval_every=every,
        )

    assert expected_reports(spec(("trajectories", 12800)), 64) == 8  # 200 steps, every 25
    assert (
        expected_reports(spec(("trajectories", 12800), seeds=(0, 1)), 64) == 16
    )  # reports run on across seeds
    assert expected_reports(spec(("trajectories", 12800), FINAL_REWARD, every=0), 64) == 20  # every 10 steps
    assert expected_reports(spec(("minutes", 10)), 64) is None  # unknown: Optuna's "auto"


def test_group_sizes_are_only_those_dividing_the_trajectories_per_step():
    _, config, _, _ = _space("grpo")
    algorithm = make_algorithm(build_config({"algo": "grpo", "task": "arith"}))
    params, _ = space_for(type(algorithm), config, {**TINY, "trajectories_per_step": 8})
    assert next(p for p in params if p.name == "algo.group_size").choices == (4, 8)


def test_a_fill_cut_short_is_completed_by_the_next_start():
    """A sweep killed while it enqueued its slots (or whose journal lost its last records)
    gets the missing slots when started again, and never a slot twice."""
    from sweeps.search import fill_study

    study = optuna.create_study()
    fill_study(study, 2, {"x": 1.0})
    fill_study(study, 4, {"x": 1.0})
    fill_study(study, 4, {"x": 1.0})
    trials = study.get_trials(deepcopy=False)
    assert [t.user_attrs["run"] for t in trials] == [f"trial-{i:03d}" for i in range(4)]
    assert [t.system_attrs.get("fixed_params") for t in trials] == [{"x": 1.0}, {}, {}, {}]


def _sweep(arms, shared=None, space=None):
    from sweeps.sweep import SweepSpec

    return SweepSpec(
        task="arith",
        arms=tuple(arms),
        trials=2,
        objective="reward/final",
        direction="maximize",
        budget=("trajectories", 64),
        seeds=(0,),
        shared=shared or {},
        space=space or {},
    )


def test_a_parameter_that_cannot_act_is_not_searched():
    # one policy update per batch: the ratio to the old policy is 1, the PPO clip never binds;
    # which fields cannot act is the algorithm's word (`inactive_fields`), not a list here
    from bench.commands.sweep import resolve_spaces

    arms = [Arm("grpo", "grpo"), Arm("dapo", "dapo"), Arm("ppo", "ppo"), Arm("ppo:vapo", "ppo", "vapo")]
    arms.append(Arm("grpo+dis", "grpo", "dis"))
    one, _ = resolve_spaces(_sweep(arms), TINY)
    names = {arm: {p.name for p in space.params} for arm, space in one.items()}
    assert not {"algo.clip_eps_low", "algo.clip_eps_high"} & set().union(*names.values())
    assert "algo.alpha" not in names["ppo"] and "algo.alpha" in names["ppo:vapo"]
    assert {"algo.dis_eps_low", "algo.dis_eps_high"} <= names["grpo+dis"]
    four, _ = resolve_spaces(_sweep(arms, {"minibatches": 4}), TINY)
    for arm in ("grpo", "dapo", "ppo"):
        assert {"algo.clip_eps_low", "algo.clip_eps_high"} <= {p.name for p in four[arm].params}
    clip = {"algo.clip_eps_high": {"type": "float", "low": 0.2, "high": 0.3}}
    with pytest.raises(SpaceError, match="algo.clip_eps_high: cannot act for grpo here: it acts only with"):
        resolve_spaces(_sweep([Arm("grpo", "grpo")], space=clip), TINY)
    resolve_spaces(_sweep([Arm("grpo", "grpo")], {"minibatches": 2}, clip), TINY)
