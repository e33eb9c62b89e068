"""One name per concept: `dis_eps_*` is the DIS band and `clip_eps_*` the PPO clip in every
built-in; the paper's bands live in one place; old names are read through each algorithm's
`renamed_fields` with one warning per (algorithm, old name)."""

from __future__ import annotations

import dataclasses
import textwrap
import warnings
from pathlib import Path

import pytest

from algorithms import registry
from algorithms.deprecation import DeprecatedFormWarning, forget_warnings
from algorithms.objectives import DIS_BAND_CODING, DIS_BAND_MATH
from algorithms.renames import check_renamed_fields, current_key, current_record, split_algo_args

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "plugins"
DIS = {"sao", "running-mean"}  # the band is their only ratio knob
CLIP = {"dapo", "ppo", "dr-grpo", "gspo", "rloo"}


@pytest.fixture(autouse=True)
def fresh():
    registry.reset()
    forget_warnings()
    yield
    registry.reset()
    forget_warnings()


def _fields(name: str) -> set[str]:
    return {f.name for f in dataclasses.fields(registry.get(name).Config)}


def test_one_name_per_concept_in_every_builtin():
    for name in registry.BUILTINS:
        fields = _fields(name)
        assert not fields & {"eps_low", "eps_high", "critic_lr"}, name
        assert check_renamed_fields(registry.get(name)) == [], name
        expected = {"dis_eps_low", "dis_eps_high"} if name in DIS else set()
        expected |= {"clip_eps_low", "clip_eps_high"} if name in CLIP else set()
        if name == "grpo":  # PPO clip by default, the DIS band with importance="dis"
            expected = {"dis_eps_low", "dis_eps_high", "clip_eps_low", "clip_eps_high"}
        assert {f for f in fields if "eps_" in f} == expected, name


def test_the_papers_bands_are_one_constant_each():
    assert (DIS_BAND_MATH, DIS_BAND_CODING) == ((0.3, 5.0), (0.8, 3.0))
    sao, grpo, rm = registry.get("sao"), registry.get("grpo"), registry.get("running-mean")
    for cls in (sao, grpo, rm):
        c = cls.Config()
        assert (c.dis_eps_low, c.dis_eps_high) == DIS_BAND_MATH, cls.name
    assert sao.presets["math"] == DIS_BAND_MATH.fields() == {"dis_eps_low": 0.3, "dis_eps_high": 5.0}
    assert sao.presets["coding"] == DIS_BAND_CODING.fields()
    coding = grpo.make_config("dis-coding")
    assert (coding.importance, coding.dis_eps_low, coding.dis_eps_high) == ("dis", 0.8, 3.0)


def test_an_old_name_means_what_it_meant_in_each_algorithm_and_warns_once():
    sao, grpo, ppo = registry.get("sao"), registry.get("grpo"), registry.get("ppo")
    with pytest.warns(DeprecatedFormWarning) as caught:
        assert current_key(sao, "algo.eps_high") == "algo.dis_eps_high"  # sao: the DIS band
        assert current_key(sao, "algo.eps_high") == "algo.dis_eps_high"  # again: no second warning
        assert current_key(grpo, "algo.eps_high") == "algo.clip_eps_high"  # grpo: the PPO clip
        assert current_key(ppo, "algo.critic_lr") == "critic_lr"  # moved to the run config
    assert [str(w.message).split(";")[0] for w in caught] == [
        "sao: algo.eps_high is now algo.dis_eps_high",
        "grpo: algo.eps_high is now algo.clip_eps_high",
        "ppo: algo.critic_lr is now the run field critic_lr",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # current names and run fields pass through silently
        assert current_key(grpo, "algo.dis_eps_high") == "algo.dis_eps_high"
        assert current_key(sao, "policy_lr") == "policy_lr"


def test_split_algo_args_moves_fields_and_refuses_two_names_of_one_field():
    sao = registry.get("sao")
    with pytest.warns(DeprecatedFormWarning):
        assert split_algo_args(sao, {"eps_low": 0.2, "alpha": 2.0, "critic_lr": 0.5}) == (
            {"dis_eps_low": 0.2, "alpha": 2.0},
            {"critic_lr": 0.5},
        )
        with pytest.raises(
            ValueError, match="algo.eps_high and algo.dis_eps_high are two names of one field"
        ):
            split_algo_args(sao, {"dis_eps_high": 4.0, "eps_high": 3.0})


def test_a_recorded_config_reads_under_current_names_without_moved_fields():
    recorded = {"eps_low": 0.3, "eps_high": 5.0, "critic_lr": 5e-6, "alpha": 1.5}
    with pytest.warns(DeprecatedFormWarning):
        now = current_record(registry.get("sao"), recorded)
    assert now == {"dis_eps_low": 0.3, "dis_eps_high": 5.0, "alpha": 1.5}


def test_a_plugin_with_an_unsound_rename_table_is_refused(tmp_path, monkeypatch):
    (tmp_path / "bad_renames.py").write_text(
        textwrap.dedent("""
        from reinforce_plugin import Reinforce

        class BadRenames(Reinforce):
            name = "bad-renames"
            renamed_fields = {"algo.baseline": "algo.base", "algo.old": "algo.nosuch"}
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(EXAMPLES))
    with pytest.raises(registry.RegistryError) as err:
        registry.load_plugin_module("bad_renames")
    message = str(err.value)
    assert "'algo.baseline' must be 'algo.OLD' naming no current field" in message
    assert "'algo.old' -> 'algo.nosuch' names no field of bad-renames's Config" in message
