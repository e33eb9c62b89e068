"""`bench perf` sections of the disaggregated engine (`--engine http` against CPU double servers):

- `disagg_async_vs_sync`: the `async_vs_sync` comparison (sync seconds / async seconds of the same
  GRPO run on arith) with rollouts on one double server process, next to the same comparison
  with today's `ProcessEngine`, in one invocation; target: the ratios within 10% of each other.
- `weight_transfer`: seconds per `HTTPEngine.update_weights` (pause, start, packed gloo broadcast
  while `/update_weights` receives, finish, resume) against a plain gloo `broadcast` of the same
  bytes to another process, per model size; target <= 1.2x.
"""

from __future__ import annotations

import copy
import multiprocessing as mp
import statistics
import tempfile
import time
from typing import Any

from bench.perf import comparison

WEIGHT_SIZES = {"tiny": (128, 4), "hidden512x8": (512, 8)}
"""Model shapes of `weight_transfer` (hidden size, layers) on the tiny tokenizer."""


def disagg_async_vs_sync_section(repeats: int, quick: bool) -> dict[str, Any]:
    """Sync/async wall-time ratio with one double server vs with the ProcessEngine."""
    from bench.engines.server_procs import start_double
    from bench.perf.loop_sections import _measure_modes, perf_base_checkpoint

    steps, per_step = (2, 16) if quick else (8, 32)
    base = perf_base_checkpoint("arith")
    server = start_double(base, slots=64)
    try:
        http = _measure_modes(
            repeats, "arith", {}, base, steps, per_step, {"engine": "http", "rollout_urls": server.url}
        )
    finally:
        server.stop()
    local = _measure_modes(repeats, "arith", {}, base, steps, per_step)
    ratio_http = statistics.median(http[0]["sync"]) / statistics.median(http[0]["async"])
    ratio_local = statistics.median(local[0]["sync"]) / statistics.median(local[0]["async"])
    return {
        "metric": "sync seconds / async seconds",
        "ours": ratio_http,
        "peer": ratio_local,
        "peer_name": "the same runs with engine_process (ProcessEngine)",
        "ratio": ratio_http / ratio_local,
        "ratio_definition": "ours / peer (async speed-up with a server over the in-process-pair one)",
        "target": ">= 0.9",
        "reached": ratio_http / ratio_local >= 0.9,
        "runs": {"http": http[0], "process_engine": local[0]},
        "setup": {
            "task": "arith",
            "algorithm": "grpo",
            "steps": steps,
            "trajectories_per_step": per_step,
            "server": "one bench.engines.double_server process, 64 slots",
        },
    }


def _receive_plain(port: int, nbytes: int, times: int) -> None:
    """The peer's receiver: `times` plain broadcasts of `nbytes` from rank 0."""
    import torch

    from bench.engines.weight_wire import open_group

    group = open_group("127.0.0.1", port, 1, 2)
    buffer = torch.empty(nbytes, dtype=torch.uint8)
    for _ in range(times):
        group.broadcast(buffer, 0).wait()


def _model(hidden: int, layers: int) -> tuple[Any, Any]:
    from transformers import LlamaConfig, LlamaForCausalLM

    from bench.models.tiny import new_tiny_model

    tiny, tok = new_tiny_model(0)
    config = LlamaConfig(
        **{
            **tiny.config.to_dict(),
            "hidden_size": hidden,
            "intermediate_size": 3 * hidden,
            "num_hidden_layers": layers,
            "head_dim": None,
        }
    )
    return LlamaForCausalLM(config), tok


def _copy_seconds(buffer: Any, repeats: int) -> float:
    """Median seconds of one in-memory copy of `buffer` into another buffer of its size (the
    first, which touches fresh pages, left out)."""
    import torch

    target, times = torch.empty_like(buffer), []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        target.copy_(buffer)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def weight_transfer_section(repeats: int, quick: bool) -> dict[str, Any]:
    """Seconds per weight update through a double server vs a plain broadcast of its bytes."""
    import torch

    from bench.engines.http_engine import HTTPEngine
    from bench.engines.server_procs import start_double
    from bench.engines.weight_wire import free_port, open_group, unique_tensors

    out: dict[str, Any] = {}
    for name, (hidden, layers) in list(WEIGHT_SIZES.items())[: 1 if quick else None]:
        model, tok = _model(hidden, layers)
        nbytes = sum(t.numel() * t.element_size() for _, t in unique_tensors(model.state_dict()))
        with tempfile.TemporaryDirectory(prefix="bench-perf-weights-") as folder:
            model.save_pretrained(folder)
            tok.save_pretrained(folder)
            server = start_double(folder, slots=8)
            try:
                engine = HTTPEngine([server.url], copy.deepcopy(model), tok, max_batch_size=8)
                ours, sends = [], []
                for version in range(1, repeats + 2):  # the first is a warm-up
                    start, sent = time.perf_counter(), engine.stats()["weight_send_seconds"]
                    engine.update_weights(model.state_dict(), version)
                    ours.append(time.perf_counter() - start)
                    sends.append(engine.stats()["weight_send_seconds"] - sent)
                engine.close()
            finally:
                server.stop()
        port = free_port()
        child = mp.get_context("spawn").Process(target=_receive_plain, args=(port, nbytes, repeats + 1))
        child.start()
        group, buffer, peer = open_group("127.0.0.1", port, 0, 2), torch.zeros(nbytes, dtype=torch.uint8), []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            group.broadcast(buffer, 0).wait()
            peer.append(time.perf_counter() - start)
        child.join(timeout=60)
        copies = _copy_seconds(buffer, repeats)
        out[name] = comparison(
            "seconds_per_update",
            ours[1:],
            peer[1:],
            peer="plain gloo broadcast of the same bytes",
            ratio="ours / peer",
            target=1.2,
            higher_is_better=False,
            bytes=nbytes,
            packed_broadcast_seconds=statistics.median(sends[1:]),
            packed_broadcast_ratio=statistics.median(sends[1:]) / statistics.median(peer[1:]),
            copy_seconds=copies,
            copy_ratio=copies / statistics.median(peer[1:]),
        )
    largest = out[list(out)[-1]]
    return {
        **largest,
        "size": list(out)[-1],
        "sizes": out,
        "notes": [
            "ours = one HTTPEngine.update_weights against one double server process: pause(abort), "
            "start, packed gloo broadcast while /update_weights receives, finish (the server loads the "
            "weights into its engine), resume: five HTTP calls besides the bytes",
            "packed_broadcast_seconds: the broadcast of vLLM's packed buffers alone, inside ours",
            "peer: one gloo broadcast of the same number of bytes to a spawned process",
            "copy_seconds: one in-memory copy of the same bytes (Tensor.copy_); an update makes two "
            "that the peer does not (into the packing buffer, into the engine's parameters), so "
            "1 + 2 * copy_ratio is the floor of the ratio on this transport",
        ],
    }
