"""A learner batch: trajectories as [B, T] tensors, on the model's device, and its data-parallel
view, the global batch.

`trajectories_per_step` is the global batch: each of W ranks trains on its own B/W
trajectories (whole groups). The plugin's advantages and losses are computed on the GLOBAL
batch on every rank (`GlobalRows` gathers the per-token tensors of every rank; the model
outputs of other ranks arrive detached), and each rank back-propagates only through its own
rows; FSDP2 then sums the ranks' gradients (`bench.train.sharding`). So a step on W ranks is
the one-process step on the same global batch, whatever the plugin does with it (token means,
group baselines, batch statistics), up to float summation order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from algorithms.base import Trajectories
from bench.models.packing import BucketedBatch
from bench.rollout.episode import Trajectory
from bench.train.distributed import Dist


@dataclass
class LearnerBatch:
    """Tensors of one batch of trajectories, in the learner's layout."""

    rows: BucketedBatch  # the token rows, in length buckets (every forward goes through rows.map)
    action_mask_B_T: torch.Tensor  # [B, T] float
    rollout_logp_B_T: torch.Tensor  # [B, T]
    traj: Trajectories

    def placed(self, dist: Dist) -> LearnerBatch:
        """This batch with its tensors on `dist.device` (token rows move at each forward).
        Under data parallelism also padded to the longest response of any rank, with as many
        length buckets as any rank (`BucketedBatch.agree`), so every rank's tensors have one
        shape and every rank runs the same forwards."""
        T, agree = self.rows.response_len, None
        if dist.world_size > 1:
            T, agree = dist.max_int(T), dist.max_int

        def put(x_B_T: torch.Tensor) -> torch.Tensor:
            return F.pad(x_B_T, (0, T - x_B_T.shape[1])).to(dist.device)

        traj = self.traj
        rows = self.rows
        if agree is not None:
            rows = BucketedBatch.build(rows.prompts, rows.responses, rows.pad_id, rows.bucketed, T, agree)
        return LearnerBatch(
            rows=rows,
            action_mask_B_T=put(self.action_mask_B_T),
            rollout_logp_B_T=put(self.rollout_logp_B_T),
            traj=replace(
                traj,
                rewards_B=traj.rewards_B.to(dist.device),
                action_mask_B_T=put(traj.action_mask_B_T),
                response_mask_B_T=put(traj.response_mask_B_T),
                values_B_T=None if traj.values_B_T is None else put(traj.values_B_T),
            ),
        )


def _pad(rows: list[list[float]], length: int, value: float, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor([r + [value] * (length - len(r)) for r in rows], dtype=dtype)


def build_batch(
    trajectories: list[Trajectory], pad_id: int, max_response_tokens: int, length_buckets: bool = True
) -> LearnerBatch:
    """Pack trajectories (groups contiguous, in order) into learner tensors (on the CPU: the
    learner places them, `LearnerBatch.placed`); with `length_buckets` the forwards run per
    bucket of similar lengths (same results, less padding)."""
    rows = BucketedBatch.build(
        [t.prompt_ids for t in trajectories], [t.response_ids for t in trajectories], pad_id, length_buckets
    )
    T = rows.response_len
    action_mask_B_T = _pad([list(map(float, t.action_mask)) for t in trajectories], T, 0.0, torch.float32)
    traj = Trajectories(
        rewards_B=torch.tensor([t.reward for t in trajectories], dtype=torch.float32),
        action_mask_B_T=action_mask_B_T,
        response_mask_B_T=_pad([[1.0] * len(t.response_ids) for t in trajectories], T, 0.0, torch.float32),
        prompt_keys=[t.prompt_key for t in trajectories],
        max_response_tokens=max_response_tokens,
    )
    return LearnerBatch(
        rows=rows,
        action_mask_B_T=action_mask_B_T,
        rollout_logp_B_T=_pad([t.rollout_logp for t in trajectories], T, 0.0, torch.float32),
        traj=traj,
    )


class GlobalRows:
    """The global batch of a placed local batch: every rank's rows in rank order (rank r holds
    global rows r*b .. r*b+b-1). In one process every method is the identity."""

    def __init__(self, dist: Dist, batch: LearnerBatch) -> None:
        self.dist, self.local_rows = dist, batch.rows.batch_size
        traj = batch.traj
        self.action_mask_B_T = dist.gather_rows(batch.action_mask_B_T)  # [B, T]
        self.rollout_logp_B_T = dist.gather_rows(batch.rollout_logp_B_T)  # [B, T]
        self.traj = replace(
            traj,
            rewards_B=dist.gather_rows(traj.rewards_B),
            action_mask_B_T=self.action_mask_B_T,
            response_mask_B_T=dist.gather_rows(traj.response_mask_B_T),
            prompt_keys=dist.gather_objects(list(traj.prompt_keys)),
        )

    def rows(self, local_b_T: torch.Tensor) -> torch.Tensor:
        """A per-row tensor of this rank's rows -> the same for every rank's, [W * b, ...]; the
        gradient flows back into this rank's rows only."""
        return self.dist.gather_rows(local_b_T)

    def index(self, local: torch.Tensor) -> torch.Tensor:
        """Global row indices of local rows `local` taken on every rank (a minibatch), in rank order."""
        if self.dist.world_size == 1:
            return local
        return torch.cat([r * self.local_rows + local for r in range(self.dist.world_size)])
