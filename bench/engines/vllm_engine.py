"""The vLLM rollout engine: the `Engine` protocol on vLLM's `LLMEngine` (add_request / step).

Imported only by `make_engine("vllm", ...)`; vLLM is imported only inside `VLLMEngine`.

What was verified, honestly: this module was written against the vLLM V1 sources (LLMEngine
`add_request`/`step`/`apply_model`, `SamplingParams(logprobs=0, seed=...)`, engine argument
`logprobs_mode`) but could not be run where it was written (no GPU). `tests/gpu/
test_vllm_engine.py` checks generation and log-prob parity on a GPU machine.

Differences from `TorchEngine`, by design or by vLLM's limits:
1. Log-probs use vLLM's `logprobs_mode="processed_logprobs"` (vLLM >= 0.10.2): the sampled
   token's log-prob after temperature *and* top-k/top-p. With top_p = 1 (the RL default)
   this is exactly log_softmax(logits / T), the quantity the learner recomputes; with
   top_p < 1 it is renormalised over the nucleus and differs by log(nucleus mass). Older
   vLLM reports raw (temperature-1) log-probs: correct only at temperature 1. Both cases
   are warned about once.
2. Weight updates load the state dict into the running model in place (`load_weights` via
   `apply_model`; vLLM maps HF names onto its fused qkv/gate_up weights). K/V already
   cached for in-flight requests is NOT recomputed, so tokens after an update are sampled
   from the new weights over a prefix encoded partly by the old ones. Prefix caching is
   off by default so that no stale prefix is reused across updates.
3. The engine runs in-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`), so `apply_model` calls
   our loader directly instead of pickling the weights to a worker process.
"""

from __future__ import annotations

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
from bench.errors import UsageError


class VLLMEngine(Engine):
    """Continuous batching on vLLM (one GPU). The model is saved to a temporary directory
    (transformers format, with the tokenizer) that vLLM loads; `engine_kwargs` go to
    `vllm.EngineArgs` (e.g. gpu_memory_utilization, enforce_eager, enable_prefix_caching)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_batch_size: int = 32,
        max_seq_len: int | None = None,
        dtype: str = "auto",
        **engine_kwargs: Any,
    ) -> None:
        try:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # in-process: see the module docstring
            import vllm
        except ImportError:
            raise UsageError(
                "the vllm engine needs vLLM, which is not installed: pip install -e .[gpu]"
            ) from None
        self._vllm = vllm
        self.tokenizer, self.version = tokenizer, 0
        self._dir = tempfile.mkdtemp(prefix="bench-vllm-")
        model.save_pretrained(self._dir)
        tokenizer.save_pretrained(self._dir)
        self._max_len = int(max_seq_len or getattr(model.config, "max_position_embeddings", 2048))
        args = dict(
            model=self._dir,
            tokenizer=self._dir,
            dtype=dtype,
            max_num_seqs=max_batch_size,
            max_model_len=self._max_len,
            enable_prefix_caching=False,
            enforce_eager=True,
            gpu_memory_utilization=0.5,
            seed=0,
        )
        args.update(engine_kwargs)
        names = {f.name for f in fields(vllm.EngineArgs)}
        self._processed_logprobs = "logprobs_mode" in names
        if self._processed_logprobs:
            args.setdefault("logprobs_mode", "processed_logprobs")
        self._engine = vllm.LLMEngine.from_engine_args(vllm.EngineArgs(**args))
        self._waiting: deque[GenerationRequest] = deque()
        self._live: dict[str, dict[str, Any]] = {}  # request_id -> prompt, tokens, logprobs, versions
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        self._counters = {"tokens": 0, "seconds": 0.0, "steps": 0, "active": 0}

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
        """Load new weights into the running vLLM model between steps (module docstring, 2)."""
        weights = list(state_dict.items())

        def load(model: torch.nn.Module) -> None:
            model.load_weights(weights=iter(weights))

        with self._lock:
            self._engine.apply_model(load)
            self.version = version

    def stats(self) -> dict[str, float]:
        """tokens_generated, step_seconds, tokens_per_s, mean_active_slots, steps."""
        return throughput_stats(self._counters)

    def close(self) -> None:
        """Shut vLLM down and delete the temporary model directory."""
        with self._lock:
            core = getattr(self._engine, "engine_core", None)
            if core is not None and hasattr(core, "shutdown"):
                core.shutdown()
            self._engine = None
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
        )
        self._engine.add_request(request.request_id, {"prompt_token_ids": list(request.prompt_ids)}, params)
        self._live[request.request_id] = {
            "prompt": list(request.prompt_ids),
            "tokens": [],
            "logprobs": [],
            "versions": [],
        }

    def _record(self, out: Any) -> Completion | None:
        """Append the tokens vLLM produced since the last step (outputs are cumulative)."""
        state = self._live[out.request_id]
        sample = out.outputs[0]
        new_tokens = list(sample.token_ids)[len(state["tokens"]) :]
        new_logprobs = list(sample.logprobs or [])[len(state["logprobs"]) :]
        for token, entry in zip(new_tokens, new_logprobs):
            state["tokens"].append(int(token))
            state["logprobs"].append(float(entry[token].logprob))
            state["versions"].append(self.version)
        self._counters["tokens"] += len(new_tokens)
        if not out.finished:
            return None
        del self._live[out.request_id]
        reason = sample.finish_reason
        if reason == "stop":  # vLLM says "stop" for eos too; stop_reason is the matched string
            reason = "stop" if isinstance(sample.stop_reason, str) else "eos"
        return Completion(
            out.request_id,
            state["prompt"],
            state["tokens"],
            state["logprobs"],
            state["versions"],
            reason if reason in ("eos", "stop") else "length",
        )

    def _warn_logprob_semantics(self, request: GenerationRequest) -> None:
        s = request.sampling
        if not self._processed_logprobs and s.temperature not in (0.0, 1.0) and "raw" not in self._warned:
            self._warned.add("raw")
            warnings.warn(
                "this vLLM reports untempered log-probs; they differ from the learner's at "
                f"temperature {s.temperature} (upgrade to vLLM >= 0.10.2)",
                stacklevel=3,
            )
        if self._processed_logprobs and s.top_p < 1.0 and "top_p" not in self._warned:
            self._warned.add("top_p")
            warnings.warn(
                "with top_p < 1 vLLM's log-probs are renormalised over the nucleus, unlike the "
                "learner's full-distribution log-probs",
                stacklevel=3,
            )
