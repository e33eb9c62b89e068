"""Collecting one batch: take finished groups from the rollouts until the batch is full,
discarding (and counting) those too stale, rejected by the algorithm or failed by the engine."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from bench.config import RunConfig
from bench.errors import RunStopped
from bench.rollout.episode import ENGINE_FAILURES
from bench.rollout.producer import Group, RolloutProducer
from bench.train.learner import Learner
from results.rundir import RunOutcome

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

    def taken(self) -> list:
        """Every trajectory taken from the rollouts, trained on or discarded."""
        return [t for g in (*self.groups, *self.discarded) for t in g.trajectories]

    def generated(self) -> tuple[int, int]:
        """(trajectories, action tokens) of every group taken, trained on or discarded."""
        trajs = self.taken()
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
