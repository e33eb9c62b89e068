"""Search spaces: every built-in algorithm's space names real config keys and its extremes and
paper defaults build valid run configs; overrides from a file or a plugin; the pruners prune."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import optuna
import pytest

from bench.config import build_config, make_algorithm
from sweeps.grid import Arm
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

TINY = {"policy_lr": 1e-4, "critic_lr": 1e-3}


def _space(algo: str, preset=None, overrides=None):
    base = {"algo": algo, "task": "arith", **({"algo_preset": preset} if preset else {})}
    algorithm = make_algorithm(build_config(base))
    config = dataclasses.asdict(algorithm.config)
    params, fixed = space_for(type(algorithm), config, TINY, overrides)
    return base, config, params, fixed


@pytest.mark.parametrize("algo, preset", [("sao", None), ("grpo", None), ("grpo", "dis"), ("dapo", None), ("ppo", None),
                                          ("ppo", "vapo"), ("rloo", None), ("running-mean", None)])  # fmt: skip
def test_every_space_builds_valid_configs_at_its_extremes_and_defaults(algo, preset):
    base, config, params, _ = _space(algo, preset)
    assert params and params[0].name == "policy_lr" and params[0].low == pytest.approx(1e-5)
    for pick in (lambda p: p.low if p.kind != "categorical" else p.choices[0],
                 lambda p: p.high if p.kind != "categorical" else p.choices[-1]):  # fmt: skip
        values = {p.name: (int(pick(p)) if p.kind == "int" else pick(p)) for p in params}
        build_config(base, {"trajectories_per_step": 64}, as_layer(values))
    defaults = paper_defaults(params, config, TINY)
    build_config(base, as_layer(defaults))
    assert defaults["policy_lr"] == 1e-4


def test_the_first_trial_is_the_paper_s_defaults():
    _, config, params, _ = _space("sao")
    assert paper_defaults(params, config, TINY) == {
        "policy_lr": 1e-4, "algo.eps_low": 0.3, "algo.eps_high": 5.0, "algo.critic_updates_per_step": 2,
        "critic_lr": 1e-3, "algo.critic_warmup_steps": 10, "algo.alpha": 1.5,
    }  # fmt: skip
    _, config, params, _ = _space("grpo", "dis")  # the DIS preset searches the DIS band
    assert {"algo.dis_eps_low", "algo.dis_eps_high"} <= {p.name for p in params}


def test_a_space_file_replaces_adds_and_fixes_parameters(tmp_path):
    path = tmp_path / "space.toml"
    path.write_text('[params."algo.eps_high"]\ntype = "float"\nlow = 2.0\nhigh = 3.0\n'
                    '[params.policy_lr]\nfixed = 5e-5\n'
                    '[params.minibatches]\ntype = "categorical"\nchoices = [1, 2]\n')  # fmt: skip
    overrides = load_space_file(path)
    assert overrides["policy_lr"] == Fixed(5e-5)
    _, _, params, fixed = _space("sao", overrides=overrides)
    by_name = {p.name: p for p in params}
    assert "policy_lr" not in by_name and fixed == {"policy_lr": 5e-5}
    assert (by_name["algo.eps_high"].low, by_name["algo.eps_high"].high) == (2.0, 3.0)
    assert by_name["minibatches"].choices == (1, 2)


@pytest.mark.parametrize("table, message", [
    ({"type": "gauss", "low": 0, "high": 1}, "type 'gauss'; valid types: float, int, categorical"),
    ({"type": "float", "low": 2, "high": 1}, "needs numbers low < high"),
    ({"type": "float", "low": 0.0, "high": 1, "log": True}, "a log scale needs low > 0"),
    ({"type": "categorical", "choices": []}, "needs a non-empty 'choices' list"),
])  # fmt: skip
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
    from sweeps.study import SweepSpec
    from sweeps.trials import TrialRun

    spec = SweepSpec("arith", (Arm("grpo", "grpo"),), 5, "eval/arith-val/avg_at_k", "maximize", ("trajectories", 64),
                     seeds, pruner=pruner, eval_every=1)  # fmt: skip
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


def test_the_hyperband_pruner_prunes_a_poor_curve(tmp_path):
    from results.rundir import RunDir
    from sweeps.study import make_pruner
    from sweeps.trials import Pruned

    study = optuna.create_study(direction="maximize", pruner=make_pruner("hyperband", 10))
    run_dir = RunDir.create(tmp_path / "run", {}, {})

    def curve(score):
        for step in range(1, 11):
            run_dir.append_metrics({"step": step, "eval/arith-val/avg_at_k": score(step)})

    for _ in range(12):  # enough finished trials in every hyperband bracket
        trial, tr = _trial_run(study, pruner="hyperband")
        run_dir.metrics_path.write_text("")
        curve(lambda step: 0.9 * step / 10)  # rising: what the finished trials did
        tr._report_curve(run_dir, 0)
        study.tell(trial, 0.9)
    pruned = 0
    for _ in range(4):  # hyperband puts each trial in a bracket; the earliest brackets cut at the first rungs
        trial, tr = _trial_run(study, pruner="hyperband")
        run_dir.metrics_path.write_text("")
        curve(lambda step: 0.2 - 0.01 * step)  # low and falling (a collapse): patience runs out
        try:
            tr._report_curve(run_dir, 0)
            study.tell(trial, 0.1)
        except Pruned:
            pruned += 1
            assert tr.reports < 10  # stopped before the end of its curve
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    assert pruned >= 1


def test_group_sizes_are_only_those_dividing_the_trajectories_per_step():
    _, config, _, _ = _space("grpo")
    algorithm = make_algorithm(build_config({"algo": "grpo", "task": "arith"}))
    params, _ = space_for(type(algorithm), config, {**TINY, "trajectories_per_step": 8})
    assert next(p for p in params if p.name == "algo.group_size").choices == (4, 8)
