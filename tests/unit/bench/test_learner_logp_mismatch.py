"""`policy/logp_mismatch_*`: the learner's log-prob against the rollout engine's, over action
tokens, by hand."""

from __future__ import annotations

import pytest
import torch

from bench.train.metrics import logp_mismatch


def test_the_mismatch_counts_action_tokens_only():
    logp_B_T = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.25, 0.0]])
    rollout_B_T = torch.tensor([[-1.5, -2.0, -1.0], [-0.5, -1.25, -9.0]])
    mask_B_T = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])  # the 2.0 and 9.0 gaps are padding
    got = logp_mismatch(logp_B_T, rollout_B_T, mask_B_T)
    # gaps on action tokens: 0.5, 0, 0, 1.0 -> mean 1.5 / 4, max 1.0
    assert got == {"policy/logp_mismatch_mean": pytest.approx(0.375), "policy/logp_mismatch_max": 1.0}


def test_no_action_tokens_is_no_mismatch():
    zeros = torch.zeros(2, 3)
    got = logp_mismatch(torch.ones(2, 3), zeros, zeros)
    assert got == {"policy/logp_mismatch_mean": 0.0, "policy/logp_mismatch_max": 0.0}
