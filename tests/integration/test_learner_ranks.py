"""The FSDP2 learner on 2 CPU ranks (gloo, spawned processes) against the one-process learner on
the same global batch: every built-in algorithm's step gives the same gradients and metrics;
a checkpoint saved on 2 ranks resumes on 1 and on 2 with equal weights and optimizer state,
and the next step goes on as it would have.

Tolerance: `RANKS_TOLERANCE` relative, float32 summation order (each rank forwards its own
length buckets; the ranks' gradients are summed in another order than one backward sums them).
"""

from __future__ import annotations

import io
import os
import queue
import random
import socket
import time

import pytest
import torch
import torch.multiprocessing as mp

from algorithms import registry
from bench.rollout.episode import Trajectory

RANKS = 2
GLOBAL_BATCH = 16  # groups of 4: each rank trains 2 whole groups
RANKS_TOLERANCE = 1e-4
"""Relative L2 distance allowed between a 2-rank and a 1-process gradient (measured: < 1e-6)."""
pytestmark = pytest.mark.slow


def global_batch(tokenizer, policy) -> list[Trajectory]:
    """16 trajectories in groups of 4 (rows of different lengths, so ranks bucket differently);
    rollout log-probs: the initial policy's own plus noise, so importance ratios are not all 1."""
    from bench.models.logprobs import response_logprobs
    from bench.models.packing import pack

    rng = random.Random(0)
    out = []
    for i in range(GLOBAL_BATCH):
        prompt = [tokenizer.bos_token_id] + tokenizer.encode(
            f"{i // 4 + 2}*{i % 3 + 3}=?\n", add_special_tokens=False
        )
        response = tokenizer.encode(
            "".join(rng.choice("0123456789 \n") for _ in range(rng.randint(2, 14))), add_special_tokens=False
        )
        with torch.no_grad():
            logp = response_logprobs(policy, pack([prompt], [response], tokenizer.pad_token_id))[0][0]
        noisy = (logp + 0.1 * torch.randn(len(response), generator=torch.Generator().manual_seed(i))).tolist()
        out.append(
            Trajectory(
                prompt_key=f"p{i // 4}",
                group_id=i // 4,
                prompt_ids=prompt,
                response_ids=response,
                action_mask=[1] * len(response),
                rollout_logp=noisy,
                versions=[0] * len(response),
                reward=float((i * 7) % 3 == 0),
            )
        )
    return out


def make_learner(name: str):
    """(learner, tokenizer, the global batch): the same initial weights in every process."""
    from bench.models.tiny import new_tiny_model
    from bench.train.learner import Learner

    torch.manual_seed(0)
    policy, tokenizer = new_tiny_model(0)
    batch = global_batch(tokenizer, policy)
    cls = registry.get(name)
    fields = cls.Config.__dataclass_fields__
    extra = {k: v for k, v in {"group_size": 4, "critic_warmup_steps": 0}.items() if k in fields}
    learner = Learner(
        cls(cls.Config(**extra)), policy.train(), policy_lr=1e-3, critic_lr=1e-3, chunk_tokens=0
    )
    return learner, tokenizer, batch


def record_gradients(learner) -> list[torch.Tensor]:
    """Each optimizer step's gradient (every parameter of its model, one float32 vector, whole)."""
    from bench.train.learner import _full

    seen: list[torch.Tensor] = []
    for model, opt in ((learner.policy, learner.policy_opt), (learner.critic, learner.critic_opt)):
        if opt is None:
            continue
        step = opt.step

        def recording(*a, _step=step, _model=model, **k):
            grads = [_full(p.grad).float().flatten() for p in _model.parameters() if p.grad is not None]
            seen.append(torch.cat(grads))
            return _step(*a, **k)

        opt.step = recording
    return seen


def full_weights(learner) -> dict[str, torch.Tensor]:
    """Policy and critic weights, whole, and the AdamW moments by parameter name."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    from bench.train.sharding import full_state

    out = {f"policy.{k}": v.detach().clone() for k, v in full_state(learner.policy)}
    if learner.critic is not None:
        out |= {f"critic.{k}": v.detach().clone() for k, v in full_state(learner.critic)}
    options = StateDictOptions(full_state_dict=True)
    for name, model, opt in (
        ("policy", learner.policy, learner.policy_opt),
        ("critic", learner.critic, learner.critic_opt),
    ):
        if opt is not None:
            state = get_optimizer_state_dict(model, opt, options=options)["state"]
            out |= {f"{name}_opt.{k}.exp_avg": v["exp_avg"].clone() for k, v in state.items()}
    return out


def local_rows(batch: list, rank: int) -> list:
    share = len(batch) // RANKS
    return batch[rank * share : (rank + 1) * share]


def _put(results, rank: int, name: str, metrics, payload) -> None:
    """A report through the queue as bytes: tensors sent as tensors would live in this rank's
    shared memory, gone (and the report lost) once the rank exits before the test reads it."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    results.put((rank, name, metrics, buffer.getvalue()))


def _rank_main(rank: int, port: int, task: str, run_path: str, results) -> None:
    launched = {"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": RANKS, "LOCAL_WORLD_SIZE": RANKS}
    os.environ.update(
        {k: str(v) for k, v in launched.items()}, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    from bench.train.batch import build_batch
    from bench.train.checkpoints import restore_learner, save_checkpoint
    from bench.train.distributed import current_dist
    from results.rundir import RunDir

    dist = current_dist()
    names = list(registry.BUILTINS) if task == "steps" else []
    for name in names:
        learner, tokenizer, batch = make_learner(name)
        grads = record_gradients(learner)
        metrics = learner.train_step(build_batch(local_rows(batch, rank), tokenizer.pad_token_id, 16))
        _put(results, rank, name, metrics, grads if rank == 0 else None)
    learner, tokenizer, batch = make_learner("sao")
    local = build_batch(local_rows(batch, rank), tokenizer.pad_token_id, 16)
    run = RunDir(run_path)
    if task == "steps":  # save after one step
        learner.train_step(local)
        save_checkpoint(run, learner, tokenizer, 1, keep_last=0)
        saved = full_weights(learner)
        _put(results, rank, "saved", None, saved if rank == 0 else None)
    else:  # resume on 2 ranks
        restore_learner(learner, run.checkpoint_dir(1))
        resumed = full_weights(learner)  # a collective: every rank gathers, rank 0 reports
        _put(results, rank, "resumed", None, resumed if rank == 0 else None)
    metrics = learner.train_step(local)
    after = full_weights(learner)
    _put(results, rank, "next", metrics, after if rank == 0 else None)
    dist.close()


def run_ranks(task: str, run_path: str) -> dict:
    """Start 2 ranks on `task`; rank 0's reports by name."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ranks = [ctx.Process(target=_rank_main, args=(r, port, task, run_path, results)) for r in range(RANKS)]
    for p in ranks:
        p.start()
    reports: dict = {}
    deadline = time.monotonic() + 900
    expected = RANKS * ((len(registry.BUILTINS) if task == "steps" else 0) + 2)
    while len(reports) < expected and time.monotonic() < deadline:
        try:
            rank, name, metrics, payload = results.get(timeout=5)
        except queue.Empty:  # check that the ranks still live
            if all(p.exitcode is not None for p in ranks) or any(p.exitcode for p in ranks):
                break
            continue
        reports[(rank, name)] = (metrics, torch.load(io.BytesIO(payload), weights_only=False))
    for p in ranks:
        p.join(30)
        if p.is_alive():
            p.kill()
    assert [p.exitcode for p in ranks] == [0] * RANKS, "a rank failed (its traceback is above)"
    assert len(reports) == expected, f"missing reports: {expected - len(reports)}"
    return {name: value for (rank, name), value in reports.items() if rank == 0}


def _close(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-12))


def _same_metrics(got: dict, want: dict) -> None:
    for key, value in want.items():
        if key.startswith("time/"):
            continue
        assert got[key] == pytest.approx(value, rel=RANKS_TOLERANCE, abs=1e-6), key


def _same_weights(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=RANKS_TOLERANCE, atol=1e-6, msg=key)


def test_two_ranks_step_and_checkpoint_as_one_process(tmp_path):
    from bench.train.batch import build_batch
    from bench.train.checkpoints import restore_learner
    from results.rundir import RunDir

    RunDir.create(tmp_path / "run", {}, {})
    reports = run_ranks("steps", str(tmp_path / "run"))
    for name in registry.BUILTINS:  # one step of each algorithm: the one-process step
        learner, tokenizer, batch = make_learner(name)
        grads = record_gradients(learner)
        metrics = learner.train_step(build_batch(batch, tokenizer.pad_token_id, 16))
        ranks_metrics, ranks_grads = reports[name]
        _same_metrics(ranks_metrics, metrics)
        assert len(ranks_grads) == len(grads) > 0
        for got, want in zip(ranks_grads, grads):
            assert _close(got, want) < RANKS_TOLERANCE, name
    # saved on 2 ranks, resumed in one process: the same weights and moments, the same next step
    learner, tokenizer, batch = make_learner("sao")
    restore_learner(learner, tmp_path / "run" / "checkpoints" / "step_000001")
    assert learner.step == 1 and learner.version == 1
    _same_weights(full_weights(learner), reports["saved"][1])
    metrics = learner.train_step(build_batch(batch, tokenizer.pad_token_id, 16))
    _same_metrics(reports["next"][0], metrics)
    _same_weights(full_weights(learner), reports["next"][1])
    # and resumed on 2 ranks
    again = run_ranks("resume", str(tmp_path / "run"))
    _same_weights(again["resumed"][1], reports["saved"][1])
    _same_metrics(again["next"][0], reports["next"][0])
    _same_weights(again["next"][1], reports["next"][1])
