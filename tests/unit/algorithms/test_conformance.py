"""The plugin conformance check (`bench algos --check`) and the learner's checks of plugin outputs:
every built-in and the REINFORCE example conform; each kind of broken plugin gets one clear line
naming the plugin, the config and the method."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import pytest
import torch

from algorithms import registry
from algorithms.base import AdvantageResult, Algorithm, LossOutput, doc
from algorithms.conformance import check_algorithm, random_trajectories
from algorithms.objectives import select_tokens
from algorithms.outputs import PluginOutputError, check_advantage_result, check_loss_output

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "plugins"


@pytest.mark.parametrize("name", list(registry.BUILTINS))
def test_every_builtin_conforms(name):
    assert check_algorithm(registry.get(name), name) == []


def test_the_reinforce_example_conforms(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    module = importlib.import_module("reinforce_plugin")
    assert check_algorithm(module.Reinforce) == []


# ---- broken plugins: each gets its own line ------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Config:
    scale: float = doc("advantage scale", default=1.0)


class Good(Algorithm):
    """A conforming plugin the broken ones below each change in one place."""

    name = "good"
    summary = "reward as advantage"
    Config = Config

    def advantages(self, traj):
        return AdvantageResult((traj.rewards_B - 0.5)[:, None] * traj.action_mask_B_T * self.config.scale)

    def policy_loss(self, inp):
        logp_B_T, adv_B_T = select_tokens(inp.action_mask_B_T, inp.logp_B_T, inp.advantages_B_T)
        loss = -(adv_B_T * logp_B_T).sum() / inp.action_mask_B_T.sum()
        return LossOutput(loss, {"loss/policy": loss.item()})


class NoSelect(Good):
    def policy_loss(self, inp):
        loss = -(inp.advantages_B_T * inp.logp_B_T * inp.action_mask_B_T).sum() / inp.action_mask_B_T.sum()
        return LossOutput(loss, {})


class PerToken(Good):
    def policy_loss(self, inp):
        logp_B_T, adv_B_T = select_tokens(inp.action_mask_B_T, inp.logp_B_T, inp.advantages_B_T)
        return LossOutput(-(adv_B_T * logp_B_T), {})


class UndeclaredOldLogp(Good):
    def policy_loss(self, inp):
        old = inp.old_logp_B_T
        if old is None:
            raise ValueError("old_logp_B_T is None")
        return super().policy_loss(inp)


class Stateful(Good):
    """Keeps a running baseline but forgets to save it."""

    def __init__(self, config=None):
        super().__init__(config)
        self.seen = 0.0

    def advantages(self, traj):
        self.seen += float(traj.rewards_B.sum())
        return AdvantageResult((traj.rewards_B - self.seen)[:, None] * traj.action_mask_B_T)


class WrongShape(Good):
    def advantages(self, traj):
        return AdvantageResult(traj.rewards_B)


@dataclasses.dataclass
class LooseConfig:
    scale: float = 1.0


class Loose(Good):
    Config = LooseConfig


class ValuesWithoutCritic(Good):
    needs = frozenset({"values"})


BROKEN = {
    NoSelect: "[default] policy_loss() returned nan when padding and observation tokens hold NaN/inf: pass every "
    "per-token input through algorithms.objectives.select_tokens",
    PerToken: "[default] policy_loss() returned a loss of shape [",
    UndeclaredOldLogp: "[default] policy_loss() raised ValueError: old_logp_B_T is None (with only its declared "
    "needs supplied: none; declare every optional input the method reads in `needs`)",
    Stateful: "[default] state_dict()/load_state_dict(): a fresh instance loaded with the saved state computes "
    "different advantages",
    WrongShape: "[default] advantages() returned advantages_B_T of shape [",
    ValuesWithoutCritic: "[default] needs/critic: declare `values` in needs exactly when `critic`",
}


@pytest.mark.parametrize("cls", list(BROKEN), ids=lambda c: c.__name__)
def test_a_broken_plugin_gets_one_clear_line(cls):
    failures = check_algorithm(cls, "good")
    assert len(failures) == 1, failures
    line = failures[0]
    assert "\n" not in line and line.startswith(f"good ({__name__}.{cls.__qualname__}): ")
    assert BROKEN[cls] in line, line


def test_config_problems_are_named_field_by_field():
    failures = check_algorithm(Loose, "good")
    assert any("Config: make it @dataclass(frozen=True)" in f for f in failures)
    assert any("Config.scale: no help text" in f for f in failures)


def test_the_good_plugin_conforms():
    assert check_algorithm(Good) == []


def test_random_batches_have_padding_observations_and_mixed_rewards():
    traj = random_trajectories(group_size=4, with_values=True, seed=0)
    action, response = traj.action_mask_B_T, traj.response_mask_B_T
    assert ((response == 1) & (action == 0)).any()  # observation tokens
    assert (response == 0).any()  # padding
    assert (traj.values_B_T[action == 0] == 0).all()  # as the learner supplies them
    for group in traj.rewards_B.reshape(-1, 4):
        assert group.min() < group.max()


# ---- the learner's checks of what a plugin returns ------------------------------------------


def test_wrong_shapes_name_the_plugin_and_the_method():
    algo, traj = Good(), random_trajectories(1, False, 0)
    with pytest.raises(
        PluginOutputError,
        match=r"algorithm 'good' \(.*Good\): advantages\(\) returned advantages_B_T of shape",
    ):
        check_advantage_result(algo, AdvantageResult(traj.rewards_B), traj)
    with pytest.raises(
        PluginOutputError,
        match=r"'good' .*policy_loss\(\) returned a loss of shape \[2, 3\]; it must be a scalar",
    ):
        check_loss_output(algo, "policy_loss", LossOutput(torch.zeros(2, 3)))
    with pytest.raises(PluginOutputError, match=r"policy_loss\(\) returned metric 'x' = 'a'"):
        check_loss_output(algo, "policy_loss", LossOutput(torch.zeros(()), {"x": "a"}))
    with pytest.raises(
        PluginOutputError, match=r"advantages\(\) returned tuple; it must return an AdvantageResult"
    ):
        check_advantage_result(algo, (1, 2), traj)


def test_non_finite_outputs_are_described_not_raised():
    algo, traj = Good(), random_trajectories(1, False, 0)
    adv = traj.action_mask_B_T.clone()
    assert check_advantage_result(algo, AdvantageResult(adv), traj) is None
    adv[traj.action_mask_B_T == 0] = float("nan")  # off the action tokens: fine
    assert check_advantage_result(algo, AdvantageResult(adv), traj) is None
    adv[0, 0] = float("inf")
    assert "advantages() returned non-finite advantages_B_T on 1 action tokens" in check_advantage_result(
        algo, AdvantageResult(adv), traj
    )
    assert "policy_loss() returned a non-finite loss (nan)" in check_loss_output(
        algo, "policy_loss", LossOutput(torch.tensor(float("nan")))
    )


def test_the_readme_snippet_is_the_example_file():
    """algorithms/README.md shows the example plugin whole, imports included: keep them equal."""
    import re

    readme = (EXAMPLES.parents[1] / "algorithms" / "README.md").read_text()
    snippet = re.search(r"```python\n(from __future__.*?)```", readme, re.S).group(1)
    code = (EXAMPLES / "reinforce_plugin.py").read_text()
    assert snippet.strip() == code[code.index("from __future__") :].strip()
