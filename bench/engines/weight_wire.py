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
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch
import torch.distributed as dist

DEFAULT_BUFFER_BYTES = 64 * 1024 * 1024
"""Packed buffer size of the CPU transport (vLLM's NCCL default is 1 GiB: a GPU buffer)."""
NUM_BUFFERS = 2
"""Packed buffers in flight at once (vLLM's `packed_num_buffers` default)."""
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
        "packed_num_buffers": NUM_BUFFERS,
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


def _buffer(buffers: list[torch.Tensor], k: int, nbytes: int) -> torch.Tensor:
    """The first `nbytes` of packing buffer k mod NUM_BUFFERS, grown on demand. Buffers are kept
    and reused across updates: fresh CPU memory of this size costs a page fault per 4 KiB on
    first touch, several times the copy itself (the GPU's caching allocator hides the same)."""
    slot = k % NUM_BUFFERS
    while len(buffers) <= slot:
        buffers.append(torch.empty(0, dtype=torch.uint8))
    if buffers[slot].numel() < nbytes:
        buffers[slot] = torch.empty(nbytes, dtype=torch.uint8)
    return buffers[slot][:nbytes]


def send(
    group: Any, named: list[tuple[str, torch.Tensor]], buffer_bytes: int, buffers: list[torch.Tensor]
) -> int:
    """Broadcast `named` from rank 0 in packed buffers (vLLM's packing, NUM_BUFFERS of them:
    the next is packed while the previous is on the wire); returns the bytes sent. `buffers`:
    the caller's packing buffers, kept between calls."""
    flat = [t.contiguous().view(-1).view(torch.uint8) for _, t in named]
    in_flight: deque = deque()
    sent = 0
    for k, idx in enumerate(_chunks([f.numel() for f in flat], buffer_bytes)):
        if len(in_flight) >= NUM_BUFFERS:  # this buffer's previous broadcast must be done
            in_flight.popleft().wait()
        packed = _buffer(buffers, k, sum(flat[i].numel() for i in idx))
        torch.cat([flat[i] for i in idx], out=packed)
        in_flight.append(group.broadcast(packed, 0))
        sent += packed.numel()
    while in_flight:
        in_flight.popleft().wait()
    return sent


def receive(
    group: Any, info: Mapping[str, Any], buffer_bytes: int, buffers: list[torch.Tensor]
) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """The receiving side of `send`: for each packed buffer, its (name, tensor) list, from the
    update info's names, dtype names and shapes. The tensors are views of `buffers` (the
    caller's, kept between calls; a tensor whose offset does not suit its dtype is copied), valid
    until the next buffer is asked for; the next buffer's receive is posted before this one is
    handed out."""
    src = int(info.get("src", 0))
    metas = [
        (name, getattr(torch, dtype_name), list(shape))
        for name, dtype_name, shape in zip(info["names"], info["dtype_names"], info["shapes"], strict=True)
    ]
    sizes = [math.prod(shape) * dtype.itemsize for _, dtype, shape in metas]
    chunks = list(_chunks(sizes, buffer_bytes))

    def post(k: int) -> tuple[Any, torch.Tensor]:
        packed = _buffer(buffers, k, sum(sizes[i] for i in chunks[k]))
        return group.broadcast(packed, src), packed

    pending = post(0) if chunks else None
    for k, idx in enumerate(chunks):
        work, packed = pending
        work.wait()
        pending = post(k + 1) if k + 1 < len(chunks) else None  # into the other buffer
        out, offset = [], 0
        for i in idx:
            name, dtype, shape = metas[i]
            part = packed[offset : offset + sizes[i]]
            part = part if offset % dtype.itemsize == 0 else part.clone()
            out.append((name, part.view(dtype).view(shape)))
            offset += sizes[i]
        yield out
