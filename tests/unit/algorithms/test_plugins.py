"""Every built-in plugin on tiny hand-made batches: advantages, losses, gradients, presets."""

import dataclasses
import importlib
import math
import re

import pytest
import torch

from algorithms.base import Algorithm, CriticLossInputs, PolicyLossInputs, Trajectories
from algorithms.dapo import DAPO, overlong_penalty
from algorithms.dr_grpo import DrGRPO
from algorithms.grpo import GRPO
from algorithms.gspo import GSPO
from algorithms.ppo import PPO
from algorithms.rloo import RLOO
from algorithms.running_mean import RunningMean
from algorithms.sao import SAO

D = torch.float64
PLUGINS = {
    "sao": SAO,
    "grpo": GRPO,
    "dapo": DAPO,
    "ppo": PPO,
    "running-mean": RunningMean,
    "dr-grpo": DrGRPO,
    "gspo": GSPO,
    "rloo": RLOO,
}
LN = math.log


def t(*rows):
    return torch.tensor(rows, dtype=D)


def traj(rewards, action_mask, response_mask=None, values=None, keys=None, max_len=10):
    am = t(*action_mask)
    return Trajectories(
        rewards_B=torch.tensor(rewards, dtype=D),
        action_mask_B_T=am,
        response_mask_B_T=am.clone() if response_mask is None else t(*response_mask),
        prompt_keys=keys or [f"p{i}" for i in range(len(rewards))],
        max_response_tokens=max_len,
        values_B_T=None if values is None else t(*values),
    )


def inputs(logp, mask, adv, rollout=None, old=None, ref=None):
    logp = t(*logp).requires_grad_(True)
    zeros = torch.zeros_like(logp)
    return PolicyLossInputs(
        logp_B_T=logp,
        rollout_logp_B_T=zeros if rollout is None else t(*rollout),
        advantages_B_T=t(*adv),
        action_mask_B_T=t(*mask),
        old_logp_B_T=old,
        ref_logp_B_T=ref,
    )


# The clipped-surrogate batch used below: 2 sequences, old log-probs 0, so r = exp(logp).
# seq 0: r = 1.5 (A=+1), r = 0.5 (A=+1), padding;  seq 1: r = 0.5 (A=-1), padding x2.
# eps 0.2/0.2 per-token losses: -min(1.5, 1.2) = -1.2; -min(0.5, 0.8) = -0.5; -min(-0.5, -0.8) = 0.8.
CLIP_LOGP = [[LN(1.5), LN(0.5), 0.0], [LN(0.5), 0.0, 0.0]]
CLIP_MASK = [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
CLIP_ADV = [[1.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]


def clip_inputs(**kw):
    return inputs(CLIP_LOGP, CLIP_MASK, CLIP_ADV, old=torch.zeros(2, 3, dtype=D), **kw)


# ---- SAO -----------------------------------------------------------------------------------


def test_sao_advantages_skip_observation_gae():
    # Row 0, agent: action mask [1,1,0,0,1,1] (positions 2,3 = tool output), reward 1.
    #   V = [0.5, 0.6, 9, 9, 0.7, 0.8] (observation values are ignored), l = 4 action tokens,
    #   lambda_policy = 1 - 1/(1.5*4) = 5/6, gamma = 1. Recursion over action tokens only:
    #   t5: delta = 1 - 0.8 = 0.2,      A = 1/5
    #   t4: delta = 0.8 - 0.7 = 0.1,    A = 1/10 + 5/6 * 1/5   = 4/15
    #   t1: delta = V(t4) - 0.6 = 0.1,  A = 1/10 + 5/6 * 4/15  = 29/90   (t1 links to t4)
    #   t0: delta = 0.6 - 0.5 = 0.1,    A = 1/10 + 5/6 * 29/90 = 199/540
    #   critic targets, lambda 1 (Monte Carlo): R = 1 on every action token.
    # Row 1, text: action mask [1,1,1,0,0,0], reward 0, V = 0.5: l = 3, lambda = 1 - 1/4.5 = 7/9
    #   t2: A = 0 - 0.5 = -1/2; t1: A = 0 + 7/9 * -1/2 = -7/18; t0: A = 7/9 * -7/18 = -49/162; R = 0.
    tr = traj(
        [1.0, 0.0],
        [[1, 1, 0, 0, 1, 1], [1, 1, 1, 0, 0, 0]],
        response_mask=[[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]],
        values=[[0.5, 0.6, 9.0, 9.0, 0.7, 0.8], [0.5, 0.5, 0.5, 0.0, 0.0, 0.0]],
    )
    res = SAO().advantages(tr)
    assert torch.allclose(res.advantages_B_T[0], t(199 / 540, 29 / 90, 0, 0, 4 / 15, 1 / 5))
    assert torch.allclose(res.advantages_B_T[1], t(-49 / 162, -7 / 18, -1 / 2, 0, 0, 0))
    assert torch.allclose(res.returns_B_T, t([1, 1, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0]))
    assert res.metrics["adv/lambda_policy_mean"] == pytest.approx((5 / 6 + 7 / 9) / 2)


def test_sao_step_level_advantages_same_batch():
    # The batch above at step level (App. A.1). Row 0 has two steps: tokens 0-1, tokens 4-5.
    #   step-mean: V = (0.55, 0.75); step 1: A = 1 - 0.75 = 1/4;
    #              step 0: delta = 0.75 - 0.55 = 0.2, A = 1/5 + 5/6 * 1/4 = 49/120
    #   step-last: V = (0.6, 0.8);   step 1: A = 1/5; step 0: A = 0.2 + 5/6 * 1/5 = 11/30
    # Row 1 is one step: A = 0 - V on its three tokens (mean 0.5, last 0.5).
    # The critic targets stay token-level: R = 1 / 0 on every action token.
    tr = traj(
        [1.0, 0.0],
        [[1, 1, 0, 0, 1, 1], [1, 1, 1, 0, 0, 0]],
        response_mask=[[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]],
        values=[[0.5, 0.6, 9.0, 9.0, 0.7, 0.8], [0.5, 0.5, 0.5, 0.0, 0.0, 0.0]],
    )
    mean = SAO(SAO.make_config(preset="step-average")).advantages(tr)
    assert torch.allclose(mean.advantages_B_T[0], t(49 / 120, 49 / 120, 0, 0, 1 / 4, 1 / 4))
    assert torch.allclose(mean.advantages_B_T[1], t(-1 / 2, -1 / 2, -1 / 2, 0, 0, 0))
    last = SAO(SAO.make_config(preset="step-last")).advantages(tr)
    assert torch.allclose(last.advantages_B_T[0], t(11 / 30, 11 / 30, 0, 0, 1 / 5, 1 / 5))
    for res in (mean, last):
        assert torch.allclose(res.returns_B_T, t([1, 1, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0]))
    with pytest.raises(ValueError, match="advantage_granularity"):
        SAO.make_config(advantage_granularity="turn")


# SAO / running-mean DIS batch: one agent row, action mask [1,1,0,0,1,1], rollout log-probs 0.
# r = [0.7001 (in), 0.6999 (out), obs, obs, 5.999 (in), 6.0 (out: strict)], A = [1, 1, -, -, -2, -2].
# Observation tokens carry a huge log-prob (r = e^50) and NaN advantages: they must be ignored.
DIS_LOGP = [[LN(0.7001), LN(0.6999), 50.0, 50.0, LN(5.999), LN(6.0)]]
DIS_MASK = [[1.0, 1.0, 0.0, 0.0, 1.0, 1.0]]
DIS_ADV = [[1.0, 1.0, float("nan"), float("nan"), -2.0, -2.0]]


@pytest.mark.parametrize("cls", [SAO, RunningMean])
def test_dis_loss_value_and_exact_gradients(cls):
    inp = inputs(DIS_LOGP, DIS_MASK, DIS_ADV)
    out = cls().policy_loss(inp)
    # token-mean over N = 4 action tokens of -f(r) A log r; out-of-band tokens contribute 0:
    # (-0.7001 * 1 * ln 0.7001 - 5.999 * (-2) * ln 5.999) / 4
    expected = (-0.7001 * LN(0.7001) + 2 * 5.999 * LN(5.999)) / 4
    assert out.loss.item() == pytest.approx(expected, rel=1e-12)
    assert out.metrics["policy/masked_frac"] == pytest.approx(0.5)  # 0.6999 and 6.0 of 4 action tokens
    out.loss.backward()
    g = inp.logp_B_T.grad[0]
    # exactly zero on masked (out-of-band) tokens and on observation tokens
    assert g[1].item() == 0.0 and g[5].item() == 0.0 and g[2].item() == 0.0 and g[3].item() == 0.0
    # in band: d loss/d logp_t = -A_t * r_t / N, i.e. -A_t * (d r_t / d logp_t) / N (PPO's unclipped gradient)
    assert g[0].item() == pytest.approx(-1.0 * 0.7001 / 4, rel=1e-12)
    assert g[4].item() == pytest.approx(2.0 * 5.999 / 4, rel=1e-12)


def test_sao_critic_loss_and_settings():
    # V = [0.5, 0.9, (obs 5.0)], R = [1, 1, (0)]: MSE = 0.5 * (0.25 + 0.01) / 2 = 0.065
    out = SAO().critic_loss(
        CriticLossInputs(
            values_B_T=t([0.5, 0.9, 5.0]),
            old_values_B_T=t([0.0, 0.0, 0.0]),
            returns_B_T=t([1.0, 1.0, 0.0]),
            action_mask_B_T=t([1.0, 1.0, 0.0]),
        )
    )
    assert out.loss.item() == pytest.approx(0.065)
    assert out.metrics["value/mean"] == pytest.approx(0.7)
    assert math.isnan(out.metrics["value/explained_variance"])  # Var(R) = 0
    c = SAO().critic  # its learning rate is the run field critic_lr (plugin API 2)
    assert (c.updates_per_step, c.warmup_steps, c.freeze_attention) == (2, 10, True)
    assert SAO().needs == {"values"} and SAO().group_size == 1


# ---- GRPO ----------------------------------------------------------------------------------


def test_grpo_advantages_group_zscore():
    # group 0 rewards [1,0,0,0]: mean 0.25, unbiased std sqrt((0.75^2 + 3*0.25^2)/3) = 0.5
    #   -> A = 0.75/0.5001, -0.25/0.5001; group 1 [1,1,1,1]: std 0 -> A = 0
    algo = GRPO(GRPO.make_config(group_size=4))
    mask = [[1, 1, 0]] * 8
    res = algo.advantages(traj([1, 0, 0, 0, 1, 1, 1, 1], mask))
    a0, a1 = 0.75 / 0.5001, -0.25 / 0.5001
    assert torch.allclose(res.advantages_B_T[:4, 0], t(a0, a1, a1, a1))
    assert torch.allclose(res.advantages_B_T[:, 2], torch.zeros(8, dtype=D))  # only action tokens
    assert torch.all(res.advantages_B_T[4:] == 0)


def test_grpo_policy_loss_seq_mean_token_mean():
    out = GRPO().policy_loss(clip_inputs())
    # seq 0 mean (-1.2 - 0.5)/2 = -0.85, seq 1: 0.8 -> (-0.85 + 0.8)/2 = -0.025
    assert out.loss.item() == pytest.approx(-0.025)
    assert out.metrics["policy/clip_frac"] == pytest.approx(2 / 3)
    assert GRPO().needs == {"old_logp"}


def test_grpo_kl_term():
    # ref = logp + ln 2 on every token: k3 = 1 - ln 2 everywhere, its seq-mean-token-mean is 1 - ln 2
    algo = GRPO(GRPO.make_config(beta=0.1))
    assert algo.needs == {"old_logp", "ref_logp"}
    ref = t(*CLIP_LOGP) + LN(2.0)
    out = algo.policy_loss(clip_inputs(ref=ref))
    assert out.loss.item() == pytest.approx(-0.025 + 0.1 * (1 - LN(2.0)))
    assert out.metrics["policy/ref_kl"] == pytest.approx(1 - LN(2.0))


def test_grpo_dis_importance():
    # GRPO + DIS: ratio against the ROLLOUT log-probs (= 0 here), band 0.7 < r < 6: only r = 1.5 stays.
    # seq 0: (-1.5 * 1 * ln 1.5 + 0)/2, seq 1: 0 -> loss = -1.5 ln 1.5 / 4
    algo = GRPO(GRPO.make_config(preset="dis"))
    assert algo.needs == frozenset()
    out = algo.policy_loss(inputs(CLIP_LOGP, CLIP_MASK, CLIP_ADV))  # no old log-probs needed
    assert out.loss.item() == pytest.approx(-1.5 * LN(1.5) / 4)
    assert out.metrics["policy/masked_frac"] == pytest.approx(2 / 3)


def test_grpo_bad_config_and_missing_old_logp():
    with pytest.raises(ValueError, match="importance"):
        GRPO.make_config(importance="foo")
    with pytest.raises(ValueError, match="old_logp"):
        GRPO().policy_loss(inputs(CLIP_LOGP, CLIP_MASK, CLIP_ADV))


# ---- DAPO ----------------------------------------------------------------------------------


def test_dapo_accept_group():
    algo = DAPO()
    assert not algo.accept_group(torch.tensor([1.0, 1.0, 1.0, 1.0]))  # all correct
    assert not algo.accept_group(torch.tensor([0.0, 0.0, 0.0, 0.0]))  # all wrong
    assert not algo.accept_group(torch.tensor([0.5, 0.5]))
    assert algo.accept_group(torch.tensor([1.0, 0.0, 0.0, 0.0]))
    assert DAPO(DAPO.make_config(dynamic_sampling=False)).accept_group(torch.tensor([1.0, 1.0]))


def test_dapo_overlong_penalty_numbers():
    # L_max = 20, L_cache = 4: 0 up to 16, then (16 - |y|)/4, -1 beyond 20
    p = overlong_penalty(torch.tensor([10, 16, 17, 18, 20, 21]), 20, 4)
    assert p.tolist() == pytest.approx([0.0, 0.0, -0.25, -0.5, -1.0, -1.0])
    assert overlong_penalty(torch.tensor([20, 21]), 20, 0).tolist() == [0.0, -1.0]  # no buffer


def test_dapo_advantages_apply_the_penalty_before_the_zscore():
    # max_response_tokens 20, overlong_buffer 0.2 -> L_cache 4. Both correct (reward 1), lengths 10 and 18:
    # shaped rewards [1, 1 - 0.5] = [1, 0.5]; mean 0.75, unbiased std sqrt(2 * 0.25^2) = 0.353553
    # -> A = +-0.25 / (0.353553 + 1e-4)
    mask = [[1.0] * 10 + [0.0] * 10, [1.0] * 18 + [0.0] * 2]
    res = DAPO(DAPO.make_config(group_size=2)).advantages(traj([1.0, 1.0], mask, max_len=20))
    a = 0.25 / (math.sqrt(0.125) + 1e-4)
    assert res.advantages_B_T[0, 0].item() == pytest.approx(a)
    assert res.advantages_B_T[1, 17].item() == pytest.approx(-a)
    assert res.metrics["reward/overlong_penalty_mean"] == pytest.approx(-0.25)


def test_dapo_policy_loss_token_mean_clip_higher():
    # eps 0.2/0.28: r = 1.5 with A>0 clips at 1.28 -> -1.28; then -0.5 and 0.8: (-1.28 - 0.5 + 0.8)/3
    out = DAPO().policy_loss(clip_inputs())
    assert out.loss.item() == pytest.approx(-0.98 / 3)


# ---- PPO -----------------------------------------------------------------------------------


def test_ppo_advantages_gae():
    # V = 0.5 on 3 tokens, reward 1, gamma 1, lambda 0.95:
    #   t2: delta = 0.5, A = 0.5; t1: delta = 0, A = 0.475; t0: A = 0.45125; returns = A + V
    tr = traj([1.0], [[1, 1, 1, 0]], values=[[0.5, 0.5, 0.5, 0.0]])
    res = PPO(PPO.make_config(normalize_advantages=False)).advantages(tr)
    assert torch.allclose(res.advantages_B_T, t([0.45125, 0.475, 0.5, 0.0]))
    assert torch.allclose(res.returns_B_T, t([0.95125, 0.975, 1.0, 0.0]))
    # whitened: mean 0 and unbiased std 1 over the action tokens, 0 on padding
    adv = PPO().advantages(tr).advantages_B_T
    assert adv[0, :3].mean().item() == pytest.approx(0.0, abs=1e-9)
    assert adv[0, :3].std().item() == pytest.approx(1.0, abs=1e-4)  # whiten eps 1e-8 vs var 6e-4
    assert adv[0, 3].item() == 0.0


def test_ppo_vapo_preset():
    # Vanilla VAPO: length-adaptive lambda = 1 - 1/(1.5*3) = 7/9 -> A = [49/162, 7/18, 1/2]; critic lambda 1 -> R = 1
    cfg = PPO.make_config(preset="vapo", normalize_advantages=False)
    assert (
        cfg.length_adaptive_lambda,
        cfg.alpha,
        cfg.lambda_critic,
        cfg.clip_eps_low,
        cfg.clip_eps_high,
    ) == (
        True,
        1.5,
        1.0,
        0.2,
        0.28,
    )
    res = PPO(cfg).advantages(traj([1.0], [[1, 1, 1, 0]], values=[[0.5, 0.5, 0.5, 0.0]]))
    assert torch.allclose(res.advantages_B_T, t([49 / 162, 7 / 18, 0.5, 0.0]))
    assert torch.allclose(res.returns_B_T, t([1.0, 1.0, 1.0, 0.0]))


def test_ppo_policy_loss_is_the_clipped_surrogate_and_value_loss_is_clipped():
    out = PPO().policy_loss(clip_inputs())
    assert out.loss.item() == pytest.approx(-0.9 / 3)  # token-mean of -1.2, -0.5, 0.8
    # clipped value loss, old V 0, clip 0.2 (see test_objectives): (0.32 + 0.125 + 0.605)/3 = 0.35
    crit = PPO().critic_loss(
        CriticLossInputs(
            t([0.5, 0.5, -0.1, 3.0]), t([0.0] * 4), t([1.0, 0.0, 1.0, 0.0]), t([1.0, 1.0, 1.0, 0.0])
        )
    )
    assert crit.loss.item() == pytest.approx(0.35)
    assert crit.metrics["value/clip_frac"] == pytest.approx(1 / 3)
    c = PPO().critic
    assert (c.updates_per_step, c.warmup_steps, c.freeze_attention) == (1, 0, False)
    assert PPO().needs == {"values", "old_logp"}


# ---- running mean --------------------------------------------------------------------------


def test_running_mean_advantages_and_state_round_trip():
    algo = RunningMean()
    # batch 1: empty history -> baseline 0 -> A = R
    res = algo.advantages(traj([1.0, 0.0], [[1, 1], [1, 0]], keys=["a", "b"]))
    assert torch.allclose(res.advantages_B_T, t([1.0, 1.0], [0.0, 0.0]))
    # batch 2: baseline(a) = mean[1] = 1, baseline(b) = mean[0] = 0
    res = algo.advantages(traj([0.0, 1.0, 1.0], [[1]] * 3, keys=["a", "a", "b"]))
    assert res.advantages_B_T[:, 0].tolist() == [-1.0, 0.0, 1.0]
    # round trip: a fresh instance loaded from the state gives the same next advantages
    state = algo.state_dict()
    clone = RunningMean()
    clone.load_state_dict(state)
    nxt = traj([1.0, 0.0], [[1]] * 2, keys=["a", "b"])
    got = clone.advantages(nxt).advantages_B_T
    assert torch.equal(got, algo.advantages(nxt).advantages_B_T)
    # baseline(a) = mean[1, 0, 1] = 2/3 -> A = 1 - 2/3; baseline(b) = mean[0, 1] = 1/2 -> A = -1/2
    assert got[:, 0].tolist() == pytest.approx([1 / 3, -1 / 2])
    assert clone.state_dict() == algo.state_dict()
    assert RunningMean.make_config(preset="online").window == 128


# ---- Dr.GRPO, GSPO, RLOO ---------------------------------------------------------------------


def test_dr_grpo():
    algo = DrGRPO(DrGRPO.make_config(group_size=2))
    res = algo.advantages(traj([1.0, 0.0, 1.0, 1.0], [[1, 1, 0]] * 4, max_len=10))
    assert res.advantages_B_T[:, 0].tolist() == [0.5, -0.5, 0.0, 0.0]  # r - group mean, no std
    # sum of token losses -1.2 - 0.5 + 0.8 = -0.9, divided by B * L_norm = 2 * 10 (the loop's limit)
    inp = clip_inputs()
    inp.max_response_tokens = 10
    assert algo.policy_loss(inp).loss.item() == pytest.approx(-0.9 / 20)
    assert DrGRPO(DrGRPO.make_config(norm_length=5)).policy_loss(clip_inputs()).loss.item() == pytest.approx(
        -0.09
    )
    assert DrGRPO().policy_loss(clip_inputs()).loss.item() == pytest.approx(
        -0.9 / 6
    )  # fallback: padded T = 3


def test_gspo_sequence_ratio_loss_and_gradient():
    # seq 0: log r = [0.1, 0.3] -> s = exp(0.2) = 1.2214 > 1 + 4e-4 with A = +1: clipped -> -1.0004, no gradient
    # seq 1: log r = [-2e-4] -> s = exp(-2e-4) = 0.99980002, inside [1 - 3e-4, 1 + 4e-4], A = -1 -> loss s
    # seq-mean-token-mean: (-1.0004 + exp(-2e-4)) / 2; d/d logp_{1,0} = 0.5 * s * (1/|y_1| = 1)
    inp = inputs([[0.1, 0.3, 0.0], [-2e-4, 0.0, 0.0]], CLIP_MASK, CLIP_ADV, old=torch.zeros(2, 3, dtype=D))
    out = GSPO().policy_loss(inp)
    assert out.loss.item() == pytest.approx((-1.0004 + math.exp(-2e-4)) / 2, rel=1e-12)
    out.loss.backward()
    assert inp.logp_B_T.grad[0].tolist() == [0.0, 0.0, 0.0]
    assert inp.logp_B_T.grad[1, 0].item() == pytest.approx(0.5 * math.exp(-2e-4))
    res = GSPO(GSPO.make_config(group_size=2)).advantages(traj([1.0, 0.0], [[1, 0], [1, 1]]))
    assert res.advantages_B_T[0, 0].item() == pytest.approx(0.5 / (math.sqrt(0.5) + 1e-4))


def test_rloo_leave_one_out_advantages_and_its_trl_sequence_ratio_preset():
    # group [1,0,0,0]: A_0 = 1 - 0 = 1; A_j = 0 - 1/3 for the others
    res = RLOO().advantages(traj([1.0, 0.0, 0.0, 0.0], [[1, 1]] * 4))
    assert torch.allclose(res.advantages_B_T[:, 0], t(1.0, -1 / 3, -1 / 3, -1 / 3))
    assert RLOO().policy_loss(clip_inputs()).loss.item() == pytest.approx(-0.9 / 3)  # token-mean
    # preset trl: sequence-sum ratio. seq 0: exp(ln 1.5 + ln 0.5) = 0.75, A = +1 -> -min(0.75, 0.8) = -0.75
    # seq 1: 0.5, A = -1 -> clipped 0.8. Mean over sequences: (-0.75 + 0.8)/2 = 0.025
    out = RLOO(RLOO.make_config(preset="trl")).policy_loss(clip_inputs())
    assert out.loss.item() == pytest.approx(0.025)


# ---- properties every plugin has -------------------------------------------------------------


@pytest.mark.parametrize("name", list(PLUGINS))
def test_plugin_contract(name):
    cls = PLUGINS[name]
    assert issubclass(cls, Algorithm) and cls.name == name and cls.summary
    module = importlib.import_module(cls.__module__)
    assert re.search(r"^1\. ", module.__doc__, re.M) and re.search(r"^2\. ", module.__doc__, re.M)
    params = cls.Config.__dataclass_params__
    assert params.frozen
    for f in dataclasses.fields(cls.Config):
        assert f.metadata.get("help"), f"{name}.{f.name} has no help text"
    for preset in cls.presets:
        cls.make_config(preset=preset)
    algo = cls()
    assert algo.needs <= {"values", "old_logp", "ref_logp"}
    assert (algo.critic is not None) == ("values" in algo.needs)
    with pytest.raises(ValueError, match="valid presets"):
        cls.make_config(preset="nope")


@pytest.mark.parametrize("name", list(PLUGINS))
def test_losses_ignore_non_action_positions(name):
    # Garbage (inf / NaN) on padding and observation tokens changes nothing and gets no gradient.
    algo = PLUGINS[name]()
    mask = t([1.0, 1.0, 0.0, 1.0])
    clean = dict(logp=t([-0.1, -0.2, 0.0, -0.3]), adv=t([0.5, 0.5, 0.0, 0.5]))
    dirty = dict(logp=t([-0.1, -0.2, float("inf"), -0.3]), adv=t([0.5, 0.5, float("nan"), 0.5]))
    losses = []
    for d in (clean, dirty):
        logp = d["logp"].clone().requires_grad_(True)
        other = d["logp"].clone() * 0.9
        inp = PolicyLossInputs(logp, other, d["adv"], mask, old_logp_B_T=other, ref_logp_B_T=other)
        out = algo.policy_loss(inp)
        out.loss.backward()
        assert torch.isfinite(out.loss) and logp.grad[0, 2].item() == 0.0
        losses.append(out.loss.item())
    assert losses[0] == pytest.approx(losses[1])


def test_sao_presets():
    cfg = SAO.make_config(preset="coding")
    assert (cfg.dis_eps_low, cfg.dis_eps_high) == (0.8, 3.0)
    cfg = SAO.make_config(preset="math")
    assert (cfg.dis_eps_low, cfg.dis_eps_high) == (0.3, 5.0)
    assert SAO(SAO.make_config(preset="single-critic-update")).critic.updates_per_step == 1
    assert SAO(SAO.make_config(preset="full-parameter-critic")).critic.freeze_attention is False
    dis_only = SAO(SAO.make_config(preset="dis-only")).critic
    assert (dis_only.updates_per_step, dis_only.freeze_attention) == (1, False)
