"""The learner side of vLLM's NCCL weight transfer, for the http engine against `vllm serve` on
GPUs (`weight_transfer=nccl`; the CPU double server reads the gloo wire, `weight_wire`).

Built on vLLM's own trainer engine, not a transport of ours: one
`NCCLTrainerWeightTransferEngine` per server (`trainer_init`: the rendezvous through the
server's `/init_weight_transfer_engine`; `send_weights`: `/start_weight_update`, the packed
broadcast beside `/update_weights`, `/finish_weight_update`), over vLLM's
`HTTPVLLMWeightSyncClient`. The learner process is the transfer's only trainer rank: the learner
ranks have already gathered the full weights (`bench.train.policy_weights`) when the http engine's
rank 0 pushes them, so the source is that state, not the sharded module. The policy version
rides `/finish_weight_update` as `weight_version` (vLLM's `send_weights` sends none; the client
here adds it), so every token's version stays exact. The group size is 1 + the server's
workers (`/get_world_size`: TP x PP x DP).

Needs vLLM importable on the learner's side (the `gpu` extra) and the weights on a CUDA device;
`check_available` says which is missing in one line. Not yet run on a GPU: written against vLLM
0.34.0's source (`vllm/distributed/weight_transfer/`), checked by `tests/unit/bench/test_nccl_wire.py`.
"""

from __future__ import annotations

import importlib.util
import json
import urllib.request
from collections.abc import Sequence
from functools import cached_property
from typing import Any

import torch

from bench.engines.vllm_routes import Route
from bench.errors import UsageError


def check_available() -> None:
    """A one-line UsageError unless vLLM's NCCL trainer engine can run in this process."""
    if importlib.util.find_spec("vllm") is None:
        raise UsageError(
            "weight_transfer=nccl uses vLLM's trainer-side NCCL engine, and vLLM is not installed here: "
            "pip install -e .[gpu] (or weight_transfer=gloo against the CPU double server)"
        )
    if not torch.cuda.is_available():
        raise UsageError("weight_transfer=nccl needs the learner on a CUDA GPU and none is visible")


def server_workers(url: str, timeout: float = 30.0) -> int:
    """How many inference workers the server at `url` runs (its TP x PP x DP)."""
    with urllib.request.urlopen(url.rstrip("/") + Route.GET_WORLD_SIZE, timeout=timeout) as answer:
        return int(json.loads(answer.read())["world_size"])


class NCCLTransfer:
    """One server's transfer group, opened at construction (module docstring)."""

    def __init__(
        self,
        url: str,
        named: Sequence[tuple[str, torch.Tensor]],
        address: str,
        port: int,
        timeout: float,
    ) -> None:
        """`named`: the weights as the first push sends them (their names, dtypes and shapes are
        what every later push must send); `address`/`port`: where the server's workers reach
        this process's rendezvous store."""
        from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource
        from vllm.distributed.weight_transfer.clients import HTTPVLLMWeightSyncClient
        from vllm.distributed.weight_transfer.nccl_engine import (
            NCCLTrainerInitInfo,
            NCCLTrainerWeightTransferEngine,
        )

        transfer = self
        self.named, self.version = list(named), 0

        class CurrentWeights(WeightSource):
            """The weights of the push under way (full tensors; this process owns all)."""

            @cached_property
            def metadata(self) -> list[Any]:
                return [ParamMeta(name, t.dtype, tuple(t.shape)) for name, t in transfer.named]

            def iter_full(self):
                yield from transfer.named

        class VersionedClient(HTTPVLLMWeightSyncClient):
            """vLLM's HTTP client, finishing each update with the policy version it carries."""

            def finish_weight_update(self, weight_version: str | None = None) -> None:
                super().finish_weight_update(str(transfer.version))

        info = NCCLTrainerInitInfo(
            master_address=address,
            master_port=port,
            world_size=1 + server_workers(url),
            packed=True,  # vLLM's packed broadcast at its default buffer sizes
            rank=0,
        )
        self._engine = NCCLTrainerWeightTransferEngine.trainer_init(
            info, client=VersionedClient(url, timeout=timeout), source=CurrentWeights()
        )

    def send(self, named: Sequence[tuple[str, torch.Tensor]], version: int) -> None:
        """One update: start, the broadcast beside `/update_weights`, finish with `version`."""
        self.named, self.version = list(named), version
        self._engine.send_weights()

    def shutdown(self) -> None:
        """Tear the transfer group down (the server's side: `/shutdown_weight_transfer_engine`)."""
        self._engine.shutdown()
