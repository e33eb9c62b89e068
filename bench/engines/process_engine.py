"""`ProcessEngine`: the torch engine in a child process, so generation and training truly overlap.

Why: on CPU the tiny model's decode and the learner's step are both dominated by per-op Python
overhead; in one process they share the GIL and mostly take turns. A child process has its own
interpreter (and torch thread pool), like an inference server next to a trainer.

How:
- the child is forked (Linux; "spawn" elsewhere, which re-imports the caller's main module: scripts
  need the usual `if __name__ == "__main__":` guard there). Forking is what PyTorch's DataLoader
  workers do too: the child only runs torch CPU ops with one intra-op thread. It builds the model
  from its config and runs a `TorchEngine` over it;
- requests go down a queue; finished completions come back up another, with the engine's
  throughput counters;
- weights: the parent keeps one copy of the policy's tensors in shared memory. `update_weights`
  copies the new weights into it under a lock and bumps a shared version counter; before each
  decode step the child compares versions and, if newer, loads the shared tensors into its
  engine (`TorchEngine.update_weights`, same in-flight semantics as in-process). The copy is a
  memcpy of the parameters: microseconds for the tiny model, ~0.1 s for a 135M model.
CPU only (a CUDA model would need CUDA IPC); `make_engine` falls back to the in-process engine
on a GPU.
"""

from __future__ import annotations

import os
import queue
import traceback
from collections.abc import Mapping
from typing import Any

import torch
import torch.multiprocessing as mp

from bench.engines.base import Completion, Engine, GenerationRequest, check_request, throughput_stats
from bench.process_memory import peak_rss_gib

_POLL_S = 0.01  # how long step() waits for a completion before returning an empty list
_CLOSE = "close"

CHILD_THREADS = 1
"""Intra-op threads of the engine child (the learner's process leaves it that many cores)."""


def _shared_copy(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A shared-memory copy of `state_dict`; tied entries (same storage) stay tied."""
    out: dict[str, torch.Tensor] = {}
    by_ptr: dict[int, torch.Tensor] = {}
    for name, tensor in state_dict.items():
        ptr = tensor.data_ptr()
        if ptr not in by_ptr:
            by_ptr[ptr] = tensor.detach().to("cpu", copy=True).share_memory_()
        out[name] = by_ptr[ptr]
    return out


def _child_main(config, tokenizer, shared, version, lock, requests, results, engine_kwargs, parent) -> None:
    """The child: a TorchEngine fed from `requests`, reporting to `results` (see module docstring).

    It exits by itself when the parent is gone (e.g. the run was killed with SIGKILL, which
    skips every cleanup): a forked child would otherwise wait on its queue forever."""
    try:
        from transformers import AutoModelForCausalLM

        from bench.engines.torch_engine import TorchEngine

        torch.set_num_threads(CHILD_THREADS)  # one core for decoding; the learner keeps the others
        model = AutoModelForCausalLM.from_config(config)
        with lock:
            model.load_state_dict(shared, strict=False)
            seen = version.value
        engine = TorchEngine(model, tokenizer, **engine_kwargs)
        engine.version = seen
        while True:
            try:  # take everything queued; block only when idle
                while True:
                    item = requests.get(block=not engine.has_work(), timeout=0.05)
                    if item == _CLOSE:
                        return
                    engine.submit(item)
            except queue.Empty:
                if os.getppid() != parent:  # re-parented: the learner process died
                    return
            if version.value != seen:
                with lock:
                    seen = version.value
                    engine.update_weights(shared, seen)
            if engine.has_work():
                done = engine.step()
                if done:
                    results.put(("done", done, engine.stats()))
    except BaseException:  # reported to the parent, which raises it from step()
        results.put(("error", traceback.format_exc(), None))


class ProcessEngine(Engine):
    """A `TorchEngine` running in a child process (module docstring); same protocol."""

    def __init__(self, model: Any, tokenizer: Any, **engine_kwargs: Any) -> None:
        """Start the child with a copy of `model` (CPU); `engine_kwargs` go to TorchEngine."""
        ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        self.version = 0
        dtype = engine_kwargs.get("dtype")  # the child's TorchEngine casts its model to it
        self._dtype = str(getattr(torch, dtype) if dtype else next(model.parameters()).dtype)
        self._shared = _shared_copy(model.state_dict())
        self._lock = ctx.Lock()
        self._version = ctx.Value("q", 0, lock=False)  # written only under self._lock
        self._requests = ctx.Queue()
        self._results = ctx.Queue()
        self._in_flight = 0
        self._stats: dict[str, float] = throughput_stats(
            {"tokens": 0, "seconds": 0.0, "active": 0, "steps": 0}
        )
        self._updates = 0
        self._child = ctx.Process(
            target=_child_main,
            args=(
                model.config,
                tokenizer,
                self._shared,
                self._version,
                self._lock,
                self._requests,
                self._results,
                engine_kwargs,
                os.getpid(),
            ),
            name="rollout-engine",
            daemon=True,
        )
        self._child.start()

    def submit(self, request: GenerationRequest) -> None:
        """Send a request to the child (checked here, so a bad one fails its caller)."""
        check_request(request)
        self._in_flight += 1
        self._requests.put(request)

    def has_work(self) -> bool:
        """True while any submitted request has not come back."""
        return self._in_flight > 0

    def step(self) -> list[Completion]:
        """Completions the child finished since the last call (waits up to ~10 ms for one)."""
        out: list[Completion] = []
        try:
            item = self._results.get(timeout=_POLL_S)
            while True:
                kind, payload, stats = item
                if kind == "error":
                    raise RuntimeError(f"rollout engine process failed:\n{payload}")
                out += payload
                self._stats = stats
                item = self._results.get_nowait()
        except queue.Empty:
            pass
        if not out and not self._child.is_alive():
            raise RuntimeError(f"rollout engine process died (exit code {self._child.exitcode})")
        self._in_flight -= len(out)
        return out

    def update_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Copy the new weights into shared memory; the child loads them before its next step."""
        with self._lock, torch.no_grad():
            unexpected = [k for k in state_dict if k not in self._shared]
            if unexpected:
                raise ValueError(f"update_weights: unexpected keys {unexpected[:5]}")
            for name, tensor in state_dict.items():
                self._shared[name].copy_(tensor)
            self._version.value = version
        self.version = version
        self._updates += 1

    def provenance(self) -> dict:
        """The engine and the dtype its child samples in (env.json)."""
        return {"engine": type(self).__name__, "dtype": self._dtype}

    def stats(self) -> dict[str, float]:
        """The child engine's throughput counters as of its last completion, plus weight pushes
        and the child's peak resident memory (`peak_rss_gib`, when the OS reports it)."""
        peak = peak_rss_gib(self._child.pid) if self._child.pid is not None else None
        return {**self._stats, "weight_updates": float(self._updates)} | (
            {} if peak is None else {"peak_rss_gib": peak}
        )

    def close(self) -> None:
        """Stop the child (in-flight requests are abandoned)."""
        if self._child.is_alive():
            self._requests.put(_CLOSE)
            self._child.join(timeout=10)
            if self._child.is_alive():
                self._child.kill()
                self._child.join(timeout=5)
        self._in_flight = 0
