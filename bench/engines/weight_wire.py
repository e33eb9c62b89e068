"""Weights from the learner to inference servers: vLLM's NCCL weight-transfer payloads, moved by
a torch.distributed **gloo** broadcast (the CPU transport of the server double).

What is vLLM's (0.34, `vllm/distributed/weight_transfer/`, checked against its source):
- the init info the trainer posts to `/init_weight_transfer_engine` (`NCCLWeightTransferInitInfo`:
  master_address, master_port, rank_offset, world_size, packed, packed_buffer_size_bytes,
  packed_num_buffers) and the update info it posts to `/update_weights` while it broadcasts
  (`NCCLWeightTransferUpdateInfo`: names, dtype_names, shapes; `src` left out when 0, as
  `NCCLTrainerWeightTransferEngine._send_update` does);
- the packing (`packed_tensor.pack_tensors` / `packed_nccl_broadcast_consumer`): tensors in
  order, each flattened to bytes, concatenated into one uint8 buffer until the buffer passes
  `packed_buffer_size_bytes`; one broadcast per buffer. Both sides cut the buffers by the same
  rule from the same metadata, so the receiver knows every buffer's size without asking.
What is ours: the transport. The group is a `ProcessGroupGloo` over its own TCPStore (the
trainer's rank 0 hosts it), never the default process group, so a learner that already runs
DDP/FSDP on the default group can open it too. On a GPU host vLLM's NCCL engines replace it
(docs/backends.md).
"""

from __future__ import annotations

import datetime
import math
import socket
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch
import torch.distributed as dist

DEFAULT_BUFFER_BYTES = 64 * 1024 * 1024
"""Packed buffer size of the CPU transport (vLLM's NCCL default is 1 GiB: a GPU buffer)."""
GROUP_TIMEOUT = datetime.timedelta(seconds=300)


def free_port() -> int:
    """A TCP port free on this host right now (for the transfer group's store)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def open_group(address: str, port: int, rank: int, world_size: int) -> Any:
    """A gloo process group of `world_size` ranks over its own TCPStore at address:port (rank 0
    hosts the store); independent of torch.distributed's default group."""
    store = dist.TCPStore(address, port, world_size, is_master=rank == 0, timeout=GROUP_TIMEOUT)
    return dist.ProcessGroupGloo(store, rank, world_size, GROUP_TIMEOUT)


def init_info(address: str, port: int, world_size: int, buffer_bytes: int = DEFAULT_BUFFER_BYTES) -> dict:
    """The `init_info` body of `/init_weight_transfer_engine` (vLLM's NCCLWeightTransferInitInfo
    fields) for one trainer rank (rank_offset 1) and `world_size - 1` server workers."""
    return {
        "master_address": address,
        "master_port": port,
        "rank_offset": 1,
        "world_size": world_size,
        "packed": True,
        "packed_buffer_size_bytes": buffer_bytes,
        "packed_num_buffers": 2,
    }


def unique_tensors(state_dict: Mapping[str, torch.Tensor]) -> list[tuple[str, torch.Tensor]]:
    """(name, tensor) of `state_dict`, each storage once: a tied tensor (embeddings and lm_head)
    goes under its first name, as vLLM's trainer sends `named_parameters()`."""
    seen: set[int] = set()
    out = []
    for name, tensor in state_dict.items():
        if tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        out.append((name, tensor.detach()))
    return out


def update_info(named: Iterable[tuple[str, torch.Tensor]]) -> dict:
    """The `update_info` body of `/update_weights` (vLLM's NCCLWeightTransferUpdateInfo, src 0)."""
    named = list(named)
    return {
        "names": [n for n, _ in named],
        "dtype_names": [str(t.dtype).split(".")[-1] for _, t in named],
        "shapes": [list(t.shape) for _, t in named],
    }


def _chunks(sizes: list[int], buffer_bytes: int) -> Iterator[list[int]]:
    """Indices of the tensors in each packed buffer: vLLM's rule, add a tensor, then close the
    buffer once its bytes pass `buffer_bytes`."""
    current: list[int] = []
    total = 0
    for i, size in enumerate(sizes):
        current.append(i)
        total += size
        if total > buffer_bytes:
            yield current
            current, total = [], 0
    if current:
        yield current


def send(group: Any, named: list[tuple[str, torch.Tensor]], buffer_bytes: int = DEFAULT_BUFFER_BYTES) -> int:
    """Broadcast `named` from rank 0 in packed buffers (vLLM's packing); returns the bytes sent."""
    flat = [t.contiguous().view(-1).view(torch.uint8) for _, t in named]
    sent = 0
    for idx in _chunks([f.numel() for f in flat], buffer_bytes):
        packed = torch.cat([flat[i] for i in idx]) if len(idx) > 1 else flat[idx[0]]
        group.broadcast(packed, 0).wait()
        sent += packed.numel()
    return sent


def receive(
    group: Any, info: Mapping[str, Any], buffer_bytes: int
) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """The receiving side of `send`: for each packed buffer, its (name, tensor) list (fresh
    tensors, copied out of the buffer: views at odd offsets could not take wider dtypes), from the update info's names, dtype names and shapes."""
    src = int(info.get("src", 0))
    metas = [
        (name, getattr(torch, dtype_name), list(shape))
        for name, dtype_name, shape in zip(info["names"], info["dtype_names"], info["shapes"], strict=True)
    ]
    sizes = [math.prod(shape) * dtype.itemsize for _, dtype, shape in metas]
    for idx in _chunks(sizes, buffer_bytes):
        packed = torch.empty(sum(sizes[i] for i in idx), dtype=torch.uint8)
        group.broadcast(packed, src).wait()
        parts = packed.split([sizes[i] for i in idx])
        yield [(metas[i][0], part.clone().view(metas[i][1]).view(metas[i][2])) for i, part in zip(idx, parts)]
