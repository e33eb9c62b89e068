"""Length buckets: the partition is the cheapest one, and bucketed forwards give the same
log-probs, values and gradients as one padded batch."""

from __future__ import annotations

import itertools
import random

import torch

from bench.models.critic import ValueModel
from bench.models.logprobs import response_logprobs
from bench.models.packing import BucketedBatch, length_buckets, pack
from bench.models.tiny import new_tiny_model


def _cost(buckets: list[list[int]], lengths: list[int], overhead: int) -> int:
    return sum(len(b) * max(lengths[i] for i in b) + overhead for b in buckets)


def test_hand_computed_partition():
    # one bucket: 3 * 100 + 128 = 428; {10, 10} + {100}: 20 + 128 + 100 + 128 = 376
    assert length_buckets([10, 100, 10], overhead_tokens=128) == [[0, 2], [1]]
    # a large overhead keeps one bucket: 300 + 1000 < 120 + 2000
    assert length_buckets([10, 100, 10], overhead_tokens=1000) == [[0, 2, 1]]
    assert length_buckets([]) == []


def test_partition_is_optimal_against_brute_force():
    rng = random.Random(0)
    for _ in range(30):
        lengths = [rng.randint(1, 60) for _ in range(rng.randint(1, 7))]
        overhead = rng.choice([0, 5, 40])
        got = length_buckets(lengths, overhead_tokens=overhead)
        assert sorted(i for b in got for i in b) == list(range(len(lengths)))
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        best = min(  # every split of the sorted rows into contiguous runs
            _cost([order[a:b] for a, b in itertools.pairwise((0, *cuts, len(order)))], lengths, overhead)
            for k in range(len(order))
            for cuts in itertools.combinations(range(1, len(order)), k)
        )
        assert _cost(got, lengths, overhead) == best


def _rows(seed: int, batch: int) -> tuple[list[list[int]], list[list[int]]]:
    rng = random.Random(seed)
    prompts = [[1] + [rng.randint(4, 40) for _ in range(rng.randint(1, 9))] for _ in range(batch)]
    # heavy tail: most responses short, a few long
    responses = [[rng.randint(4, 40) for _ in range(rng.choice([2, 3, 5, 8, 40]))] for _ in range(batch)]
    return prompts, responses


def test_bucketed_logprobs_values_and_gradients_match_one_padded_batch():
    torch.manual_seed(0)
    policy, _ = new_tiny_model(0)
    critic = ValueModel.from_policy(policy)
    torch.nn.init.normal_(critic.value_head.weight, std=0.1)
    prompts, responses = _rows(0, 12)
    packed = pack(prompts, responses, 0)
    rows = BucketedBatch.build(prompts, responses, 0)
    assert len(rows.buckets) > 1  # the long rows are split off

    weights_B_T = torch.randn(packed.response_mask_B_T.shape)

    def objective(logp, entropy, values):
        return (logp * weights_B_T).sum() + entropy.sum() + (values * weights_B_T).sum()

    logp, entropy = response_logprobs(policy, packed, with_entropy=True)
    values = critic(packed)
    objective(logp, entropy, values).backward()
    expected_grads = [p.grad.clone() for p in [*policy.parameters(), *critic.parameters()]]
    policy.zero_grad(), critic.zero_grad()

    b_logp, b_entropy = rows.map(lambda p: response_logprobs(policy, p, with_entropy=True))
    b_values = rows.map(critic)
    torch.testing.assert_close(b_logp, logp, rtol=0, atol=1e-5)
    torch.testing.assert_close(b_entropy, entropy, rtol=0, atol=1e-5)
    torch.testing.assert_close(b_values, values, rtol=0, atol=1e-5)
    objective(b_logp, b_entropy, b_values).backward()
    for got, want in zip([p.grad for p in [*policy.parameters(), *critic.parameters()]], expected_grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_select_keeps_the_batch_width_and_row_order():
    policy, _ = new_tiny_model(0)
    prompts, responses = _rows(1, 10)
    rows = BucketedBatch.build(prompts, responses, 0)
    picked = torch.tensor([7, 2, 9])
    sub = rows.select(picked)
    with torch.no_grad():
        full = rows.map(lambda p: response_logprobs(policy, p)[0])
        part = sub.map(lambda p: response_logprobs(policy, p)[0])
    assert part.shape == (3, rows.response_len)
    torch.testing.assert_close(part, full[picked], rtol=0, atol=1e-5)


def test_unbucketed_is_one_plain_pack():
    prompts, responses = _rows(2, 6)
    rows = BucketedBatch.build(prompts, responses, 0, bucketed=False)
    assert len(rows.buckets) == 1
    torch.testing.assert_close(rows.buckets[0][1].input_ids_B_L, pack(prompts, responses, 0).input_ids_B_L)
