"""Old algorithm field names wherever algorithm fields come from: `--set algo.X`, `--config`
TOML and an older run's config.json, arms files, and `--resume` of an older run, each read
under the current names with one warning per (algorithm, old name); and `critic_lr`, one run
field, refused where no critic would use it."""

from __future__ import annotations

import json
import warnings

import pytest

from algorithms.deprecation import DeprecatedFormWarning, forget_warnings
from bench.config import build_config, make_algorithm
from bench.config_values import load_config_file, parse_set_options
from bench.errors import UsageError
from results.rundir import RunDir
from sweeps.comparison import ComparisonSpec, EvalPlan
from sweeps.spec import parse_arms

OLD_SAO_RECORD = {  # config.json's algo_config of a sao run before plugin API 2
    "eps_low": 0.3,
    "eps_high": 4.0,
    "detach_coefficient": True,
    "aggregation": "token-mean",
    "gamma": 1.0,
    "lambda_critic": 1.0,
    "alpha": 1.5,
    "normalize_advantages": False,
    "critic_updates_per_step": 2,
    "critic_warmup_steps": 10,
    "freeze_attention": True,
    "critic_lr": 5e-6,
    "advantage_granularity": "token",
}


@pytest.fixture(autouse=True)
def fresh_warnings():
    forget_warnings()
    yield
    forget_warnings()


def _messages(caught) -> list[str]:
    return [str(w.message).split(";")[0] for w in caught if issubclass(w.category, DeprecatedFormWarning)]


def test_set_reads_an_old_name_as_what_it_meant_for_each_algorithm_warning_once():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sao = build_config(parse_set_options(["algo.eps_high=4.0", "algo.eps_low=0.2"]))
        sao_again = build_config(parse_set_options(["algo.eps_high=4.5"]))
        grpo = build_config(parse_set_options(["algo=grpo", "algo.eps_high=0.28"]))
    assert sao.algo_args == {"dis_eps_high": 4.0, "dis_eps_low": 0.2}
    assert make_algorithm(sao).config.dis_eps_high == 4.0 and sao_again.algo_args == {"dis_eps_high": 4.5}
    assert grpo.algo_args == {"clip_eps_high": 0.28} and make_algorithm(grpo).config.clip_eps_high == 0.28
    assert _messages(caught) == [
        "sao: algo.eps_high is now algo.dis_eps_high",
        "sao: algo.eps_low is now algo.dis_eps_low",
        "grpo: algo.eps_high is now algo.clip_eps_high",
    ]


def test_the_algorithm_named_in_a_later_layer_decides_what_an_old_name_means():
    with pytest.warns(DeprecatedFormWarning, match="grpo: algo.eps_low is now algo.clip_eps_low"):
        config = build_config({"algo_args": {"eps_low": 0.1}}, {"algo": "grpo"})
    assert config.algo_args == {"clip_eps_low": 0.1}


def test_one_field_under_its_old_and_new_name_is_a_one_line_error():
    with (
        pytest.warns(DeprecatedFormWarning),
        pytest.raises(UsageError, match="two names of one field of sao"),
    ):
        build_config({"algo_args": {"eps_high": 4.0, "dis_eps_high": 3.0}})


def test_a_toml_config_file_with_old_names(tmp_path):
    path = tmp_path / "old.toml"
    path.write_text("[algo]\neps_high = 0.3\n")
    with pytest.warns(DeprecatedFormWarning, match="dapo: algo.eps_high is now algo.clip_eps_high"):
        config = build_config(*load_config_file(path), {"algo": "dapo"})  # as `--config old.toml --algo dapo`
    assert config.algo_args == {"clip_eps_high": 0.3}


def test_an_older_runs_config_json_repeats_its_settings(tmp_path):
    new = build_config({"algo_args": {"dis_eps_high": 4.0}}).to_dict()
    old = {**new, "algo_args": {"eps_high": 4.0}, "algo_config": OLD_SAO_RECORD}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(old))
    with pytest.warns(DeprecatedFormWarning):
        config = build_config(*load_config_file(path))
    assert config.to_dict() == new


def test_an_arms_file_with_old_names(tmp_path):
    path = tmp_path / "arms.toml"
    path.write_text(
        '[arms.sao-band]\nalgo = "sao"\nalgo_args = { eps_high = 4.0 }\n'
        '[arms.grpo-clip]\nalgo = "grpo"\nalgo_args = { eps_high = 0.28 }\n'
    )
    arms = parse_arms(str(path))
    spec = ComparisonSpec(
        task="arith", arms=tuple(arms), seeds=(0,), budget=("trajectories", 64), eval=EvalPlan(("arith",))
    )
    with pytest.warns(DeprecatedFormWarning):
        sao, grpo = (build_config(*spec.config_layers(arm, 0)) for arm in arms)
    assert sao.algo_args == {"dis_eps_high": 4.0} and grpo.algo_args == {"clip_eps_high": 0.28}


def test_critic_lr_is_one_run_field():
    with pytest.warns(DeprecatedFormWarning, match="sao: algo.critic_lr is now the run field critic_lr"):
        config = build_config(parse_set_options(["algo.critic_lr=0.5"]))
    assert config.critic_lr == 0.5 and config.algo_args == {}  # honoured, not recorded and ignored
    assert not hasattr(make_algorithm(config).config, "critic_lr")
    later = build_config({"algo_args": {"critic_lr": 0.5}}, {"critic_lr": 0.25})  # a later layer wins
    assert later.critic_lr == 0.25
    with pytest.raises(UsageError, match="critic_lr is given twice"):
        build_config({"critic_lr": 0.25, "algo_args": {"critic_lr": 0.5}})
    with pytest.raises(UsageError, match="critic_lr: grpo has no critic, so the run would not use it"):
        build_config({"algo": "grpo", "critic_lr": 1e-3})
    assert build_config({"algo": "ppo", "critic_lr": 1e-3}).critic_lr == 1e-3


def _old_run(path) -> dict:
    """A run directory as `bench run` wrote it before plugin API 2 (old names in config.json)."""
    new = build_config({"algo_args": {"dis_eps_high": 4.0}}).to_dict()
    old = {**new, "algo_args": {"eps_high": 4.0, "critic_lr": 2e-3}, "algo_config": OLD_SAO_RECORD}
    RunDir.create(path, old, {})
    return old


def test_resume_of_an_older_run_is_not_a_change_and_trains_what_it_recorded(tmp_path, capsys):
    from bench.train.start import resume_run

    old = _old_run(tmp_path / "run")
    with pytest.warns(DeprecatedFormWarning):
        run, parts, checkpoint = resume_run(tmp_path / "run")
    config = parts.config
    try:
        assert checkpoint is None and config.algo_args == {"dis_eps_high": 4.0} and config.critic_lr == 2e-3
        assert "differs from the one recorded" not in capsys.readouterr().out  # no note for a rename
        assert run.read_config() == old  # nothing changed, nothing rewritten
    finally:
        run.unlock()
    with pytest.raises(UsageError, match="algo_args would change"):
        resume_run(tmp_path / "run", {"algo_args": {"dis_eps_high": 3.0}})
