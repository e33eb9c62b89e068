"""TRL 1.16 as an external oracle: our plugins' losses and gradients against TRL's own loss code.

`GRPOTrainer._compute_loss` (and `RLOOTrainer._compute_loss`) are called unbound with a
lightweight stand-in `self` whose `_get_per_token_logps_and_entropies` returns our random
per-token log-probs, so TRL's loss formulas run on exactly the tensors ours see (float64).
TRL computes group advantages inline, so those are compared with its documented formula
built from the `nanstd` helper it uses.
"""

from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from tests.requires import requires

requires("trl")
from trl.trainer.grpo_trainer import GRPOTrainer  # noqa: E402
from trl.trainer.rloo_trainer import RLOOTrainer  # noqa: E402
from trl.trainer.utils import nanstd  # noqa: E402

from algorithms.advantages import group_center, group_zscore, leave_one_out  # noqa: E402
from algorithms.base import PolicyLossInputs  # noqa: E402
from algorithms.dapo import DAPO  # noqa: E402
from algorithms.dr_grpo import DrGRPO  # noqa: E402
from algorithms.grpo import GRPO  # noqa: E402
from algorithms.gspo import GSPO  # noqa: E402
from algorithms.rloo import RLOO  # noqa: E402

D = torch.float64
B, T = 6, 7
TOL = dict(rtol=1e-6, atol=1e-9)


def batch(seed: int, noise: float):
    """Random float64 batch; rows have 7, 5, 3, 1, 6 and 4 completion tokens."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([7, 5, 3, 1, 6, 4])
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(D)  # [B, T]
    logp = -2.0 * torch.rand(B, T, generator=g, dtype=D)  # [B, T]
    old = logp + noise * torch.randn(B, T, generator=g, dtype=D)  # [B, T]
    ref = logp + 0.3 * torch.randn(B, T, generator=g, dtype=D)  # [B, T]
    adv = torch.randn(B, generator=g, dtype=D)  # [B]
    entropy = torch.rand(B, T, generator=g, dtype=D)  # [B, T]
    return SimpleNamespace(mask=mask, logp=logp, old=old, ref=ref, adv=adv, entropy=entropy)


def stand_in(x, logp, **attrs):
    """The attributes TRL's `_compute_loss` reads, with identity collectives."""
    acc = SimpleNamespace(
        num_processes=1,
        gather=lambda v: v,
        gather_for_metrics=lambda v: v,
        reduce=lambda v, reduction="sum": v,
        sync_gradients=True,
    )
    base = dict(
        _get_per_token_logps_and_entropies=lambda *a, **k: (logp, x.entropy, None),
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        importance_sampling_level="token",
        beta=0.0,
        use_vllm=False,
        args=SimpleNamespace(delta=None, use_bias_correction_kl=False, steps_per_generation=1),
        model=SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1,
        max_completion_length=T,
        accelerator=acc,
        _entropy_bonus_enabled=False,
        aux_loss_enabled=False,
        _metrics=defaultdict(lambda: defaultdict(list)),
    )
    base.update(attrs)
    return SimpleNamespace(**base)


def trl_inputs(x, **extra):
    ids = torch.zeros(B, T, dtype=torch.long)
    return dict(
        prompt_ids=torch.zeros(B, 2, dtype=torch.long),
        prompt_mask=torch.ones(B, 2, dtype=torch.long),
        completion_ids=ids,
        completion_mask=x.mask,
        advantages=x.adv,
        old_per_token_logps=x.old,
        ref_per_token_logps=x.ref,
        **extra,
    )


def trl_grpo_loss(x, **attrs):
    logp = x.logp.clone().requires_grad_(True)
    me = stand_in(x, logp, **attrs)
    loss = GRPOTrainer._compute_loss(me, None, trl_inputs(x, num_items_in_batch=x.mask.sum()))
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach(), grad, me._metrics["train"]


def our_loss(algo, x):
    logp = x.logp.clone().requires_grad_(True)
    inp = PolicyLossInputs(
        logp_B_T=logp,
        rollout_logp_B_T=x.old,
        advantages_B_T=x.adv[:, None] * x.mask,
        action_mask_B_T=x.mask,
        old_logp_B_T=x.old,
        ref_logp_B_T=x.ref,
        entropy_B_T=x.entropy,
    )
    out = algo.policy_loss(inp)
    (grad,) = torch.autograd.grad(out.loss, logp)
    return out.loss.detach(), grad, out.metrics


def check(ours, theirs):
    (l1, g1, _), (l2, g2, _) = ours, theirs
    torch.testing.assert_close(l1, l2, **TOL)
    torch.testing.assert_close(g1, g2, **TOL)


@pytest.mark.parametrize("seed", [0, 1])
def test_grpo_matches_trl_grpo(seed):
    x = batch(seed, noise=0.3)  # ratios spread well past 1 +- 0.2: every clip case occurs
    ours = our_loss(GRPO(), x)
    theirs = trl_grpo_loss(x, loss_type="grpo", epsilon_low=0.2, epsilon_high=0.2)
    check(ours, theirs)
    assert ours[2]["policy/clip_frac"] == pytest.approx(theirs[2]["clip_ratio/region_mean"][0])
    assert 0.0 < ours[2]["policy/clip_frac"] < 1.0
    assert ours[2]["policy/entropy"] == pytest.approx(theirs[2]["entropy"][0])


def test_grpo_with_kl_matches_trl():
    x = batch(2, noise=0.3)
    ours = our_loss(GRPO(GRPO.make_config(beta=0.04)), x)
    theirs = trl_grpo_loss(x, loss_type="grpo", epsilon_low=0.2, epsilon_high=0.2, beta=0.04)
    check(ours, theirs)
    assert ours[2]["policy/ref_kl"] == pytest.approx(theirs[2]["kl"][0])


def test_dapo_matches_trl_dapo():
    x = batch(3, noise=0.3)
    ours = our_loss(DAPO(), x)
    theirs = trl_grpo_loss(x, loss_type="dapo", epsilon_low=0.2, epsilon_high=0.28)
    check(ours, theirs)


def test_dr_grpo_matches_trl_dr_grpo():
    x = batch(4, noise=0.3)
    ours = our_loss(DrGRPO(DrGRPO.make_config(norm_length=10)), x)
    theirs = trl_grpo_loss(
        x, loss_type="dr_grpo", epsilon_low=0.2, epsilon_high=0.2, max_completion_length=10
    )
    check(ours, theirs)


def test_gspo_matches_trl_sequence_level():
    x = batch(5, noise=1e-3)  # sequence ratios near 1: some inside 1 - 3e-4 .. 1 + 4e-4, some clipped
    ours = our_loss(GSPO(), x)
    theirs = trl_grpo_loss(
        x, loss_type="grpo", epsilon_low=3e-4, epsilon_high=4e-4, importance_sampling_level="sequence"
    )
    check(ours, theirs)
    moved = (ours[1].abs().sum(-1) > 0).sum().item()
    assert 0 < moved < B  # both clipped and unclipped sequences are exercised


def test_rloo_trl_preset_matches_trl_rloo():
    x = batch(6, noise=0.1)
    ours = our_loss(RLOO(RLOO.make_config(preset="trl")), x)
    logp = x.logp.clone().requires_grad_(True)
    me = stand_in(x, logp, epsilon_low=0.2, epsilon_high=0.2)
    inputs = trl_inputs(x, old_logps=(x.old * x.mask).sum(1))
    loss = RLOOTrainer._compute_loss(me, None, inputs)
    (grad,) = torch.autograd.grad(loss, logp)
    check(ours, (loss.detach(), grad, None))


def test_group_advantages_match_trl_formulas():
    # TRL's GRPOTrainer (scale_rewards="group"): (r - nanmean_G) / (nanstd_G + 1e-4);
    # scale_rewards="none" (Dr.GRPO): r - nanmean_G; RLOOTrainer: r - (sum_G - r) / (G - 1).
    g = torch.Generator().manual_seed(7)
    G = 4
    rewards = torch.randint(0, 3, (12,), generator=g).to(D)
    grouped = rewards.view(-1, G)
    mean = torch.nanmean(grouped, dim=1).repeat_interleave(G)
    std = nanstd(grouped, dim=1).repeat_interleave(G)
    torch.testing.assert_close(group_zscore(rewards, G), (rewards - mean) / (std + 1e-4))
    torch.testing.assert_close(group_center(rewards, G), rewards - mean)
    loo = (grouped.sum(1, keepdim=True) - grouped) / (G - 1)
    torch.testing.assert_close(leave_one_out(rewards, G), rewards - loo.view(-1))
