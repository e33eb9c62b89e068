"""The one training loop: rollouts and learner run concurrently; `--mode sync` is the same
loop with no lookahead and staleness 0.

Each step: take finished groups until the batch is full (dropping or requeueing groups older
than `max_staleness` policy versions, and groups the algorithm rejects), train, push the new
weights to the engine while other trajectories are still in flight, log, checkpoint.
"""

from __future__ import annotations

import copy
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bench.config import RunConfig, make_algorithm
from bench.engines.base import SamplingParams, make_engine
from bench.rollout import EngineWorker, Group, RolloutProducer
from bench.rundir import RunDir
from bench.seeding import seed_everything
from bench.trainer import Learner, build_batch

ROLLOUT_TIMEOUT_S = 600.0  # no finished group for this long means the rollout side is stuck


@dataclass
class BatchCounters:
    """What happened while one batch was collected."""

    stale_dropped: int = 0
    stale_requeued: int = 0
    filtered_groups: int = 0
    wait_s: float = 0.0
    groups: list[Group] = field(default_factory=list)


def collect_batch(producer: RolloutProducer, learner: Learner, config: RunConfig, max_staleness: int) -> BatchCounters:
    """Take groups from the producer until `trajectories_per_step` are accepted."""
    out = BatchCounters()
    have = 0
    start = time.perf_counter()
    while have < config.trajectories_per_step:
        group = producer.get_group(timeout=1.0)
        if group is None:
            if time.perf_counter() - start > ROLLOUT_TIMEOUT_S:
                raise RuntimeError(f"no rollout finished in {ROLLOUT_TIMEOUT_S:.0f} s")
            continue
        n = len(group.trajectories)
        if learner.version - group.min_version() > max_staleness:
            if config.stale_policy == "requeue":
                producer.requeue(group.problem)
                out.stale_requeued += n
            else:
                out.stale_dropped += n
            producer.release(n)
            continue
        rewards_G = torch.tensor([t.reward for t in group.trajectories])
        if not learner.algo.accept_group(rewards_G):
            out.filtered_groups += 1
            producer.release(n)
            continue
        out.groups.append(group)
        have += n
    out.wait_s = time.perf_counter() - start
    return out


def batch_metrics(groups: list[Group], version: int) -> dict[str, float]:
    """Reward, length and staleness statistics of an accepted batch."""
    trajs = [t for g in groups for t in g.trajectories]
    rewards = [t.reward for t in trajs]
    staleness = [version - v for t in trajs for v in t.versions if v >= 0]
    lengths = [sum(t.action_mask) for t in trajs]
    return {
        "reward/mean": statistics.fmean(rewards),
        "reward/std": statistics.pstdev(rewards),
        "rollout/tokens": float(sum(len(t.response_ids) for t in trajs)),
        "rollout/action_tokens_mean": statistics.fmean(lengths),
        "rollout/truncated_frac": statistics.fmean(float(t.truncated) for t in trajs),
        "rollout/turns_mean": statistics.fmean(t.turns for t in trajs),
        "staleness/mean": statistics.fmean(staleness) if staleness else 0.0,
        "staleness/max": float(max(staleness, default=0)),
    }


def save_checkpoint(run: RunDir, learner: Learner, tokenizer: Any, step: int) -> Path:
    """Write policy, critic, optimizer and algorithm state atomically."""
    tmp = run.begin_checkpoint(step)
    learner.unwrapped_policy.save_pretrained(tmp / "policy")
    tokenizer.save_pretrained(tmp / "policy")
    if learner.unwrapped_critic is not None:
        learner.unwrapped_critic.save_pretrained(tmp / "critic")
    torch.save(learner.state_dict(), tmp / "learner.pt")
    return run.commit_checkpoint(tmp, step)


def train(config: RunConfig, run: RunDir, resume: Path | None = None, progress: bool = True) -> dict[str, Any]:
    """Run (or resume) training as configured; returns the summary written to summary.json."""
    from bench.model_loading import load_policy_for_run, resolve_learning_rates
    from envs.registry import get_task

    seed_everything(config.seed)
    algo = make_algorithm(config)
    task = get_task(config.task, **config.task_args)
    policy, tokenizer = load_policy_for_run(config, task, None if resume is None else resume / "policy")
    policy_lr, critic_lr = resolve_learning_rates(config, algo, policy)
    learner = Learner(
        algo, policy, policy_lr, critic_lr, config.grad_clip, config.minibatches,
        config.temperature, config.nan_patience,
    )
    if resume is not None:
        if learner.unwrapped_critic is not None:
            learner.unwrapped_critic.load_state_dict(type(learner.unwrapped_critic).load(resume / "critic").state_dict())
        learner.load_state_dict(torch.load(resume / "learner.pt", weights_only=False))
        run.truncate_metrics(learner.step)

    engine = make_engine(config.engine, copy.deepcopy(learner.unwrapped_policy).eval(), tokenizer,
                         max_batch_size=config.engine_slots)
    engine.update_weights(learner.unwrapped_policy.state_dict(), learner.version)
    worker = EngineWorker(engine)
    sync = config.mode == "sync"
    max_staleness = 0 if sync else config.max_staleness
    sampling = SamplingParams(
        temperature=config.temperature, top_p=config.top_p,
        max_new_tokens=config.max_new_tokens or task.max_new_tokens, stop=tuple(task.stop),
    )
    producer = RolloutProducer(
        task, worker, tokenizer, sampling, algo.group_size,
        capacity=config.trajectories_per_step * (1 if sync else 2), seed=config.seed,
        max_context_tokens=int(getattr(policy.config, "max_position_embeddings", 2048)),
        first_group_id=learner.step * 1_000_000,
    )
    producer.start()
    bar = _progress(config.steps, learner.step, progress)
    start, first_step = time.perf_counter(), learner.step
    last: dict[str, float] = {}
    try:
        while learner.step < config.steps:
            t0 = time.perf_counter()
            got = collect_batch(producer, learner, config, max_staleness)
            n = sum(len(g.trajectories) for g in got.groups)
            if not sync:
                producer.release(n)  # generation for the next batch starts now, overlapping training
            trajs = [t for g in got.groups for t in g.trajectories]
            max_new = sampling.max_new_tokens * task.max_turns
            record = batch_metrics(got.groups, learner.version)
            version_before = learner.version
            record.update(learner.train_step(build_batch(trajs, tokenizer.pad_token_id, max_new)))
            if learner.version != version_before:
                engine.update_weights(learner.unwrapped_policy.state_dict(), learner.version)
            if sync:
                producer.release(n)
            stats = engine.stats()
            record.update({
                "step": learner.step, "policy/version": float(learner.version),
                "rollout/stale_dropped": float(got.stale_dropped), "rollout/stale_requeued": float(got.stale_requeued),
                "rollout/filtered_groups": float(got.filtered_groups), "loss/nonfinite_skipped": float(learner.nonfinite_total),
                "rollout/engine_tokens_per_s": stats.get("tokens_per_s", 0.0),
                "time/wait_s": got.wait_s, "time/step_s": time.perf_counter() - t0,
                "time/elapsed_s": time.perf_counter() - start,
            })
            run.append_metrics(record)
            last = record
            if config.checkpoint_every and learner.step % config.checkpoint_every == 0 or learner.step == config.steps:
                save_checkpoint(run, learner, tokenizer, learner.step)
            _advance(bar, record, learner.step - first_step, time.perf_counter() - start)
    finally:
        producer.close()
        worker.close()
        engine.close()
        if bar is not None:
            bar.close()
    summary = {
        "steps": learner.step, "policy_version": learner.version,
        "wall_s": time.perf_counter() - start, "final": last,
        "nonfinite_skipped": learner.nonfinite_total,
        "frozen_critic_params": learner.frozen_critic_params,
    }
    run.write_summary(summary)
    return summary


def _progress(total: int, initial: int, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc="train", unit="step", dynamic_ncols=True)


def _advance(bar, record: dict[str, float], steps_done: int, elapsed: float) -> None:
    if bar is None:
        return
    bar.set_postfix(
        reward=f"{record['reward/mean']:.3f}",
        steps_per_s=f"{steps_done / max(elapsed, 1e-9):.2f}",
        stale=f"{record['staleness/mean']:.2f}",
        refresh=False,
    )
    bar.update(1)
