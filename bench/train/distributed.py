"""The learner's ranks and their process group.

A run is one process, or N ranks started by a launcher: `torchrun --nproc-per-node N -m
bench.cli run ...` (or `accelerate launch`, which starts torchrun's elastic agent and sets the
same variables). A launched process reads WORLD_SIZE, RANK and LOCAL_RANK and joins torch's
default process group (`init_process_group`): gloo on CPU, nccl on CUDA, rank r on `cuda:r`
of its node. Nothing here depends on accelerate: accelerate's `--use_fsdp` on CPU silently
gives DDP, so the learner shards with torch's FSDP2 itself (`bench.train.sharding`).

One process that shards anyway (bf16-mixed goes through FSDP2's `MixedPrecisionPolicy`, one way
to run mixed precision whatever the world size) gets a process group of one rank over an
in-memory store (`Dist.grouped`): no port, no launcher.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed as dist

from bench.launcher import is_launched


@dataclass(frozen=True)
class Dist:
    """This process's rank in the learner's world, its device, and the collectives the learner
    uses; every collective is the identity in a world of one."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    grouped: bool = False  # torch's default process group exists (launched, or one-rank for FSDP2)

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes the run directory."""
        return self.rank == 0

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` summed over the ranks (a copy on this rank's device)."""
        out = tensor.detach().to(self.device, copy=True)
        if self.world_size > 1:
            dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out

    def max_int(self, value: int) -> int:
        """The largest of every rank's `value`."""
        if self.world_size == 1:
            return value
        out = torch.tensor([value], dtype=torch.long, device=self.device)
        dist.all_reduce(out, op=dist.ReduceOp.MAX)
        return int(out.item())

    def gather_rows(self, local_b_T: torch.Tensor) -> torch.Tensor:
        """Every rank's rows (equal shapes) concatenated in rank order, [world * b, ...]; this
        rank's own rows are `local_b_T` itself, so a gradient flows back into them alone."""
        if self.world_size == 1:
            return local_b_T
        parts = [torch.empty_like(local_b_T) for _ in range(self.world_size)]
        dist.all_gather(parts, local_b_T.detach().contiguous())
        parts[self.rank] = local_b_T
        return torch.cat(parts)

    def gather_objects(self, local: list[Any]) -> list[Any]:
        """Every rank's list (picklable items) concatenated in rank order."""
        if self.world_size == 1:
            return local
        lists: list[Any] = [None] * self.world_size
        dist.all_gather_object(lists, local)
        return [item for part in lists for item in part]

    def barrier(self) -> None:
        """Wait until every rank is here."""
        if self.world_size > 1:
            dist.barrier()

    def close(self) -> None:
        """Destroy the process group (an orderly end: gloo's threads may otherwise abort the
        process as it exits)."""
        if self.grouped and dist.is_initialized():
            dist.destroy_process_group()


_current: Dist | None = None


def current_dist() -> Dist:
    """This process's `Dist`: a launched process joins the process group the first time, and
    keeps its rank after `close` (joining again would meet the launcher's store holding the first
    join's keys: the ranks hung in gloo's connect, or one waited for a partner that had exited).
    A plain process's one-rank group (`grouped_dist`) is made again after it was destroyed."""
    global _current
    if _current is None or (_current.grouped and not dist.is_initialized() and not is_launched()):
        _current = _join() if is_launched() else Dist(device=_device(0))
    return _current


def _device(local_rank: int) -> torch.device:
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def _join() -> Dist:
    """Join (or reuse) the launcher's process group: nccl on CUDA, gloo on CPU."""
    local_rank = int(os.environ.get("LOCAL_RANK") or 0)
    device = _device(local_rank)
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, device_id=device if device.type == "cuda" else None)
    return Dist(dist.get_rank(), dist.get_world_size(), local_rank, device, grouped=True)


def grouped_dist() -> Dist:
    """`current_dist()` with a process group: a plain process gets a one-rank group over an
    in-memory store (FSDP2 needs a group even to shard over one rank)."""
    global _current
    here = current_dist()
    if here.grouped:
        return here
    if not dist.is_initialized():
        backend = "nccl" if here.device.type == "cuda" else "gloo"
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    _current = replace(here, grouped=True)
    return _current
