"""The versioned plugin contract: `algorithms.PLUGIN_API`, its changelog, and the forms of the
previous version (plugin API 1) that still work with exactly one warning each. A plugin that
fails to load breaks only itself (`bench algos` through a subprocess: tests/integration/
test_plugin_contract.py)."""

from __future__ import annotations

import dataclasses
import math
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

import algorithms
from algorithms import objectives, registry
from algorithms.base import CriticSettings, PolicyLossInputs, Trajectories
from algorithms.deprecation import DeprecatedFormWarning, forget_warnings

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def fresh():
    registry.reset()
    forget_warnings()
    yield
    registry.reset()
    forget_warnings()


def _deprecations(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, DeprecatedFormWarning)]


def test_the_contract_has_a_version_and_a_changelog():
    assert algorithms.PLUGIN_API == 2
    readme = (REPO / "algorithms" / "README.md").read_text()
    assert "## Changes to the contract" in readme and "| 2 |" in readme and "| 1 |" in readme


def test_needs_set_in_init_loads_runs_and_warns_once(tmp_path, monkeypatch):
    (tmp_path / "api1_needs.py").write_text(
        textwrap.dedent("""
        from dataclasses import dataclass
        from algorithms.base import Algorithm, doc

        @dataclass(frozen=True)
        class Config:
            ratio: bool = doc("clip against the old policy", default=True)

        class Api1Needs(Algorithm):
            name = "api1-needs"
            summary = "plugin API 1: needs set in __init__"
            Config = Config
            presets = {"plain": {"ratio": False}}

            def __init__(self, config=None):
                super().__init__(config)
                self.needs = frozenset({"old_logp"}) if self.config.ratio else frozenset()
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert registry.load_plugin_module("api1_needs") == ["api1-needs"]
        cls = registry.get("api1-needs")
        assert cls().needs == {"old_logp"} and cls(cls.make_config("plain")).needs == frozenset()
        assert registry.needs_by_preset(cls) == {"default": ["old_logp"], "plain": []}
    (message,) = _deprecations(caught)
    assert message.startswith("api1-needs: `self.needs = ...` in __init__ is plugin API 1's form")
    assert "declare `needs` as a class attribute, or as a property" in message


def _api1_inputs() -> dict:
    return {
        "rewards_B": torch.tensor([1.0, 0.0]),
        "action_mask_B_T": torch.ones(2, 3),
        "response_mask_B_T": torch.ones(2, 3),
        "prompt_keys": ["p0", "p0"],
        "max_response_tokens": 3,
    }


def test_trajectories_with_removed_fields_build_and_warn_once():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        by_keyword = Trajectories(
            **_api1_inputs(), group_index_B=torch.tensor([0, 0]), truncated_B=torch.tensor([False, True])
        )
        again = Trajectories(**_api1_inputs(), group_index_B=torch.tensor([0, 0]))
    (message,) = _deprecations(caught)
    assert message.startswith("Trajectories(group_index_B=..., truncated_B=...): removed in plugin API 2")
    plain = Trajectories(**_api1_inputs())
    assert repr(by_keyword) == repr(again) == repr(plain)  # the removed fields are ignored
    assert {f.name for f in dataclasses.fields(Trajectories)} >= {"prompt_keys", "values_B_T"}
    assert "group_index_B" not in {f.name for f in dataclasses.fields(Trajectories)}


def test_trajectories_in_plugin_api_1_positional_order():
    x = _api1_inputs()
    values_B_T = torch.full((2, 3), 0.5)
    with pytest.warns(DeprecatedFormWarning, match="removed in plugin API 2"):
        # API 1: (rewards, action mask, response mask, group_index_B, prompt_keys, max_response_tokens, values)
        old = Trajectories(
            x["rewards_B"],
            x["action_mask_B_T"],
            x["response_mask_B_T"],
            torch.tensor([0, 0]),
            x["prompt_keys"],
            x["max_response_tokens"],
            values_B_T,
        )
    assert old.prompt_keys == ["p0", "p0"] and old.max_response_tokens == 3
    assert old.values_B_T is values_B_T


def test_critic_settings_lr_is_ignored_with_one_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        settings = CriticSettings(updates_per_step=2, lr=1e-5)
        CriticSettings(lr=2e-5)
    (message,) = _deprecations(caught)
    assert message.startswith("CriticSettings(lr=1e-05): removed in plugin API 2 and ignored")
    assert "run field critic_lr" in message
    assert dataclasses.asdict(settings) == {
        "updates_per_step": 2,
        "warmup_steps": 0,
        "freeze_attention": False,
    }


def test_the_shared_losses_read_their_old_keywords_with_one_warning_per_function():
    logp = torch.tensor([[math.log(1.5), math.log(0.5)]])
    zeros, ones = torch.zeros_like(logp), torch.ones_like(logp)
    inp = PolicyLossInputs(logp, rollout_logp_B_T=zeros, advantages_B_T=ones, action_mask_B_T=ones)
    clip_inp = dataclasses.replace(inp, old_logp_B_T=zeros)
    new_dis = objectives.dis_policy_loss(inp, dis_eps_low=0.3, dis_eps_high=5.0, aggregation="token-mean")
    new_clip = objectives.clipped_policy_loss(
        clip_inp, "x", clip_eps_low=0.2, clip_eps_high=0.2, aggregation="token-mean"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old_dis = objectives.dis_policy_loss(inp, eps_low=0.3, eps_high=5.0, aggregation="token-mean")
        objectives.dis_policy_loss(inp, eps_low=0.3, eps_high=5.0, aggregation="token-mean")
        old_clip = objectives.clipped_policy_loss(
            clip_inp, "x", eps_low=0.2, eps_high=0.2, aggregation="token-mean"
        )
    assert old_dis.loss.item() == new_dis.loss.item() == pytest.approx(-1.5 * math.log(1.5) / 2)
    assert old_clip.loss.item() == new_clip.loss.item() == pytest.approx((-1.2 - 0.5) / 2)
    assert _deprecations(caught) == [
        "algorithms.objectives.dis_policy_loss(eps_low=..., eps_high=...): since plugin API 2 "
        "dis_eps_low=..., dis_eps_high=...; the old names are read as those for now",
        "algorithms.objectives.clipped_policy_loss(eps_low=..., eps_high=...): since plugin API 2 "
        "clip_eps_low=..., clip_eps_high=...; the old names are read as those for now",
    ]
    with pytest.raises(TypeError, match="two names of one argument"):
        objectives.ppo_clip_token_loss(ones, ones, 0.2, clip_eps_high=0.2, eps_high=0.3)


def test_a_broken_entry_point_breaks_only_itself(tmp_path, monkeypatch):
    (tmp_path / "broken_algo.py").write_text("raise RuntimeError('plugin init failed')\n")
    dist = tmp_path / "broken_algo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-algo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[bench.algorithms]\nbroken = broken_algo:Broken\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "broken" in registry.names() and registry.get("sao").name == "sao"
    with pytest.raises(registry.RegistryError) as err:
        registry.get("broken")
    assert str(err.value) == (
        "algorithm 'broken' from entry point (broken-algo) cannot be used: cannot load broken_algo:Broken: "
        "RuntimeError: plugin init failed"
    )
    assert registry.problems() == [str(err.value)]
    assert registry.describe("grpo")["name"] == "grpo"
