"""The one training loop: rollouts and learner run concurrently; `--mode sync` is the same
loop with no lookahead and staleness 0 (or the `weight_sync_every - 1` versions its cadence makes).

Each step: take finished groups until the batch is full (dropping or requeueing groups older
than `max_staleness` policy versions, and groups the algorithm rejects: `bench.train.collect`),
train, push the new weights to the engine (every `weight_sync_every` policy versions; the cadence
restarts at a resume, whose engine starts from the checkpoint's weights) while other trajectories
are still in flight, count the step's model FLOPs (`bench.train.compute`), log, checkpoint.
"""

from __future__ import annotations

import os
import time
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

import torch

from bench.config import RunConfig, RunParts
from bench.config_values import rollout_urls
from bench.engines import make_engine
from bench.engines.base import SamplingParams
from bench.models.memory import Precision
from bench.rollout.producer import RolloutProducer
from bench.rollout.remote_env import on_env_workers
from bench.rollout.worker import EngineWorker
from bench.seeding import derive_seed
from bench.trackers import open_trackers
from bench.train.budget import Consumption, stop_reason
from bench.train.checkpoints import save_checkpoint
from bench.train.collect import collect_batch
from bench.train.compute import StepFlops, check_flops_countable, model_shape, step_flops
from bench.train.evaluation import evaluate_during_training
from bench.train.learner import Learner, build_batch
from bench.train.metrics import batch_metrics, memory_metrics, timeline_record
from bench.train.models import unsharded_policy_copy
from bench.train.outcome import recorded_outcome
from bench.train.policy_weights import policy_weights
from bench.train.progress import BudgetBar, counts_of, step_postfix
from bench.train.setup import make_learner
from results.budgets import BUDGETS, BudgetKind
from results.rundir import RunDir, RunOutcome, attempt_pid


@dataclass
class Rollouts:
    """The rollout side of a run: its engine, the engine's thread, the producer of groups and
    the sampling settings of every turn (`start_rollouts`)."""

    engine: Any
    worker: EngineWorker
    producer: RolloutProducer
    sampling: SamplingParams
    previous_threads: int | None  # the learner's torch threads before the engine took its cores
    synced_version: int  # the policy version the engine holds (`weight_sync_every` apart)

    def close(self) -> None:
        """Stop producing, stop the engine thread, release the engine and the learner's cores."""
        self.producer.close()
        self.worker.close()
        self.engine.close()
        if self.previous_threads is not None:
            torch.set_num_threads(self.previous_threads)


def start_rollouts(config: RunConfig, task: Any, tokenizer: Any, learner: Learner) -> Rollouts:
    """An engine on a copy of the current policy and a producer already launching groups."""
    dist, per_rank = learner.dist, config.trajectories_per_step // learner.dist.world_size
    engine = make_engine(
        config.engine,
        unsharded_policy_copy(learner.models),  # LoRA hook inside: a plain (merged) copy
        tokenizer,
        process=config.engine_process,
        max_batch_size=config.engine_slots,
        engine_args={**config.engine_args, **({"enable_sleep_mode": True} if config.engine_sleep else {})},
        **_engine_dtype(config),
        **(_http_engine_args(config, dist) if config.engine == "http" else {}),
        rollout_urls=rollout_urls(config),
    )
    previous_threads = _leave_cores_for_the_engine(engine, dist)
    synced_version = push_policy(engine, learner)  # no rank samples before the engines hold it
    worker = EngineWorker(engine)
    sampling = SamplingParams(
        temperature=config.temperature,
        top_p=config.top_p,
        max_new_tokens=config.max_new_tokens or task.max_new_tokens,
        stop=tuple(task.stop),
    )
    rank_seed = config.seed if dist.world_size == 1 else derive_seed(config.seed, "rank", dist.rank)
    task = on_env_workers(task, config.env_workers)  # episodes' environments on Ray actors, if placed there
    # a drifting task's schedule counts this rank's trajectories; a resumed run continues it
    task.begin_training(learner.algo.group_size, trajectories_done=learner.step * per_rank)
    producer = RolloutProducer(
        task,
        worker,
        tokenizer,
        sampling,
        learner.algo.group_size,
        capacity=per_rank * (1 if config.mode == "sync" else 2),
        seed=rank_seed,
        max_context_tokens=int(getattr(learner.unwrapped_policy.config, "max_position_embeddings", 2048)),
        first_group_id=learner.step * 1_000_000,
    )
    producer.start()
    return Rollouts(engine, worker, producer, sampling, previous_threads, synced_version)


def push_policy(engine: Any, learner: Learner) -> int:
    """Send the current policy to `engine` and wait until every rank may sample from it (an
    inference server is updated by rank 0's push; every rank takes part in the gather); returns
    the version the engine now holds."""
    engine.update_weights(policy_weights(learner), learner.version)
    learner.dist.barrier()
    return learner.version


def train(parts: RunParts, run: RunDir, resume: Path | None = None, progress: bool = True) -> dict[str, Any]:
    """Run (or resume from checkpoint `resume`) training of `parts` (`bench.config.build_run`)
    into `run` (made by `bench.train.start.start_run`); returns the summary written to
    summary.json. The run records how it ended there, whatever ends it (`bench.train.outcome`).

    Under a launcher (torchrun) every rank runs its own engine and producer on its own problem
    stream (seeds differ by rank) and trains on its share of the global batch
    (`bench.train.batch`); only the main process writes to the run directory, checkpoints are
    written by every rank together.
    """
    from bench.train.distributed import current_dist

    with recorded_outcome(run, current_dist().is_main):
        return _train(parts, run, resume, progress)


def _train(parts: RunParts, run: RunDir, resume: Path | None, progress: bool) -> dict[str, Any]:
    """`train` without the outcome bookkeeping."""
    config = parts.config
    task, tokenizer, learner = make_learner(parts, resume)
    is_main = learner.dist.is_main
    if resume is not None and is_main:
        run.truncate_metrics(learner.step)
    consumed = Consumption.load(resume)
    check_flops_countable(config, learner.unwrapped_policy)  # a FLOPs budget needs a known shape
    trackers = open_trackers(
        config.report_to, run.path, run.read_config() if is_main else {}, enabled=is_main
    )
    rollouts = start_rollouts(config, task, tokenizer, learner)
    if is_main:  # what the engine turned out to be (vLLM: its version, dtypes, options)
        run.update_env({"engine": rollouts.engine.provenance()})
    bar = BudgetBar(config, counts_of(learner.step, consumed), progress and is_main)
    start, first_step = time.perf_counter(), learner.step
    last: dict[str, float] = {}
    reason = stop_reason(config, learner.step, consumed)  # e.g. a resume of a finished run
    try:
        if config.eval_every and learner.step == 0:
            before = {"step": 0, **evaluate_during_training(config, learner, tokenizer, run)}
            if is_main:
                run.append_metrics(before)
                trackers.log(before)
        while reason is None:
            step_start = time.perf_counter()
            last = _one_step(config, task, tokenizer, learner, rollouts, run if is_main else None)
            last["time/elapsed_s"] = time.perf_counter() - start
            if config.eval_every and learner.step % config.eval_every == 0:
                _servers_hold_the_policy(config, learner, rollouts)
                last.update(evaluate_during_training(config, learner, tokenizer, run))
            consumed.add(last, time.perf_counter() - step_start)
            last.update(consumed.as_metrics())
            reason = _agreed_stop_reason(config, learner, consumed)
            if is_main:
                if resume is not None and learner.step == first_step + 1:
                    last["resume/from_step"] = float(first_step)
                run.append_metrics(last)
                trackers.log(last)  # the same records, mirrored to --report-to trackers
            if _checkpoint_due(config, learner.step) or reason is not None:  # every rank writes its shards
                save_checkpoint(run, learner, tokenizer, learner.step, config.keep_checkpoints, consumed)
            bar.update(counts_of(learner.step, consumed), step_postfix({"step": learner.step, **last}))
    finally:
        rollouts.close()
        trackers.close()
        bar.close()
    summary = {
        "outcome": RunOutcome.FINISHED,
        "stopped_by": reason,
        "pid": attempt_pid(),
        **_summary(learner, time.perf_counter() - start, last),
        "consumption": consumed.as_dict(),
    }
    if is_main:
        run.write_summary(summary)
    if learner.dist.world_size > 1:  # an orderly end of the process group: gloo's threads
        learner.dist.close()  # otherwise may abort the process as it exits (SIGABRT)
    return summary


def _checkpoint_due(config: RunConfig, step: int) -> bool:
    """Whether `step` ends with a checkpoint by the cadence (the last step always does)."""
    return bool(config.checkpoint_every and step % config.checkpoint_every == 0)


def _summary(learner: Learner, wall_s: float, last: dict[str, float]) -> dict[str, Any]:
    """What summary.json records at the end of a run."""
    return {
        "steps": learner.step,
        "policy_version": learner.version,
        "wall_s": wall_s,
        "final": last,
        "nonfinite_skipped": learner.nonfinite_total,
        "frozen_critic_params": learner.frozen_critic_params,
        "world_size": learner.dist.world_size,
        # the rates actually used (config values of None resolve by model size and task)
        "policy_lr": learner.policy_opt.param_groups[0]["lr"],
        "critic_lr": None if learner.critic_opt is None else learner.critic_opt.param_groups[0]["lr"],
        "policy_checksum_per_rank": learner.policy_checksums(),
    }


def learner_threads(cpus: int, ranks_on_host: int, engine_threads: int) -> int:
    """Intra-op threads for each learner process: its share of the host's cores minus the
    cores its engine child decodes on, at least 1."""
    return max(1, cpus // max(1, ranks_on_host) - engine_threads)


def _servers_hold_the_policy(config: RunConfig, learner: Learner, rollouts: Rollouts) -> None:
    """Before an evaluation on the run's inference servers: push the current policy if the
    weight-sync cadence left them behind (every rank takes part in the gather)."""
    if config.engine != "http" or rollouts.synced_version == learner.version:
        return
    rollouts.synced_version = push_policy(rollouts.engine, learner)


def _http_engine_args(config: RunConfig, dist: Any) -> dict[str, Any]:
    """The http engine's own arguments: rank 0 pushes the weights (`pushes_weights`), by the
    run's `weight_transfer`."""
    return {"pushes_weights": dist.is_main, "weight_transfer": config.weight_transfer}


def _engine_dtype(config: RunConfig) -> dict[str, str]:
    """The torch engine's `dtype` argument: `engine_dtype`, where `auto` is the learner's compute
    dtype (bfloat16 under `precision=bf16-mixed`, else the model's own); other engines take theirs
    from `engine_args` (`bench.config_checks`)."""
    if config.engine_dtype != "auto":
        return {"dtype": config.engine_dtype}
    if config.engine == "torch" and config.precision == Precision.BF16_MIXED:
        return {"dtype": "bfloat16"}
    return {}


def _leave_cores_for_the_engine(engine: Any, dist: Any) -> int | None:
    """With the engine in a child process on CPU, limit the learner's threads so that learner
    and engine together use each core once; returns the previous thread count to restore
    (None: nothing changed). Why: torch's intra-op threads wait for each other at every op,
    so one learner thread sharing a core with the decoding child stalls all of them (REPRODUCE.md
    has the measurement)."""
    from bench.engines.process_engine import CHILD_THREADS, ProcessEngine

    if not isinstance(engine, ProcessEngine):
        return None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    previous = torch.get_num_threads()
    ranks_on_host = int(os.environ.get("LOCAL_WORLD_SIZE", dist.world_size))
    torch.set_num_threads(learner_threads(cpus, ranks_on_host, CHILD_THREADS))
    return previous


def _agreed_stop_reason(config: RunConfig, learner: Learner, consumed: Consumption) -> BudgetKind | None:
    """`budget.stop_reason`, agreed across ranks: any rank's spent budget stops all of them at
    the same step (so that their collective operations stay matched), each recording the first
    kind of the budget table that any rank has spent."""
    reason = stop_reason(config, learner.step, consumed)
    if learner.dist.world_size == 1:
        return reason
    spent_K = learner.dist.sum(torch.tensor([float(row.kind == reason) for row in BUDGETS]))
    return next((row.kind for row, n in zip(BUDGETS, spent_K.tolist()) if n > 0), None)


def _one_step(
    config, task, tokenizer, learner: Learner, rollouts: Rollouts, run: RunDir | None
) -> dict[str, float]:
    """Collect one batch, train on it, push the new weights; returns the step's metrics (and
    appends the step's trajectories to the run's timeline when `run` is given)."""
    engine, producer, sampling = rollouts.engine, rollouts.producer, rollouts.sampling
    sync = config.mode == "sync"
    t0 = time.perf_counter()
    # sync: only the lag the weight-sync cadence makes on purpose (none by default)
    got = collect_batch(
        producer, learner, config, config.weight_sync_every - 1 if sync else config.max_staleness
    )
    n = sum(len(g.trajectories) for g in got.groups)
    if not sync:
        producer.release(n)  # generation for the next batch starts now, overlapping training
    trajs = [t for g in got.groups for t in g.trajectories]
    record = batch_metrics(got.groups, learner.version)
    version_before = learner.version
    batch = build_batch(
        trajs, tokenizer.pad_token_id, sampling.max_new_tokens * task.max_turns, config.length_buckets
    )
    record.update(_train_step(config, engine, learner, batch))
    if learner.version - rollouts.synced_version >= config.weight_sync_every:  # others still in flight
        rollouts.synced_version = push_policy(engine, learner)
    if sync:
        producer.release(n)
    if run is not None:
        run.append_timeline(timeline_record(learner.step, version_before, got.groups, got.discarded))
    flops = step_flops(
        model_shape(learner.unwrapped_policy), learner, trajs, got.taken(), not record["policy/warmup"]
    )
    counts = got.generated() + (() if flops is None else astuple(flops))
    engine_stats = engine.stats()
    generated_trajectories, generated_tokens, *flops_parts = _summed(learner.dist, counts)
    record.update(
        {
            "step": learner.step,
            "policy/version": float(learner.version),
            "rollout/stale_dropped": float(got.stale_dropped),
            "rollout/stale_requeued": float(got.stale_requeued),
            "rollout/filtered_groups": float(got.filtered_groups),
            "rollout/engine_failed": float(got.engine_failed),
            "loss/nonfinite_skipped": float(learner.nonfinite_total),
            "rollout/engine_tokens_per_s": engine_stats.get("tokens_per_s", 0.0),
            "time/wait_s": got.wait_s,
            "time/step_s": time.perf_counter() - t0,
            "budget/step_trajectories": float(n * learner.dist.world_size),
            "budget/step_generated_trajectories": float(generated_trajectories),
            "budget/step_generated_tokens": float(generated_tokens),
        }
    )
    if flops_parts:  # all ranks' (the same on every rank, as the other budget counts)
        record.update(StepFlops(*flops_parts).as_metrics())
    record.update(memory_metrics(engine_stats))
    return record


def _train_step(config: RunConfig, engine: Any, learner: Learner, batch: Any) -> dict[str, float]:
    """The learner's step on `batch`, with the engine asleep meanwhile under `engine_sleep` (sync
    mode: nothing generates while the learner trains; it wakes before the weights move)."""
    if not config.engine_sleep:
        return learner.train_step(batch)
    engine.sleep()
    try:
        return learner.train_step(batch)
    finally:
        engine.wake_up()


def _summed(dist: Any, counts: tuple[int, ...]) -> tuple[int, ...]:
    """`counts` summed over the ranks of a data-parallel run (unchanged in one process)."""
    if dist.world_size == 1:
        return counts
    # float64: FLOPs counts pass 2^24, where float32 would round them
    counts_K = torch.tensor([float(c) for c in counts], dtype=torch.float64)
    return tuple(int(x) for x in dist.sum(counts_K).tolist())
