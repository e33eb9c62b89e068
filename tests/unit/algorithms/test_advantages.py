"""Unit tests of algorithms/advantages.py: hand-computed numbers and a slow GAE reference."""

from __future__ import annotations

import json

import pytest
import torch

from algorithms.advantages import (
    RunningMeanBaseline,
    batch_zscore,
    broadcast_to_tokens,
    gae,
    group_center,
    group_zscore,
    leave_one_out,
    length_adaptive_lambda,
    masked_whiten,
    outcome_rewards_to_tokens,
    step_level_gae,
)

D = torch.float64


def close(actual: torch.Tensor, expected: list, atol: float = 1e-10) -> None:
    """Assert that `actual` equals the literal `expected` (float64 comparison)."""
    torch.testing.assert_close(actual.to(D), torch.tensor(expected, dtype=D), atol=atol, rtol=0)


# ---- group statistics ---------------------------------------------------------------------


def test_group_zscore_hand_computed():
    r = torch.tensor([1.0, 0, 0, 1, 1, 1, 1, 1], dtype=D)
    # group 1: mean 0.5, unbiased std sqrt(4 * 0.25 / 3) = 0.5773502691896257,
    #          0.5 / (0.5773502691896257 + 1e-4) = 0.8658754297607016
    # group 2: all equal -> 0 / (0 + 1e-4) = 0
    a = 0.8658754297607016
    close(group_zscore(r, 4), [a, -a, -a, a, 0, 0, 0, 0])


def test_group_zscore_group_of_one_is_zero_and_shape_checks():
    close(group_zscore(torch.tensor([3.0, -1.0]), 1), [0.0, 0.0])
    with pytest.raises(ValueError):
        group_zscore(torch.tensor([1.0, 2.0, 3.0]), 2)


def test_group_center_hand_computed():
    r = torch.tensor([1.0, 0, 0, 1, 3, 1, 2, 2], dtype=D)
    # means 0.5 and 2.0
    close(group_center(r, 4), [0.5, -0.5, -0.5, 0.5, 1, -1, 0, 0])


def test_batch_zscore_hand_computed():
    # mean 2, unbiased std 1 -> +-1 / (1 + 1e-4)
    close(batch_zscore(torch.tensor([1.0, 2.0, 3.0], dtype=D)), [-1 / 1.0001, 0.0, 1 / 1.0001])
    close(batch_zscore(torch.tensor([5.0], dtype=D)), [0.0])


def test_leave_one_out_hand_computed():
    r = torch.tensor([1.0, 2, 6, 0, 0, 3], dtype=D)
    # group [1, 2, 6]: others' means 4, 3.5, 1.5 -> -3, -1.5, 4.5
    # group [0, 0, 3]: others' means 1.5, 1.5, 0 -> -1.5, -1.5, 3
    close(leave_one_out(r, 3), [-3, -1.5, 4.5, -1.5, -1.5, 3])
    with pytest.raises(ValueError):
        leave_one_out(r, 1)


def test_length_adaptive_lambda_hand_computed():
    lam = length_adaptive_lambda(torch.tensor([0.0, 0.5, 1, 2, 10], dtype=D), alpha=1.5)
    # l=0 -> 0; l=0.5: 1 - 1/0.75 = -1/3 -> clamped 0; l=1: 1 - 1/1.5 = 1/3;
    # l=2: 1 - 1/3 = 2/3; l=10: 1 - 1/15 = 14/15
    close(lam, [0.0, 0.0, 1 / 3, 2 / 3, 14 / 15])
    assert length_adaptive_lambda(torch.tensor([0, 3])).dtype == torch.get_default_dtype()


def test_broadcast_and_outcome_rewards_to_tokens():
    mask = torch.tensor([[1, 1, 0, 0, 1, 1, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0], [0] * 8], dtype=torch.float32)
    vals = torch.tensor([2.0, 3.0, 4.0])
    close(broadcast_to_tokens(vals, mask), [[2, 2, 0, 0, 2, 2, 0, 0], [3, 0, 0, 0, 0, 0, 0, 0], [0] * 8])
    out = outcome_rewards_to_tokens(vals, mask)
    # last valid index: row 0 -> 5, row 1 -> 0, row 2 (empty mask) -> nowhere
    close(out, [[0, 0, 0, 0, 0, 2, 0, 0], [3, 0, 0, 0, 0, 0, 0, 0], [0] * 8])
    assert out.dtype == torch.float32


def test_masked_whiten_hand_computed():
    x = torch.tensor([[1.0, 2.0, float("nan")], [3.0, 50.0, 0.0]], dtype=D)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=D)
    # valid values 1, 2, 3: mean 2, unbiased var 1; scale 1/sqrt(1 + 1e-8) = 0.999999995
    c = 0.999999995
    close(masked_whiten(x, mask), [[-c, 0, 0], [c, 0, 0]], atol=1e-12)
    close(masked_whiten(x, mask, shift_mean=False), [[2 - c, 2, 0], [2 + c, 0, 0]], atol=1e-12)
    close(masked_whiten(x, torch.zeros_like(mask)), [[0, 0, 0], [0, 0, 0]])


# ---- GAE ----------------------------------------------------------------------------------


def slow_gae(rewards, values, mask, gamma, lam, dones=None):
    """Textbook reference: loop over rows, compact the valid positions, recurse backward, scatter."""
    B, T = mask.shape
    g = torch.as_tensor(gamma, dtype=D).broadcast_to(B, T)
    lm = torch.as_tensor(lam, dtype=D).broadcast_to(B, T)
    adv = torch.zeros(B, T, dtype=D)
    ret = torch.zeros(B, T, dtype=D)
    for b in range(B):
        idx = [t for t in range(T) if mask[b, t] > 0]
        a_list = [0.0] * len(idx)
        for j in range(len(idx) - 1, -1, -1):
            t = idx[j]
            terminal = j == len(idx) - 1 or (dones is not None and dones[b, t] > 0)
            next_v = 0.0 if terminal else float(values[b, idx[j + 1]])
            next_a = 0.0 if terminal else a_list[j + 1]
            delta = float(rewards[b, t]) + float(g[b, t]) * next_v - float(values[b, t])
            a_list[j] = delta + float(g[b, t]) * float(lm[b, t]) * next_a
        for j, t in enumerate(idx):
            adv[b, t] = a_list[j]
            ret[b, t] = a_list[j] + float(values[b, t])
    return adv, ret


def test_gae_matches_slow_reference_random():
    gen = torch.Generator().manual_seed(1234)
    for trial in range(40):
        B = int(torch.randint(1, 6, (1,), generator=gen))
        T = int(torch.randint(1, 17, (1,), generator=gen))
        mask = (torch.rand(B, T, generator=gen) < 0.6).to(D)
        rewards = torch.randn(B, T, generator=gen, dtype=D)
        values = torch.randn(B, T, generator=gen, dtype=D)
        kind = trial % 4
        if kind == 0:  # python floats
            gamma, lam = 0.9, 0.7
        elif kind == 1:  # 0-d tensors
            gamma, lam = torch.tensor(0.95, dtype=D), torch.tensor(0.5, dtype=D)
        elif kind == 2:  # per-sequence
            gamma = torch.rand(B, 1, generator=gen, dtype=D)
            lam = torch.rand(B, 1, generator=gen, dtype=D)
        else:  # per-token
            gamma = torch.rand(B, T, generator=gen, dtype=D)
            lam = torch.rand(B, T, generator=gen, dtype=D)
        dones = (torch.rand(B, T, generator=gen) < 0.2).to(D) if trial % 2 else None
        adv, ret = gae(rewards, values, mask, gamma, lam, dones)
        ref_adv, ref_ret = slow_gae(rewards, values, mask, gamma, lam, dones)
        torch.testing.assert_close(adv, ref_adv, atol=1e-10, rtol=0)
        torch.testing.assert_close(ret, ref_ret, atol=1e-10, rtol=0)


def test_gae_skip_observation_hand_computed():
    # T=6: [a, a, o, o, a, a]; the observation values (9.0) must never be read.
    mask = torch.tensor([[1, 1, 0, 0, 1, 1]], dtype=D)
    values = torch.tensor([[0.2, 0.4, 9.0, 9.0, 0.5, 0.9]], dtype=D)
    rewards = outcome_rewards_to_tokens(torch.tensor([1.0], dtype=D), mask)  # reward 1 at t=5
    # gamma = 1, lam = 0.5; valid positions 0, 1, 4, 5 (1 links to 4):
    # t=5: delta = 1 + 0 - 0.9 = 0.1;     A5 = 0.1                  R5 = 0.1 + 0.9 = 1.0
    # t=4: delta = 0 + 0.9 - 0.5 = 0.4;   A4 = 0.4 + 0.5*0.1 = 0.45   R4 = 0.45 + 0.5 = 0.95
    # t=1: delta = 0 + 0.5 - 0.4 = 0.1;   A1 = 0.1 + 0.5*0.45 = 0.325 R1 = 0.325 + 0.4 = 0.725
    # t=0: delta = 0 + 0.4 - 0.2 = 0.2;   A0 = 0.2 + 0.5*0.325 = 0.3625 R0 = 0.3625 + 0.2 = 0.5625
    adv, ret = gae(rewards, values, mask, gamma=1.0, lam=0.5)
    close(adv, [[0.3625, 0.325, 0, 0, 0.45, 0.1]], atol=1e-12)
    close(ret, [[0.5625, 0.725, 0, 0, 0.95, 1.0]], atol=1e-12)
    # a done at t=1 cuts the link to t=4: A1 = 0 + 0 - 0.4 = -0.4, A0 = 0.2 + 0.5*(-0.4) = 0.0
    dones = torch.tensor([[0, 1, 0, 0, 0, 0]], dtype=D)
    adv, ret = gae(rewards, values, mask, gamma=1.0, lam=0.5, dones_B_T=dones)
    close(adv, [[0.0, -0.4, 0, 0, 0.45, 0.1]], atol=1e-12)
    close(ret, [[0.2, 0.0, 0, 0, 0.95, 1.0]], atol=1e-12)


def test_gae_lambda_one_is_monte_carlo_minus_value():
    gen = torch.Generator().manual_seed(7)
    B, T = 4, 12
    lengths = torch.tensor([12, 7, 1, 0])
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(D)  # contiguous, right-padded
    rewards = torch.randn(B, T, generator=gen, dtype=D) * mask
    values = torch.randn(B, T, generator=gen, dtype=D)
    adv, ret = gae(rewards, values, mask, gamma=1.0, lam=1.0)
    mc = rewards.flip(-1).cumsum(-1).flip(-1)  # sum of rewards from t to the end
    torch.testing.assert_close(ret, mc * mask, atol=1e-10, rtol=0)
    torch.testing.assert_close(adv, (mc - values) * mask, atol=1e-10, rtol=0)


def test_gae_dtype_and_no_grad():
    values = torch.randn(2, 5, requires_grad=True)
    rewards = torch.randn(2, 5, requires_grad=True)
    mask = torch.ones(2, 5)
    lam = length_adaptive_lambda(mask.sum(-1))[:, None]  # [B, 1]
    adv, ret = gae(rewards, values, mask, 1.0, lam)
    assert adv.dtype == ret.dtype == torch.float32
    assert not adv.requires_grad and not ret.requires_grad


# ---- running-mean baseline ----------------------------------------------------------------


def test_running_mean_no_self_baselining_and_first_visit_fallback():
    b = RunningMeanBaseline(window=8, scope="prompt")
    # empty history -> baseline 0; both members of the batch use only prior history
    close(b.advantages(["a", "a"], torch.tensor([1.0, 0.0], dtype=D)), [1.0, 0.0])
    # "a" history [1, 0] -> 0.5; "b" is new -> global recent mean 0.5
    close(b.advantages(["a", "b"], torch.tensor([1.0, 1.0], dtype=D)), [0.5, 0.5])
    # "b" history [1] -> 1.0; "c" new -> global mean of [1, 0, 1, 1] = 0.75
    close(b.advantages(["b", "c"], torch.tensor([0.0, 0.0], dtype=D)), [-1.0, -0.75])


def test_running_mean_window_eviction_and_scopes():
    b = RunningMeanBaseline(window=2, scope="prompt")
    for r in (1.0, 2.0, 3.0):
        b.advantages(["a"], torch.tensor([r]))
    b.advantages(["z"], torch.tensor([100.0]))
    close(b.advantages(["a"], torch.tensor([0.0])), [-2.5])  # mean of the last 2 of "a": (2 + 3) / 2

    g = RunningMeanBaseline(window=3, scope="global")
    g.advantages(["a", "b", "c", "d"], torch.tensor([1.0, 2.0, 3.0, 4.0]))
    close(g.advantages(["a"], torch.tensor([0.0])), [-3.0])  # last 3 overall: (2 + 3 + 4) / 3
    with pytest.raises(ValueError, match="prompt, global"):
        RunningMeanBaseline(scope="batch")


def test_running_mean_state_dict_round_trip():
    b = RunningMeanBaseline(window=3, scope="prompt")
    b.advantages(["a", "b", "a"], torch.tensor([1.0, 0.0, 0.5]))
    state = json.loads(json.dumps(b.state_dict()))
    c = RunningMeanBaseline(window=3, scope="prompt")
    c.load_state_dict(state)
    assert c.state_dict() == b.state_dict()
    keys, r = ["a", "b", "new"], torch.tensor([0.0, 1.0, 0.25])
    close(c.advantages(keys, r), b.advantages(keys, r).tolist())


def _step_level_reference(reward, values, mask, gamma, lam, step_value):
    """Slow step-level GAE: split the row into steps by hand, recurse over them in Python."""
    steps, current = [], []
    for t, m in enumerate(mask):
        if m:
            current.append(t)
        elif current:
            steps.append(current)
            current = []
    if current:
        steps.append(current)
    v = [sum(values[t] for t in s) / len(s) if step_value == "mean" else values[s[-1]] for s in steps]
    adv, ret = [0.0] * len(mask), [0.0] * len(mask)
    next_v = next_a = 0.0
    for i in range(len(steps) - 1, -1, -1):
        r = reward if i == len(steps) - 1 else 0.0
        a = r + gamma * next_v - v[i] + gamma * lam * next_a
        for t in steps[i]:
            adv[t], ret[t] = a, a + v[i]
        next_v, next_a = v[i], a
    return adv, ret


def test_step_level_gae_hand_computed():
    # steps: tokens 1-2 and 5-7, V mean (2, 4), last (3, 6); reward 1, gamma 1, lambda 0.5
    #   mean: A1 = 1 - 4 = -3, A0 = 4 - 2 + 0.5 * -3 = 0.5; returns A + V: 2.5, 1
    #   last: A1 = 1 - 6 = -5, A0 = 6 - 3 + 0.5 * -5 = 0.5; returns 3.5, 1
    mask = torch.tensor([[0, 1, 1, 0, 0, 1, 1, 1]], dtype=D)
    values = torch.tensor([[9, 1, 3, 9, 9, 2, 4, 6]], dtype=D)
    adv, ret = step_level_gae(torch.tensor([1.0], dtype=D), values, mask, 1.0, 0.5, "mean")
    close(adv, [[0, 0.5, 0.5, 0, 0, -3, -3, -3]])
    close(ret, [[0, 2.5, 2.5, 0, 0, 1, 1, 1]])
    adv, ret = step_level_gae(torch.tensor([1.0], dtype=D), values, mask, 1.0, 0.5, "last")
    close(adv, [[0, 0.5, 0.5, 0, 0, -5, -5, -5]])
    close(ret, [[0, 3.5, 3.5, 0, 0, 1, 1, 1]])
    with pytest.raises(ValueError, match="step_value"):
        step_level_gae(torch.tensor([1.0]), values, mask, 1.0, 0.5, "first")


@pytest.mark.parametrize("step_value", ["mean", "last"])
def test_step_level_gae_matches_slow_reference_random(step_value):
    gen = torch.Generator().manual_seed(7)
    B, T = 6, 13
    mask = (torch.rand(B, T, generator=gen) > 0.4).to(D)
    mask[0] = 0  # a row without action tokens
    values = torch.randn(B, T, generator=gen, dtype=D)
    rewards = torch.randn(B, generator=gen, dtype=D)
    lam = torch.rand(B, 1, generator=gen, dtype=D)
    adv, ret = step_level_gae(rewards, values, mask, 0.9, lam, step_value)
    for b in range(B):
        ref_adv, ref_ret = _step_level_reference(
            rewards[b].item(), values[b].tolist(), mask[b].tolist(), 0.9, lam[b, 0].item(), step_value
        )
        close(adv[b], ref_adv)
        close(ret[b], ref_ret)
