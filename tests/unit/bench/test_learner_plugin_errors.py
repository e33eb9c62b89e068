"""A plugin's bad output, met inside the learner: a wrong shape stops at once with one line naming
the plugin and the method; a non-finite loss is skipped and counted, and the message that stops a
diverged run says which method produced it."""

from __future__ import annotations

import pytest
import torch

from algorithms.base import AdvantageResult, Algorithm, LossOutput
from algorithms.grpo import GRPO
from algorithms.outputs import PluginOutputError
from bench.models.tiny import new_tiny_model
from bench.train.learner import Learner, TrainingDiverged, build_batch
from tests.unit.bench.test_learner_old_logp import _trajectories


class PerTokenLoss(GRPO):
    name = "per-token"

    def policy_loss(self, inp):
        return LossOutput(-(inp.advantages_B_T * inp.logp_B_T), {})


class NanAdvantages(GRPO):
    name = "nan-adv"

    def advantages(self, traj):
        adv_B_T = traj.action_mask_B_T * float("nan")
        return AdvantageResult(adv_B_T)


def _run(algo: Algorithm, steps: int = 1) -> Learner:
    torch.manual_seed(0)
    policy, tokenizer = new_tiny_model(0)
    learner = Learner(algo, policy.train(), policy_lr=1e-3, critic_lr=1e-3, nan_patience=2)
    batch = build_batch(_trajectories(tokenizer), tokenizer.pad_token_id, 6)
    for _ in range(steps):
        learner.train_step(batch)
    return learner


def test_a_wrong_shape_loss_names_the_plugin_and_the_method():
    with pytest.raises(PluginOutputError) as err:
        _run(PerTokenLoss(GRPO.Config(group_size=4)))
    message = str(err.value)
    assert (
        "algorithm 'per-token' (" in message
        and "PerTokenLoss): policy_loss() returned a loss of shape" in message
    )
    assert "algorithms.aggregation.aggregate" in message


def test_non_finite_advantages_are_skipped_then_named_when_the_run_stops():
    with pytest.raises(TrainingDiverged) as err:
        _run(NanAdvantages(GRPO.Config(group_size=4)), steps=2)
    message = str(err.value)
    assert message.startswith("2 consecutive non-finite losses")
    assert "NanAdvantages): advantages() returned non-finite advantages_B_T on" in message
