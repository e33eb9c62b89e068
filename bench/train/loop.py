"""The one training loop: rollouts and learner run concurrently; `--mode sync` is the same
loop with no lookahead and staleness 0.

Each step: take finished groups until the batch is full (dropping or requeueing groups older
than `max_staleness` policy versions, and groups the algorithm rejects), train, push the new
weights to the engine while other trajectories are still in flight, log, checkpoint.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bench.config import RunConfig, RunParts
from bench.engines import make_engine
from bench.engines.base import SamplingParams
from bench.errors import RunStopped
from bench.rollout.episode import ENGINE_FAILURES
from bench.rollout.producer import Group, RolloutProducer
from bench.rollout.worker import EngineWorker
from bench.seeding import derive_seed
from bench.trackers import open_trackers
from bench.train.budget import Consumption, stop_reason
from bench.train.checkpoints import save_checkpoint
from bench.train.evaluation import evaluate_during_training
from bench.train.learner import Learner, build_batch
from bench.train.metrics import advance_bar, batch_metrics, progress_bar, timeline_record
from bench.train.models import unsharded_policy_copy
from bench.train.outcome import recorded_outcome
from bench.train.setup import make_learner
from results.budgets import BUDGETS, BudgetKind
from results.rundir import RunDir, RunOutcome

ROLLOUT_TIMEOUT_S = 600.0  # no finished group for this long means the rollout side is stuck
MAX_REJECTED_IN_A_ROW = 200  # groups rejected by `accept_group` (or failed by the engine) in a row


class RolloutStarved(RunStopped):
    """The algorithm rejected every group for a long time (e.g. all rewards equal)."""

    outcome = RunOutcome.STARVED


@dataclass
class BatchCounters:
    """What happened while one batch was collected."""

    stale_dropped: int = 0
    stale_requeued: int = 0
    filtered_groups: int = 0
    engine_failed: int = 0  # trajectories of groups with an aborted or failed engine request
    wait_s: float = 0.0
    groups: list[Group] = field(default_factory=list)
    discarded: list[Group] = field(default_factory=list)  # taken but not trained on (stale, filtered)

    def generated(self) -> tuple[int, int]:
        """(trajectories, action tokens) of every group taken, trained on or discarded."""
        trajs = [t for g in (*self.groups, *self.discarded) for t in g.trajectories]
        return len(trajs), sum(sum(t.action_mask) for t in trajs)


def collect_batch(
    producer: RolloutProducer, learner: Learner, config: RunConfig, max_staleness: int
) -> BatchCounters:
    """Take groups from the producer until `trajectories_per_step` are accepted. Groups too
    stale, rejected by the algorithm or with an episode the engine aborted or failed are
    discarded (counted; the engine's failures are run again, since the problem is not at fault)."""
    out = BatchCounters()
    have = rejected_in_a_row = failed_in_a_row = 0
    start = time.perf_counter()
    while have < config.trajectories_per_step // learner.dist.world_size:  # this rank's share
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
            out.discarded.append(group)
            producer.release(n)
            continue
        if any(t.finish_reason in ENGINE_FAILURES for t in group.trajectories):
            producer.requeue(group.problem)
            out.engine_failed += n
            out.discarded.append(group)
            producer.release(n)
            failed_in_a_row += 1
            if failed_in_a_row >= MAX_REJECTED_IN_A_ROW:
                raise RuntimeError(
                    f"the engine aborted or failed a request in {failed_in_a_row} groups in a row"
                )
            continue
        failed_in_a_row = 0
        rewards_G = torch.tensor([t.reward for t in group.trajectories])
        if not learner.algo.accept_group(rewards_G):
            out.filtered_groups += 1
            out.discarded.append(group)
            rejected_in_a_row += 1
            producer.release(n)
            if rejected_in_a_row >= MAX_REJECTED_IN_A_ROW:
                raise RolloutStarved(
                    f"{config.algo} rejected {rejected_in_a_row} groups in a row (e.g. dynamic sampling: "
                    "all rewards equal); the task is too hard or too easy for this model"
                )
            continue
        rejected_in_a_row = 0
        out.groups.append(group)
        have += n
    out.wait_s = time.perf_counter() - start
    return out


@dataclass
class Rollouts:
    """The rollout side of a run: its engine, the engine's thread, the producer of groups and
    the sampling settings of every turn (`start_rollouts`)."""

    engine: Any
    worker: EngineWorker
    producer: RolloutProducer
    sampling: SamplingParams
    previous_threads: int | None  # the learner's torch threads before the engine took its cores

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
        unsharded_policy_copy(learner.models),
        tokenizer,
        process=config.engine_process,
        max_batch_size=config.engine_slots,
        engine_args=config.engine_args,
    )
    previous_threads = _leave_cores_for_the_engine(engine, dist)
    engine.update_weights(dict(learner.full_policy_state()), learner.version)
    worker = EngineWorker(engine)
    sampling = SamplingParams(
        temperature=config.temperature,
        top_p=config.top_p,
        max_new_tokens=config.max_new_tokens or task.max_new_tokens,
        stop=tuple(task.stop),
    )
    rank_seed = config.seed if dist.world_size == 1 else derive_seed(config.seed, "rank", dist.rank)
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
    return Rollouts(engine, worker, producer, sampling, previous_threads)


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
    trackers = open_trackers(
        config.report_to, run.path, run.read_config() if is_main else {}, enabled=is_main
    )
    rollouts = start_rollouts(config, task, tokenizer, learner)
    if is_main:  # what the engine turned out to be (vLLM: its version, dtypes, options)
        run.update_env({"engine": rollouts.engine.provenance()})
    bar = progress_bar(config.steps, learner.step, progress and is_main)
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
            advance_bar(bar, last, learner.step - first_step, time.perf_counter() - start)
    finally:
        rollouts.close()
        trackers.close()
        if bar is not None:
            bar.close()
    summary = {
        "outcome": RunOutcome.FINISHED,
        "stopped_by": reason,
        "pid": os.getpid(),
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
    got = collect_batch(producer, learner, config, 0 if sync else config.max_staleness)
    n = sum(len(g.trajectories) for g in got.groups)
    if not sync:
        producer.release(n)  # generation for the next batch starts now, overlapping training
    trajs = [t for g in got.groups for t in g.trajectories]
    record = batch_metrics(got.groups, learner.version)
    version_before = learner.version
    batch = build_batch(
        trajs, tokenizer.pad_token_id, sampling.max_new_tokens * task.max_turns, config.length_buckets
    )
    record.update(learner.train_step(batch))
    if learner.version != version_before:  # other trajectories are still in flight
        engine.update_weights(dict(learner.full_policy_state()), learner.version)
    if sync:
        producer.release(n)
    if run is not None:
        run.append_timeline(timeline_record(learner.step, version_before, got.groups, got.discarded))
    generated_trajectories, generated_tokens = _summed(learner.dist, got.generated())
    record.update(
        {
            "step": learner.step,
            "policy/version": float(learner.version),
            "rollout/stale_dropped": float(got.stale_dropped),
            "rollout/stale_requeued": float(got.stale_requeued),
            "rollout/filtered_groups": float(got.filtered_groups),
            "rollout/engine_failed": float(got.engine_failed),
            "loss/nonfinite_skipped": float(learner.nonfinite_total),
            "rollout/engine_tokens_per_s": engine.stats().get("tokens_per_s", 0.0),
            "time/wait_s": got.wait_s,
            "time/step_s": time.perf_counter() - t0,
            "budget/step_trajectories": float(n * learner.dist.world_size),
            "budget/step_generated_trajectories": float(generated_trajectories),
            "budget/step_generated_tokens": float(generated_tokens),
        }
    )
    return record


def _summed(dist: Any, counts: tuple[int, ...]) -> tuple[int, ...]:
    """`counts` summed over the ranks of a data-parallel run (unchanged in one process)."""
    if dist.world_size == 1:
        return counts
    return tuple(int(x) for x in dist.sum(torch.tensor([float(c) for c in counts])).tolist())
