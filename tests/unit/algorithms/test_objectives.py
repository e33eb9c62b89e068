"""Hand-computed checks of the shared loss terms in `algorithms.objectives`."""

import math

import pytest
import torch

from algorithms.base import PolicyLossInputs
from algorithms.objectives import (
    advantage_metrics,
    clipped_policy_loss,
    clipped_value_loss,
    dis_coefficient,
    dis_policy_loss,
    dis_token_loss,
    explained_variance,
    k3_kl,
    mse_value_loss,
    policy_metrics,
    ppo_clip_token_loss,
    select_tokens,
    sequence_ratio,
)

D = torch.float64


def t(*xs):
    return torch.tensor(xs, dtype=D)


# ---- DIS ---------------------------------------------------------------------------------


def test_dis_band_is_strict_at_both_bounds():
    # band 0.3/5.0 keeps 0.7 < r < 6.0; exactly 0.7 and 6.0 are outside (strict inequalities).
    # Note 1 - 0.3 == 0.7 and 1 + 5.0 == 6.0 exactly in float64.
    r = t(0.7001, 0.6999, 5.999, 6.001, 0.7, 6.0, 1.0)
    f, in_band = dis_coefficient(r, 0.3, 5.0)
    assert in_band.tolist() == [True, False, True, False, False, False, True]
    assert f.tolist() == [0.7001, 0.0, 5.999, 0.0, 0.0, 0.0, 1.0]  # f(r) = r in band, 0 outside


def test_dis_coding_band():
    # coding band 0.8/3.0 keeps 0.2 < r < 4.0
    _, in_band = dis_coefficient(t(0.2001, 0.1999, 3.999, 4.001), 0.8, 3.0)
    assert in_band.tolist() == [True, False, True, False]


@pytest.mark.parametrize("adv", [2.0, -1.5])
def test_dis_token_loss_values_and_gradient_both_signs(adv):
    # rollout log-probs 0, so logp_t = log r_t and r_t is exactly the chosen ratio.
    r = t(0.7001, 0.6999, 5.999, 6.001, 0.7, 6.0)
    logp = r.log().requires_grad_(True)
    a = torch.full_like(r, adv)
    loss, ratio_, in_band = dis_token_loss(logp, torch.zeros_like(r), a, 0.3, 5.0)
    assert torch.allclose(ratio_, r)
    # in band: loss_t = -r_t * A * log r_t; out of band: 0 whatever the sign of A
    expected = [-0.7001 * adv * math.log(0.7001), 0.0, -5.999 * adv * math.log(5.999), 0.0, 0.0, 0.0]
    assert torch.allclose(loss.detach(), t(*expected), atol=1e-12)
    loss.sum().backward()
    # detached coefficient: d loss_t / d logp_t = -f(r_t) * A, exactly 0 out of band
    assert logp.grad.tolist()[1::2] == [0.0, 0.0, 0.0]
    assert logp.grad[4].item() == 0.0
    assert torch.allclose(logp.grad, t(-0.7001 * adv, 0.0, -5.999 * adv, 0.0, 0.0, 0.0), atol=1e-12)


def test_dis_token_loss_without_detach_uses_the_product_rule():
    # -(f(r) A log pi) with f(r) = exp(logp - rollout): d/dlogp = -A (r log pi + r) in band, 0 outside
    r = t(1.5, 0.5)
    logp = r.log().requires_grad_(True)
    loss, _, _ = dis_token_loss(
        logp, torch.zeros(2, dtype=D), t(2.0, 2.0), 0.3, 5.0, detach_coefficient=False
    )
    loss.sum().backward()
    assert torch.allclose(logp.grad, t(-2.0 * (1.5 * math.log(1.5) + 1.5), 0.0))


# ---- PPO clip ----------------------------------------------------------------------------


def test_ppo_clip_four_cases():
    # clip eps 0.2/0.2, clip range [0.8, 1.2]
    r = t(1.5, 0.5, 0.5, 1.5, 1.1).requires_grad_(True)
    a = t(1.0, 1.0, -1.0, -1.0, 2.0)
    loss, clipped = ppo_clip_token_loss(r, a, 0.2, 0.2)
    # A>0 r>1.2: -min(1.5, 1.2) = -1.2, clipped (no gradient)
    # A>0 r<0.8: -min(0.5, 0.8) = -0.5, NOT clipped (the surrogate keeps pushing up)
    # A<0 r<0.8: -min(-0.5, -0.8) = 0.8, clipped
    # A<0 r>1.2: -min(-1.5, -1.2) = 1.5, NOT clipped
    # in range: -(1.1 * 2) = -2.2
    assert torch.allclose(loss.detach(), t(-1.2, -0.5, 0.8, 1.5, -2.2))
    assert clipped.tolist() == [True, False, True, False, False]
    loss.sum().backward()
    assert torch.allclose(r.grad, t(0.0, -1.0, 0.0, 1.0, -2.0))  # d loss/d r = -A where not clipped


def test_ppo_clip_asymmetric_clip_higher():
    # clip eps 0.2/0.28: r = 1.25 with A > 0 is inside [0.8, 1.28], r = 1.3 is clipped at 1.28
    loss, clipped = ppo_clip_token_loss(t(1.25, 1.3), t(1.0, 1.0), 0.2, 0.28)
    assert torch.allclose(loss, t(-1.25, -1.28))
    assert clipped.tolist() == [False, True]


# ---- KL, ratios, hygiene -------------------------------------------------------------------


def test_k3_kl():
    # k3 = exp(d) - d - 1 with d = ref - logp: d = ln 2 -> 1 - ln 2; d = 0 -> 0; d = -ln 2 -> ln 2 - 1/2
    logp = t(0.0, 0.0, 0.0)
    ref = t(math.log(2.0), 0.0, -math.log(2.0))
    assert torch.allclose(k3_kl(logp, ref), t(1 - math.log(2), 0.0, math.log(2) - 0.5))


def test_sequence_ratio_mean_and_sum_ignore_masked_tokens():
    # log r = [0.1, 0.3, (5.0 masked)]: mean 0.2 -> exp(0.2); sum 0.4 -> exp(0.4)
    logp = t(0.1, 0.3, 5.0)[None]
    mask = t(1.0, 1.0, 0.0)[None]
    old = torch.zeros_like(logp)
    assert torch.allclose(sequence_ratio(logp, old, mask, "mean"), t(math.exp(0.2))[None])
    assert torch.allclose(sequence_ratio(logp, old, mask, "sum"), t(math.exp(0.4))[None])
    assert sequence_ratio(logp, old, mask).shape == (1, 1)


def test_select_tokens_removes_inf_and_nan_outside_the_mask():
    x = t(1.0, float("inf"), float("nan"))
    (y,) = select_tokens(t(1.0, 0.0, 0.0), x)
    assert y.tolist() == [1.0, 0.0, 0.0]
    assert select_tokens(t(1.0), None) == (None,)


# ---- critic terms --------------------------------------------------------------------------


def test_explained_variance_known_case():
    # R = [1,2,3,4], V = [1,2,3,3]: R - V = [0,0,0,1], Var = 0.1875; Var(R) = 1.25
    # EV = 1 - 0.1875 / 1.25 = 0.85. The 5th position is masked out (garbage ignored).
    r = t(1.0, 2.0, 3.0, 4.0, 100.0)
    v = t(1.0, 2.0, 3.0, 3.0, -100.0)
    m = t(1.0, 1.0, 1.0, 1.0, 0.0)
    assert explained_variance(v, r, m) == pytest.approx(0.85)
    assert explained_variance(r, r, m) == pytest.approx(1.0)  # perfect critic
    assert explained_variance(torch.full_like(r, 2.5), r, m) == pytest.approx(0.0)  # constant = mean
    assert math.isnan(explained_variance(v, torch.ones_like(r), m))  # Var(R) = 0


def test_clipped_value_loss_and_mse():
    # old V = 0, clip 0.2:
    # V=0.5, R=1: (0.5-1)^2 = 0.25 vs (0.2-1)^2 = 0.64 -> 0.5 * 0.64 = 0.32 (clipped branch larger)
    # V=0.5, R=0: 0.25 vs (0.2-0)^2 = 0.04 -> 0.125
    # V=-0.1, R=1: inside the clip, 1.21 both -> 0.605
    # mean = (0.32 + 0.125 + 0.605) / 3 = 0.35
    v = t(0.5, 0.5, -0.1, 7.0)
    r = t(1.0, 0.0, 1.0, -7.0)
    m = t(1.0, 1.0, 1.0, 0.0)
    loss, clipped = clipped_value_loss(v, torch.zeros_like(v), r, m, 0.2)
    assert loss.item() == pytest.approx(0.35)
    assert clipped.tolist()[:3] == [True, False, False]
    # MSE: 0.5 * (0.25 + 0.25 + 1.21) / 3 = 0.285
    assert mse_value_loss(v, r, m).item() == pytest.approx(0.285)


# ---- metrics and whole losses ------------------------------------------------------------


def test_policy_metrics():
    # r = 2 on both tokens: approx_kl = (r - 1) - log r = 1 - ln 2; ratio_mean 2
    logp = t(math.log(2.0), math.log(2.0), 0.0)[None]
    beh = torch.zeros_like(logp)
    mask = t(1.0, 1.0, 0.0)[None]
    m = policy_metrics(
        torch.tensor(0.5),
        logp,
        beh,
        logp.exp(),
        mask,
        entropy_B_T=t(1.0, 3.0, float("nan"))[None],
        clipped=torch.tensor([[True, False, True]]),
    )
    assert m["policy/approx_kl"] == pytest.approx(1 - math.log(2))
    assert m["policy/ratio_mean"] == pytest.approx(2.0)
    assert m["policy/entropy"] == pytest.approx(2.0)  # NaN on the masked token is ignored
    assert m["policy/clip_frac"] == pytest.approx(0.5)
    assert m["loss/policy"] == 0.5
    assert all(isinstance(x, float) for x in m.values())


def test_advantage_metrics():
    # masked values [1, 3]: mean 2, population std 1
    m = advantage_metrics(t(1.0, 3.0, 50.0)[None], t(1.0, 1.0, 0.0)[None])
    assert m == {"adv/mean": pytest.approx(2.0), "adv/std": pytest.approx(1.0)}


def test_whole_losses_match_their_token_terms():
    # token-mean of the per-token terms over the two action tokens
    logp = t(math.log(1.5), math.log(0.5), 9.0)[None]
    zeros = torch.zeros_like(logp)
    adv = t(1.0, 1.0, 0.0)[None]
    mask = t(1.0, 1.0, 0.0)[None]
    clip_inputs = PolicyLossInputs(
        logp, rollout_logp_B_T=zeros, advantages_B_T=adv, action_mask_B_T=mask, old_logp_B_T=zeros
    )
    out = clipped_policy_loss(
        clip_inputs, "test", clip_eps_low=0.2, clip_eps_high=0.2, aggregation="token-mean"
    )
    loss, m = out.loss, out.metrics
    assert loss.item() == pytest.approx((-1.2 - 0.5) / 2)  # see test_ppo_clip_four_cases
    assert m["policy/clip_frac"] == pytest.approx(0.5)
    dis_inputs = PolicyLossInputs(logp, rollout_logp_B_T=zeros, advantages_B_T=adv, action_mask_B_T=mask)
    out = dis_policy_loss(dis_inputs, dis_eps_low=0.3, dis_eps_high=5.0, aggregation="token-mean")
    loss, m = out.loss, out.metrics
    assert loss.item() == pytest.approx(-1.5 * math.log(1.5) / 2)  # r = 0.5 is out of band
    assert m["policy/masked_frac"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="ratio level"):
        clipped_policy_loss(
            clip_inputs,
            "test",
            clip_eps_low=0.2,
            clip_eps_high=0.2,
            aggregation="token-mean",
            ratio_level="x",
        )
