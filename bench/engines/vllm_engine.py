"""The vLLM rollout engine: the `Engine` protocol on vLLM's `LLMEngine` (add_request / step).

Imported only by `make_engine("vllm", ...)`; vLLM is imported only inside `VLLMEngine`.

What was verified, honestly: written against the vLLM 0.33/0.34 sources (v1 `LLMEngine`:
`add_request`, `step`, `apply_model`, `reset_prefix_cache(reset_running_requests=...)`;
`SamplingParams(output_kind=DELTA, logprobs=0, seed=...)`; `EngineArgs(logprobs_mode=...,
async_scheduling=..., distributed_executor_backend="external_launcher")`; finish reasons stop,
length, abort, error) but not run where it was written (no GPU, no vLLM). `tests/gpu/
test_engine_contract.py` holds the checks a GPU machine runs; the same tests pass on CPU against
the torch engine, which shows the tests themselves are right. `docs/backends.md` keeps the record.

How it keeps the `Engine` contract, and what that costs:
1. Exact in-flight weight updates. `update_weights` loads the state dict in place (`apply_model`
   calling the vLLM model's `load_weights`, which maps HF names onto fused qkv/gate_up weights),
   checks that every vLLM parameter was loaded (a partial update raises, naming the missing
   ones), then calls `reset_prefix_cache(reset_running_requests=True)`: vLLM preempts every
   running request, drops its K/V and recomputes it from prompt + tokens so far with the new
   weights. So every token labelled with a version was sampled by exactly those weights, over a
   prefix encoded by them, as in the torch engine. Cost: one prefill of every in-flight
   sequence per update (the torch engine pays the same). Async scheduling is off by default
   (`vllm_args.DEFAULTS`): with it, the batch vLLM schedules while a step's output is processed
   would be sampled under the old weights yet returned after the update; turning it back on
   (`--set engine_args.async_scheduling=true`, ~5-10% throughput for small models where CPU
   overhead dominates) relies on vLLM discarding the in-flight output of preempted requests.
2. Log-probs: `logprobs_mode="processed_logprobs"`, the sampled token's log-prob after
   temperature (and top-p: with top_p < 1 renormalised over the nucleus, warned once), the
   quantity the learner recomputes when top_p = 1.
3. dtype: the learner's parameter dtype unless `dtype` (or `engine_args.dtype`) says otherwise,
   so a float32 learner is not served in bfloat16 (`dtype="auto"` would, on H100/H200, moving
   behaviour log-probs ~1e-2 from the learner's). `provenance()` records both for env.json.
4. Outputs are DELTA (only the tokens new since the last step), so a long episode costs O(n),
   not O(n^2); `abort` and `error` finish reasons are reported as such, never as `length`.
5. Under `accelerate launch` with several processes each rank's engine uses vLLM's
   `external_launcher` executor on its own GPU (`vllm_args.launcher_args`).
6. In-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`): `apply_model` runs our loader directly, and
   `close` tears vLLM's parallel state down so an engine can be made again in the same process.
"""

from __future__ import annotations

import gc
import inspect
import os
import shutil
import tempfile
import threading
import time
import warnings
from collections import deque
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

import torch

from bench.engines.base import Completion, Engine, GenerationRequest, check_request, throughput_stats
from bench.engines.vllm_args import check_engine_args, engine_kwargs
from bench.errors import UsageError

FINISH_REASONS = ("eos", "stop", "length", "abort", "error")
"""What a completion can report; vLLM's others (e.g. "repetition", never asked for) become "error"."""


def _torch_dtype_name(model: Any) -> str:
    """ "float32", "bfloat16", ... of the model's parameters."""
    return str(next(model.parameters()).dtype).removeprefix("torch.")


class VLLMEngine(Engine):
    """Continuous batching on vLLM (one GPU per process). The model is saved to a temporary
    directory (transformers format, with the tokenizer) that vLLM loads; `engine_args` (and any
    other keyword) go to `vllm.EngineArgs`, checked (`bench.engines.vllm_args`)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_batch_size: int = 32,
        max_seq_len: int | None = None,
        dtype: str | None = None,
        engine_args: Mapping[str, Any] | None = None,
        **more_engine_args: Any,
    ) -> None:
        """`dtype`: vLLM's weight dtype (default: `engine_args.dtype`, else the learner's, module docstring 3)."""
        try:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # in-process: see the module docstring
            import vllm
            from vllm.sampling_params import RequestOutputKind
        except ImportError:
            raise UsageError(
                "the vllm engine needs vLLM, which is not installed: pip install -e .[gpu]"
            ) from None
        self._vllm, self._delta = vllm, RequestOutputKind.DELTA
        arg_fields = {f.name: f for f in fields(vllm.EngineArgs)}
        user = check_engine_args("vllm", {**(engine_args or {}), **more_engine_args}, arg_fields)
        reset = inspect.signature(vllm.LLMEngine.reset_prefix_cache).parameters
        if "reset_running_requests" not in reset or "logprobs_mode" not in arg_fields:
            raise UsageError(
                f"vLLM {vllm.__version__} is too old for exact weight updates: pip install -e .[gpu]"
            )
        self.tokenizer, self.version = tokenizer, 0
        self.learner_dtype = _torch_dtype_name(model)
        self.dtype = dtype or user.pop("dtype", None) or self.learner_dtype
        self._dir = tempfile.mkdtemp(prefix="bench-vllm-")
        model.save_pretrained(self._dir)
        tokenizer.save_pretrained(self._dir)
        self._max_len = int(max_seq_len or getattr(model.config, "max_position_embeddings", 2048))
        self.engine_args = engine_kwargs(
            self._dir, self.dtype, max_batch_size, self._max_len, user, arg_fields
        )
        self._external = self.engine_args.get("distributed_executor_backend") == "external_launcher"
        self._engine = vllm.LLMEngine.from_engine_args(vllm.EngineArgs(**self.engine_args))
        self._waiting: deque[GenerationRequest] = deque()
        self._live: dict[str, dict[str, Any]] = {}  # request_id -> prompt, tokens, logprobs, versions
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        self._counters = {"tokens": 0, "seconds": 0.0, "steps": 0, "active": 0}

    def provenance(self) -> dict[str, Any]:
        """What env.json records of this engine: vLLM's version, its dtype and the learner's, the options."""
        options = {k: v for k, v in self.engine_args.items() if k not in ("model", "tokenizer")}
        return {
            "engine": "vllm",
            "vllm_version": self._vllm.__version__,
            "dtype": self.dtype,
            "learner_dtype": self.learner_dtype,
            "engine_args": options,
        }

    def submit(self, request: GenerationRequest) -> None:
        """Queue a request; it is handed to vLLM on the next `step`."""
        check_request(request)
        self._warn_logprob_semantics(request)
        self._waiting.append(request)

    def has_work(self) -> bool:
        """True while any request is queued here or unfinished inside vLLM."""
        return bool(self._waiting) or bool(self._live)

    def step(self) -> list[Completion]:
        """Hand queued requests to vLLM, run one vLLM step, return the finished requests."""
        with self._lock:
            start = time.perf_counter()
            finished: list[Completion] = []
            while self._waiting:
                request = self._waiting.popleft()
                budget = min(request.sampling.max_new_tokens, self._max_len - len(request.prompt_ids))
                if budget <= 0:  # no room for a single token, as in TorchEngine
                    finished.append(
                        Completion(request.request_id, list(request.prompt_ids), [], [], [], "length")
                    )
                else:
                    self._add(request, budget)
            outputs = self._engine.step()
            for out in outputs:
                done = self._record(out)
                if done is not None:
                    finished.append(done)
            c = self._counters
            c["active"] += len(outputs)
            c["steps"] += 1
            c["seconds"] += time.perf_counter() - start
            return finished

    def update_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Load new weights between steps, all of them or raise, then recompute the K/V of
        in-flight requests with them (module docstring, 1)."""
        weights = list(state_dict.items())

        def load(model: torch.nn.Module) -> tuple[set[str] | None, set[str]]:
            loaded = model.load_weights(weights=iter(weights))
            return (None if loaded is None else set(loaded)), {name for name, _ in model.named_parameters()}

        with self._lock:
            for loaded, expected in self._engine.apply_model(load):
                if loaded is None:
                    raise RuntimeError(
                        "vLLM's load_weights named no parameters: cannot tell the update was whole"
                    )
                missing = sorted(expected - loaded)
                if missing:
                    raise RuntimeError(
                        f"partial weight update: {len(missing)} of {len(expected)} vLLM parameters were not "
                        f"loaded from the state dict (e.g. {', '.join(missing[:5])})"
                    )
            if not self._engine.reset_prefix_cache(reset_running_requests=True):
                raise RuntimeError("vLLM refused to reset its cache after a weight update")
            self.version = version

    def stats(self) -> dict[str, float]:
        """tokens_generated, step_seconds, tokens_per_s, mean_active_slots, steps."""
        return throughput_stats(self._counters)

    def sleep(self) -> None:
        """vLLM's sleep mode, level 1 (weights offloaded to CPU memory, KV cache discarded), when
        the engine was made with `enable_sleep_mode` (the run field `engine_sleep`); anything
        still in flight is aborted by vLLM and comes back as such (the loop runs it again)."""
        if self.engine_args.get("enable_sleep_mode"):
            with self._lock:
                self._engine.sleep(level=1)

    def wake_up(self) -> None:
        """Weights and KV cache back on the GPU (the next `update_weights` then overwrites them)."""
        if self.engine_args.get("enable_sleep_mode"):
            with self._lock:
                self._engine.wake_up()

    def close(self) -> None:
        """Shut vLLM down, release its parallel state and GPU memory, delete the model directory
        (idempotent); a new engine can then be made in this process."""
        with self._lock:
            if self._engine is None:
                return
            core = getattr(self._engine, "engine_core", None)
            if core is not None and hasattr(core, "shutdown"):
                core.shutdown()
            self._engine = None
            _release_parallel_state(keep_process_group=self._external)
            shutil.rmtree(self._dir, ignore_errors=True)

    # ---- internals ------------------------------------------------------------------------
    def _add(self, request: GenerationRequest, max_tokens: int) -> None:
        s = request.sampling
        params = self._vllm.SamplingParams(
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=max_tokens,
            stop=list(s.stop) or None,
            include_stop_str_in_output=True,
            seed=request.seed,
            logprobs=0,  # 0: the sampled token only
            output_kind=self._delta,
        )
        self._engine.add_request(request.request_id, {"prompt_token_ids": list(request.prompt_ids)}, params)
        self._live[request.request_id] = {
            "prompt": list(request.prompt_ids),
            "tokens": [],
            "logprobs": [],
            "versions": [],
        }

    def _record(self, out: Any) -> Completion | None:
        """Append the tokens vLLM produced since the last step (DELTA outputs: only the new ones)."""
        state = self._live[out.request_id]
        sample = out.outputs[0]
        new_tokens, given = list(sample.token_ids), sample.logprobs or []
        new_logprobs = (
            [given[i] for i in range(len(given) - len(new_tokens), len(given))] if new_tokens else []
        )
        if len(new_logprobs) != len(new_tokens):
            raise RuntimeError(f"vLLM returned {len(new_tokens)} tokens but {len(new_logprobs)} log-probs")
        for token, entry in zip(new_tokens, new_logprobs):
            state["tokens"].append(int(token))
            state["logprobs"].append(float(entry[token].logprob))
            state["versions"].append(self.version)
        self._counters["tokens"] += len(new_tokens)
        if not out.finished:
            return None
        del self._live[out.request_id]
        reason = str(sample.finish_reason)
        if reason == "stop":  # vLLM says "stop" for eos too; stop_reason is the matched string
            reason = "stop" if isinstance(sample.stop_reason, str) else "eos"
        reason = reason if reason in FINISH_REASONS else "error"
        return Completion(
            out.request_id, state["prompt"], state["tokens"], state["logprobs"], state["versions"], reason
        )

    def _warn_logprob_semantics(self, request: GenerationRequest) -> None:
        if request.sampling.top_p < 1.0 and "top_p" not in self._warned:
            self._warned.add("top_p")
            warnings.warn(
                "with top_p < 1 vLLM's log-probs are renormalised over the nucleus, unlike the "
                "learner's full-distribution log-probs",
                stacklevel=3,
            )


def _release_parallel_state(keep_process_group: bool) -> None:
    """vLLM's model-parallel groups (and, unless a launcher owns it, its process group) torn
    down, and freed memory returned, so the next engine in this process starts clean."""
    try:
        from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel
    except ImportError:  # pragma: no cover - a vLLM without these helpers
        return
    destroy_model_parallel()
    if not keep_process_group:
        destroy_distributed_environment()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
