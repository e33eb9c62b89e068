"""Data-parallel ranks whose batches split into different numbers of length buckets.

Every rank packs its own rollouts into length buckets, so one rank may run two forwards where
another runs one. Any collective inside a forward (DDP's buffer broadcast was one) then pairs
with a different collective on the other rank: the run hangs, or gloo aborts on mismatched
sizes (seen in CI as a SIGABRT in `accelerate launch`); under FSDP2 every forward is a collective,
so the ranks agree on their bucket counts (`BucketedBatch.agree`). Here the mismatch is forced.
"""

from __future__ import annotations

import os
import random
import socket
import time

import pytest
import torch
import torch.multiprocessing as mp

RESPONSE_LENGTHS = {0: [4] * 7 + [120], 1: [4] * 8}  # rank 0: two buckets, rank 1: one


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, port: int, results) -> None:
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE="2",
        LOCAL_WORLD_SIZE="2",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        ACCELERATE_USE_CPU="1",
    )
    from algorithms import registry
    from bench.models.tiny import new_tiny_model
    from bench.rollout.episode import Trajectory
    from bench.train.learner import Learner, build_batch

    torch.manual_seed(0)  # same initial weights on both ranks
    policy, tokenizer = new_tiny_model(0)
    sao = registry.get("sao")
    learner = Learner(
        sao(sao.Config(critic_warmup_steps=0)),
        policy.train(),
        policy_lr=1e-3,
        critic_lr=1e-3,
        grad_clip=1.0,
        minibatches=1,
        temperature=1.0,
        nan_patience=3,
    )
    rng = random.Random(rank)  # different rollouts per rank, as in a real run
    trajectories = []
    for i, n in enumerate(RESPONSE_LENGTHS[rank]):
        response = [rng.randrange(5, 40) for _ in range(n)]
        trajectories.append(
            Trajectory(
                prompt_key=f"p{i}",
                group_id=i,
                prompt_ids=[tokenizer.bos_token_id, 7, 8],
                response_ids=response,
                action_mask=[1] * n,
                rollout_logp=[-1.0] * n,
                versions=[0] * n,
                reward=float(i % 2),
            )
        )
    batch = build_batch(trajectories, tokenizer.pad_token_id, max_response_tokens=128)
    for _ in range(2):
        learner.train_step(batch)
    results.put((rank, len(batch.rows.buckets), learner.version, learner.policy_checksums()))
    learner.dist.close()  # as bench.train.loop.train does: without it a rank may abort at exit


@pytest.mark.slow
def test_ranks_with_different_bucket_counts_train_in_step():
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    ranks = [ctx.Process(target=_rank_main, args=(r, port, results)) for r in range(2)]
    for p in ranks:
        p.start()
    deadline = time.monotonic() + 120
    for p in ranks:
        p.join(max(0.0, deadline - time.monotonic()))
    hung = [p.pid for p in ranks if p.is_alive()]
    for p in ranks:
        if p.is_alive():
            p.kill()
    assert not hung, "data-parallel ranks hung (a collective ran on one rank only)"
    assert [p.exitcode for p in ranks] == [0, 0]
    by_rank = {r: rest for r, *rest in (results.get(timeout=5) for _ in ranks)}
    assert by_rank[0][0] == 2 and by_rank[1][0] == 1  # the mismatch this test is about
    assert by_rank[0][1] == by_rank[1][1] == 2  # both ranks updated the policy twice
    checksums = by_rank[0][2]
    assert checksums == by_rank[1][2] and checksums[0] == checksums[1]
