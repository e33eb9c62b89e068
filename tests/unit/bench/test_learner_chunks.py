"""Learner chunking: a batch above the token budget runs through the models chunk by chunk, and
the accumulated update is the same as the one-piece update, for any plugin loss."""

from __future__ import annotations

import pytest
import torch

from algorithms import registry
from bench.models.logprobs import learner_chunk_tokens, response_logprobs
from bench.models.packing import BucketedBatch
from bench.models.tiny import new_tiny_model
from bench.train.learner import Learner, build_batch
from tests.unit.bench.test_learner_old_logp import _trajectories


def test_token_chunks_cut_rows_shortest_first_within_the_budget():
    # row lengths (prompt + response) 5, 3, 8, 2
    rows = BucketedBatch.build([[1, 1], [1], [1, 1, 1], [1]], [[2] * 3, [2] * 2, [2] * 5, [2]], pad_id=0)
    # shortest first: row 3 (2), row 1 (3) -> 2 x 3 = 6 <= 8; row 0 (5) would make 3 x 5 = 15;
    # row 2 (8) alone is 8, but with row 0 2 x 8 = 16
    assert [c.tolist() for c in rows.token_chunks(8)] == [[3, 1], [0], [2]]
    assert [c.tolist() for c in rows.token_chunks(4 * 8)] == [[0, 1, 2, 3]]  # fits: one chunk, in order
    assert [c.tolist() for c in rows.token_chunks(1)] == [[3], [1], [0], [2]]  # each row its own chunk


def test_map_chunks_gives_the_same_rows_as_map():
    policy, tokenizer = new_tiny_model(0)
    batch = build_batch(_trajectories(tokenizer), tokenizer.pad_token_id, 6)
    fn = lambda packed: response_logprobs(policy, packed, with_entropy=True)  # noqa: E731
    with torch.no_grad():
        whole = batch.rows.map(fn)
        chunked = batch.rows.map_chunks(batch.rows.token_chunks(20), fn)
    assert len(batch.rows.token_chunks(20)) > 2
    for a, b in zip(whole, chunked, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def _learner(algo_name: str, chunk_tokens: int, minibatches: int = 1, **algo_config) -> Learner:
    # a tiny learning rate: AdamW turns rounding noise in a near-zero gradient into a step of ~lr, and
    # later gradients (second minibatch, second step) are compared at weights that moved that much
    torch.manual_seed(0)
    policy, _ = new_tiny_model(0)
    cls = registry.get(algo_name)
    algo = cls(cls.Config(**algo_config))
    return Learner(
        algo,
        policy.train(),
        policy_lr=1e-6,
        critic_lr=1e-6,
        grad_clip=1.0,
        minibatches=minibatches,
        temperature=1.0,
        nan_patience=3,
        chunk_tokens=chunk_tokens,
    )


def _record_gradients(learner: Learner) -> list[list[torch.Tensor]]:
    """Every optimizer step's gradients (policy and critic), in the order the steps happen."""
    seen: list[list[torch.Tensor]] = []
    for opt, model in (
        (learner.policy_opt, learner.unwrapped_policy),
        (learner.critic_opt, learner.unwrapped_critic),
    ):
        if opt is None:
            continue
        step = opt.step

        def recording_step(*args, _step=step, _model=model, **kwargs):
            seen.append(
                [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in _model.parameters()]
            )
            return _step(*args, **kwargs)

        opt.step = recording_step
    return seen


@pytest.mark.parametrize(
    "algo_name, minibatches, config",
    [
        ("grpo", 1, {"group_size": 4}),
        ("grpo", 2, {"group_size": 4, "beta": 0.1}),  # separate old-policy and reference passes
        ("sao", 1, {"critic_warmup_steps": 0}),  # critic values chunked too, K = 2 critic updates
        ("ppo", 2, {}),  # critic and policy minibatches
    ],
)
def test_a_chunked_step_updates_exactly_like_the_whole_batch(algo_name, minibatches, config):
    """Two learner steps with one-row chunks take the same gradients (to float rounding) at every
    optimizer step and log the same metrics as in one piece."""
    _, tokenizer = new_tiny_model(0)
    batch = build_batch(_trajectories(tokenizer), tokenizer.pad_token_id, 6)
    whole, chunked = (_learner(algo_name, n, minibatches, **config) for n in (10**9, 1))
    assert len(batch.rows.token_chunks(chunked.chunk_tokens)) == batch.rows.batch_size
    grads_whole, grads_chunked = _record_gradients(whole), _record_gradients(chunked)
    for _ in range(2):
        m_whole, m_chunked = whole.train_step(batch), chunked.train_step(batch)
    assert m_whole.keys() == m_chunked.keys()
    for key, value in m_whole.items():
        if key.startswith("time/"):  # wall-clock times of the two learners, not part of the update
            continue
        assert m_chunked[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    assert len(grads_whole) == len(grads_chunked) >= 2 * minibatches
    for step_whole, step_chunked in zip(grads_whole, grads_chunked, strict=True):
        scale = max(g.abs().max().item() for g in step_whole)
        for g, h in zip(step_whole, step_chunked, strict=True):
            torch.testing.assert_close(h, g, rtol=0, atol=1e-5 * scale)
    assert chunked.version == whole.version == 2


def test_the_default_budget_follows_the_model_size():
    from types import SimpleNamespace

    tiny, _ = new_tiny_model(0)
    assert learner_chunk_tokens(tiny) > 50_000  # arith and agent batches never chunk
    smollm2 = SimpleNamespace(
        config=SimpleNamespace(
            num_hidden_layers=30, hidden_size=576, intermediate_size=1536, vocab_size=49152
        )
    )
    # 4 bytes x (30 x (12 x 576 + 4 x 1536) + 2 x 49152) = 1.96 MB per token; 8 GiB / that
    assert learner_chunk_tokens(smollm2) == (8 << 30) // (4 * (30 * (12 * 576 + 4 * 1536) + 2 * 49152))
    assert 4000 < learner_chunk_tokens(smollm2) < 5000
