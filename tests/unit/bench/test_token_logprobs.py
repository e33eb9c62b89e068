"""The fused log-prob/entropy kernel of `response_logprobs` against plain autograd: values,
gradients, temperature, and blocks of rows (forced small here)."""

from __future__ import annotations

import pytest
import torch

from bench.models import logprobs as models
from bench.models.logprobs import _TokenLogprobs


def _reference(logits_B_T_V, targets_B_T, temperature):
    z = logits_B_T_V.float() / temperature
    logp_all = torch.log_softmax(z, dim=-1)
    logp = logp_all.gather(-1, targets_B_T[..., None]).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy.detach()


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("block_floats", [1 << 21, 5 * 300])  # one block; blocks of one batch row
def test_values_and_gradients_match_autograd(monkeypatch, temperature, block_floats):
    monkeypatch.setattr(models, "_VOCAB_BLOCK_FLOATS", block_floats)
    gen = torch.Generator().manual_seed(0)
    B, T, V = 4, 5, 300
    logits = (3 * torch.randn(B, T + 1, V, generator=gen))[:, :-1]  # a strided view, as in the model
    targets = torch.randint(0, V, (B, T), generator=gen)
    weights = torch.randn(B, T, generator=gen)
    x_ref = logits.detach().clone().requires_grad_(True)
    x_new = logits.detach().clone().requires_grad_(True)
    logp_ref, entropy_ref = _reference(x_ref, targets, temperature)
    logp_new, entropy_new = _TokenLogprobs.apply(x_new, targets, temperature, True)
    torch.testing.assert_close(logp_new, logp_ref, rtol=0, atol=1e-5)
    torch.testing.assert_close(entropy_new, entropy_ref, rtol=0, atol=1e-4)
    assert not entropy_new.requires_grad
    (weights * logp_ref).sum().backward()
    (weights * logp_new).sum().backward()
    torch.testing.assert_close(x_new.grad, x_ref.grad, rtol=1e-5, atol=1e-6)


def test_a_hand_computed_row():
    # logits (0, ln 3) over two tokens: p = (1/4, 3/4); target 1: log p = ln 3/4;
    # entropy = -(1/4 ln 1/4 + 3/4 ln 3/4); d log p(1) / d z = onehot(1) - p = (-1/4, 1/4)
    z = torch.tensor([[[0.0, torch.log(torch.tensor(3.0)).item()]]], requires_grad=True)
    logp, entropy = _TokenLogprobs.apply(z, torch.tensor([[1]]), 1.0, True)
    p = torch.tensor([0.25, 0.75])
    assert logp.item() == pytest.approx(torch.log(p[1]).item(), abs=1e-6)
    assert entropy.item() == pytest.approx(-(p * p.log()).sum().item(), abs=1e-6)
    logp.sum().backward()
    torch.testing.assert_close(z.grad, torch.tensor([[[-0.25, 0.25]]]), rtol=0, atol=1e-6)
