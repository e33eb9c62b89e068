"""Fields an algorithm declares inactive under a run's settings (`Algorithm.inactive_fields`) really
cannot change training there: a property test over every built-in and preset, and the converse
for the PPO clip once there are several updates per batch."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from algorithms import registry
from algorithms.base import CriticLossInputs, PolicyLossInputs, RunSettings
from algorithms.conformance import random_trajectories

CONFIGS = [(name, preset) for name in registry.BUILTINS for preset in (None, *registry.get(name).presets)]


def _changed(value):
    """Another valid value of a numeric field (None: a value where there was none)."""
    if value is None:
        return 0.05
    if isinstance(value, bool):
        return not value
    return value * 0.1 if value else 0.3  # far enough that an active field would show


def _everything(algo, logp_shift: float = 0.0, seed: int = 0) -> list[torch.Tensor]:
    """Advantages, the policy loss and its gradient, and with a critic the critic loss and its
    gradient, on one random batch; the old policy is the current one shifted by `logp_shift`
    (0: one update per batch, where the learner's old log-probs are the update's own)."""
    critic = algo.critic is not None
    traj = random_trajectories(algo.group_size, with_values=critic, seed=seed)
    mask_B_T = traj.action_mask_B_T
    g = torch.Generator().manual_seed(seed + 1)
    adv = algo.advantages(traj)
    logp_B_T = (-0.05 - 2.0 * torch.rand(mask_B_T.shape, generator=g)) * mask_B_T
    rollout_B_T = (logp_B_T + 0.3 * torch.randn(mask_B_T.shape, generator=g)) * mask_B_T  # a stale engine
    leaf = logp_B_T.clone().requires_grad_(True)
    out = algo.policy_loss(
        PolicyLossInputs(
            logp_B_T=leaf,
            rollout_logp_B_T=rollout_B_T,
            advantages_B_T=adv.advantages_B_T.detach(),
            action_mask_B_T=mask_B_T,
            old_logp_B_T=(logp_B_T + logp_shift * mask_B_T) if "old_logp" in algo.needs else None,
            ref_logp_B_T=rollout_B_T if "ref_logp" in algo.needs else None,
            max_response_tokens=traj.max_response_tokens,
        )
    )
    out.loss.backward()
    found = [adv.advantages_B_T, out.loss.detach(), leaf.grad]
    if critic:  # the first critic update: its values are the rollout-time ones
        values = traj.values_B_T.clone().requires_grad_(True)
        c = algo.critic_loss(CriticLossInputs(values, traj.values_B_T, adv.returns_B_T.detach(), mask_B_T))
        c.loss.backward()
        found += [c.loss.detach(), values.grad]
    return found


@pytest.mark.parametrize("name, preset", CONFIGS)
def test_a_field_inactive_at_one_update_per_batch_changes_nothing(name, preset):
    cls = registry.get(name)
    config = cls.make_config(preset)
    inactive = cls(config).inactive_fields(RunSettings(updates_per_batch=1))
    reference = _everything(cls(config))
    for field in inactive:
        other = cls(dataclasses.replace(config, **{field: _changed(getattr(config, field))}))
        for a, b in zip(reference, _everything(other), strict=True):
            assert torch.equal(a, b), (name, preset, field)


@pytest.mark.parametrize("name", ["grpo", "dapo", "ppo", "dr-grpo", "gspo", "rloo"])
def test_the_clip_acts_once_the_old_policy_differs(name):
    # several updates per batch: the old policy is one update behind, ratios leave the clip band
    cls = registry.get(name)
    config = cls.make_config()
    run = RunSettings(updates_per_batch=4)
    assert "clip_eps_high" not in cls(config).inactive_fields(run)
    assert "clip_eps_high" in cls(config).inactive_fields(RunSettings(updates_per_batch=1))
    wide = dataclasses.replace(config, clip_eps_low=0.9, clip_eps_high=9.0)
    reference, other = _everything(cls(config), logp_shift=-0.5), _everything(cls(wide), logp_shift=-0.5)
    assert not torch.equal(reference[2], other[2]), name  # the policy gradient


def test_grpo_s_band_fields_act_by_importance_and_ppo_s_lambdas_by_length_adaptivity():
    grpo, ppo = registry.get("grpo"), registry.get("ppo")
    one = RunSettings()
    assert set(grpo(grpo.make_config("dis")).inactive_fields(RunSettings(4))) == {
        "clip_eps_low",
        "clip_eps_high",
    }
    assert {"dis_eps_low", "dis_eps_high"} <= set(grpo(grpo.make_config()).inactive_fields(RunSettings(4)))
    assert {"alpha", "value_clip"} <= set(ppo(ppo.make_config()).inactive_fields(one))
    vapo = ppo(ppo.make_config("vapo")).inactive_fields(one)
    assert "lambda_policy" in vapo and "alpha" not in vapo
    assert registry.get("sao")().inactive_fields(one) == {}
