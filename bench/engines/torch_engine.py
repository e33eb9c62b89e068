"""The pure-PyTorch rollout engine: continuous batching over a fixed set of slots.

This module holds the engine protocol (`TorchEngine`: slots, request admission, sampling,
stop/eos handling, weight versions, `update_weights`, stats) and the architecture-agnostic
`_FullForwardRunner`; the KV-cached fast path lives in `bench.engines.cached_runner`.

Each `step()` admits waiting requests into free slots (lowest first, so a slot freed on one
step is refilled on the very next), prefills the new prompts (their last logits give their
first token), decodes one token for every other active slot, samples all rows in one
vectorised call, and retires rows that hit eos, a stop string or their token budget.

Forward passes, by architecture:
- Llama, Qwen2 and Qwen3 (`config.model_type` in `llama`, `qwen2`, `qwen3`: the tiny default,
  SmolLM2, Llama 2/3, Qwen2.5, Qwen3; full attention in every layer): `_CachedRunner`
  (`bench.engines.cached_runner`), a batched incremental decode built from the HF model's own
  weights, RMSNorm epsilons and rotary module (its rope scaling included), against a per-slot
  K/V cache [slots, kv_heads, capacity, head_dim] that grows on demand up to `max_seq_len`.
  Small-model decode is bound by per-op overhead, not FLOPs, so it is written for few ops per
  layer (see the class docstring); prompts are prefilled in length buckets rather than padded
  to the longest.
- Anything else: `_FullForwardRunner`, a full forward of every active sequence per step
  through the HF model without a cache. Quadratic in length but architecture-agnostic.

Sampling is per request: its own `torch.Generator(seed)` draws one uniform per token for an
inverse-CDF draw over the (top-p truncated) sorted distribution, so a request's tokens do not
depend on the rest of the batch or on `max_batch_size` (up to floating-point differences
between batch shapes, which can only matter at near-exact ties). Large vocabularies sort only
each row's most likely tokens and fall back to a full sort when the draw lands beyond them.

Weight updates (`update_weights`) take the same lock as `step()`. On the cached path the
K/V of in-flight sequences were computed with the old weights, so every active slot is
re-prefilled with the new ones before its next token: each token is then sampled exactly
from the policy version recorded for it (one extra prefill per weight update).
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from bench.engines.base import Completion, Engine, GenerationRequest, check_request, throughput_stats
from bench.engines.cached_runner import _CachedRunner, supports_cache
from bench.models.packing import pack

_ONE_THREAD_MAX_HIDDEN = 256  # default: models up to this hidden size decode on one thread (CPU)
_SAMPLE_HEAD = 128  # tokens sorted per row before falling back to a full sort (large vocabularies)
_UNIFORM_BLOCK = 64  # uniforms drawn from a request's generator at a time (same stream as one by one)


@functools.cache
def _per_thread_intra_op() -> bool:
    """True when torch's intra-op pool is OpenMP's, whose thread count is a per-thread setting."""
    return "parallel backend: OpenMP" in torch.__config__.parallel_info()


@contextmanager
def _intra_op_threads(n: int | None) -> Iterator[None]:
    """torch's intra-op thread count set to `n` for the calling thread (None: unchanged)."""
    previous = torch.get_num_threads()
    if n is None or n == previous:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@dataclass(eq=False)  # compared by identity
class _Active:
    """An admitted request: its slot, random stream and what it has generated so far."""

    request: GenerationRequest
    slot: int
    generator: torch.Generator
    max_new: int
    seq: list[int]  # prompt + generated; the cache holds all but the last token
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    uniforms: list[float] = field(default_factory=list)  # drawn ahead from `generator`, next last

    def next_uniform(self) -> float:
        """The next U(0, 1) of this request's stream (drawn in blocks: one rand call per 64 tokens)."""
        if not self.uniforms:
            self.uniforms = torch.rand(_UNIFORM_BLOCK, generator=self.generator).tolist()[::-1]
        return self.uniforms.pop()

    def record(self, token: int, logprob: float, version: int) -> None:
        """Append one sampled token."""
        self.seq.append(token)
        self.token_ids.append(token)
        self.logprobs.append(logprob)
        self.versions.append(version)

    def completion(self, reason: str) -> Completion:
        """The finished request."""
        r = self.request
        return Completion(
            r.request_id, list(r.prompt_ids), self.token_ids, self.logprobs, self.versions, reason
        )


class _FullForwardRunner:
    """Fallback for models `_CachedRunner` does not run: each step runs every active sequence in full, left-padded,
    through the HF forward (no cache). Correct for any causal LM, quadratic in length."""

    def __init__(self, model: Any, pad_id: int) -> None:
        self.model, self.pad_id = model, pad_id
        self.device = next(model.parameters()).device

    def logits(self, seqs: list[list[int]]) -> torch.Tensor:
        """logits_N_V of the next token after each sequence (left-padded like the learner's batch)."""
        batch = pack(seqs, [[] for _ in seqs], self.pad_id).to(self.device)
        out = self.model(
            input_ids=batch.input_ids_B_L,
            attention_mask=batch.attention_mask_B_L,
            position_ids=batch.position_ids_B_L,
            use_cache=False,
        )
        return out.logits[:, -1]


class TorchEngine(Engine):
    """Continuous-batching engine in plain PyTorch (module docstring); CPU or a single GPU."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_batch_size: int = 32,
        max_seq_len: int | None = None,
        num_threads: int | None = None,
        kv_cache: bool = True,
        dtype: str | None = None,
    ) -> None:
        """`num_threads`: intra-op threads while `step()` runs (set for the calling thread and
        restored after; OpenMP builds of torch only). None = 1 for a small model on CPU (hidden
        size <= 256: decode there is bound by per-op overhead, which more threads only add to, and
        a 1-thread engine leaves the other cores to the learner), otherwise torch's setting.
        `kv_cache=False` runs `_FullForwardRunner` even where `_CachedRunner` could (the reference
        `bench perf --only kv_cache` measures the cache against). `dtype` ("float32", "bfloat16";
        None: the model's own): the engine casts its model to it and samples there, whatever dtype
        the weights it receives come in (`update_weights` casts them), as an inference server in
        bf16 beside a float32 learner does (the run field `engine_dtype`)."""
        if dtype is not None:
            model = model.to(getattr(torch, dtype))
        self.model, self.tokenizer = model.eval(), tokenizer
        self.max_batch_size = max_batch_size
        self.max_seq_len = int(max_seq_len or getattr(model.config, "max_position_embeddings", 2048))
        self.version = 0
        self.eos_ids = self._eos_ids(model, tokenizer)
        self.device = next(model.parameters()).device
        small = int(getattr(model.config, "hidden_size", 1 << 30)) <= _ONE_THREAD_MAX_HIDDEN
        self.num_threads = num_threads or (1 if small and self.device.type == "cpu" else None)
        if not _per_thread_intra_op():  # torch's native thread pool cannot be resized per call
            self.num_threads = None
        if kv_cache and supports_cache(model):
            self._runner: Any = _CachedRunner(model, max_batch_size, self.max_seq_len)
        else:
            pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
            self._runner = _FullForwardRunner(model, pad)
        self.cached = isinstance(self._runner, _CachedRunner)
        self._slots: list[_Active | None] = [None] * max_batch_size
        self._waiting: deque[GenerationRequest] = deque()
        self._queue_lock = threading.Lock()  # submit() may come from another thread
        self._lock = threading.Lock()  # step() vs update_weights()
        self._stale_cache = False
        self._counters = {"tokens": 0, "seconds": 0.0, "steps": 0, "active": 0, "updates": 0}

    @staticmethod
    def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
        """The tokenizer's eos plus the generation config's (instruct models often add one)."""
        gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        ids = [tokenizer.eos_token_id] + (gen_eos if isinstance(gen_eos, list) else [gen_eos])
        return {i for i in ids if i is not None}

    # ---- protocol -------------------------------------------------------------------------
    def submit(self, request: GenerationRequest) -> None:
        """Queue a request (validated here so a bad one fails its caller, not the engine thread)."""
        check_request(request)
        with self._queue_lock:
            self._waiting.append(request)

    def has_work(self) -> bool:
        """True while any request is waiting or active."""
        return bool(self._waiting) or any(a is not None for a in self._slots)

    @property
    def num_waiting(self) -> int:
        """Requests queued for a slot."""
        return len(self._waiting)

    def step(self) -> list[Completion]:
        """Admit, prefill, decode one token per active slot; return what finished."""
        with self._lock, torch.inference_mode(), _intra_op_threads(self.num_threads):
            start = time.perf_counter()
            finished: list[Completion] = []
            new = self._admit(finished)
            old = [a for a in self._slots if a is not None and a not in new]
            rows = new + old
            if rows:
                logits_N_V = self._next_logits(new, old)
                tokens, logps = self._sample(logits_N_V, rows)
                for a, token, logp in zip(rows, tokens, logps):
                    a.record(token, logp, self.version)
                    reason = self._finish_reason(a, token)
                    if reason is not None:
                        finished.append(a.completion(reason))
                        self._slots[a.slot] = None
            c = self._counters
            c["tokens"], c["active"], c["steps"] = (
                c["tokens"] + len(rows),
                c["active"] + len(rows),
                c["steps"] + 1,
            )
            c["seconds"] += time.perf_counter() - start
            return finished

    def update_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Copy `state_dict` into the model between steps (cast to the engine's dtype); later
        tokens carry `version`."""
        with self._lock, torch.no_grad():
            own = self.model.state_dict()
            unexpected = [k for k in state_dict if k not in own]
            provided = {own[k].data_ptr() for k in state_dict if k in own}
            # a key may be absent only if it shares storage with a provided one (tied embeddings)
            missing = [k for k in own if k not in state_dict and own[k].data_ptr() not in provided]
            if unexpected or missing:
                raise ValueError(
                    f"update_weights: unexpected keys {unexpected[:5]}, missing keys {missing[:5]}"
                )
            for name, tensor in state_dict.items():
                own[name].copy_(tensor)
            self.version = version
            self._stale_cache = self.cached  # in-flight K/V were computed with the old weights
            self._counters["updates"] += 1

    def provenance(self) -> dict:
        """The engine and the dtype it samples in (env.json)."""
        return {"engine": type(self).__name__, "dtype": str(next(self.model.parameters()).dtype)}

    def abort_all(self) -> list[Completion]:
        """End every waiting and active request now, each with its tokens so far and finish
        reason "abort" (what vLLM's `/pause?mode=abort` does to in-flight requests)."""
        with self._lock, self._queue_lock:
            out = [a.completion("abort") for a in self._slots if a is not None]
            out += [Completion(r.request_id, list(r.prompt_ids), [], [], [], "abort") for r in self._waiting]
            self._slots = [None] * self.max_batch_size
            self._waiting.clear()
        return out

    def stats(self) -> dict[str, float]:
        """tokens_generated, step_seconds, tokens_per_s, mean_active_slots, steps, weight_updates."""
        return {**throughput_stats(self._counters), "weight_updates": float(self._counters["updates"])}

    def close(self) -> None:
        """Drop all requests and free the cache."""
        with self._lock:
            self._slots = [None] * self.max_batch_size
            self._waiting.clear()
            if self.cached:
                self._runner.close()

    # ---- internals ------------------------------------------------------------------------
    def _admit(self, finished: list[Completion]) -> list[_Active]:
        """Move waiting requests into free slots (lowest first); budget-less ones finish at once."""
        new: list[_Active] = []
        with self._queue_lock:
            for slot in range(self.max_batch_size):
                while self._slots[slot] is None and self._waiting:
                    request = self._waiting.popleft()
                    budget = min(request.sampling.max_new_tokens, self.max_seq_len - len(request.prompt_ids))
                    gen = torch.Generator().manual_seed(request.seed)
                    active = _Active(request, slot, gen, budget, list(request.prompt_ids))
                    if budget <= 0:  # no room for a single token: nothing to generate
                        finished.append(active.completion("length"))
                        continue
                    self._slots[slot] = active
                    new.append(active)
        return new

    def _next_logits(self, new: list[_Active], old: list[_Active]) -> torch.Tensor:
        """logits_N_V for the next token of every row (new rows first, then old)."""
        if not self.cached:
            return self._runner.logits([a.seq for a in new + old])
        parts = []
        refresh = old if self._stale_cache else []
        self._stale_cache = False
        if new or refresh:  # the cache holds all but each sequence's last token
            seqs = [a.seq for a in new] + [a.seq[:-1] for a in refresh]
            parts.append(self._runner.prefill([a.slot for a in new + refresh], seqs)[: len(new)])
        if old:
            pos = [len(a.seq) - 1 for a in old]
            parts.append(self._runner.decode([a.slot for a in old], [a.seq[-1] for a in old], pos))
        return torch.cat(parts)

    def _sample(self, logits_N_V: torch.Tensor, rows: list[_Active]) -> tuple[list[int], list[float]]:
        """One token per row: greedy (temperature 0) or inverse-CDF over the top-p set, drawn
        with the row's own generator; returns tokens and their full-distribution log-probs."""
        device = logits_N_V.device
        logits_N_V = logits_N_V.float()
        temps = [a.request.sampling.temperature for a in rows]
        greedy = [t == 0 for t in temps]
        if any(t != 1.0 for t in temps):  # greedy rows record the untempered distribution
            temps_N = torch.tensor([1.0 if g else t for g, t in zip(greedy, temps)], device=device)
            logp_N_V = torch.log_softmax(logits_N_V / temps_N[:, None], dim=-1)
        else:
            logp_N_V = torch.log_softmax(logits_N_V, dim=-1)
        top_p_N = torch.tensor([a.request.sampling.top_p for a in rows], device=device)
        u_N = torch.tensor([a.next_uniform() for a in rows], device=device)
        if logp_N_V.shape[-1] > 2 * _SAMPLE_HEAD:
            tokens_N = _inverse_cdf_head_first(logp_N_V, top_p_N, u_N)
        else:  # a small vocabulary (the tiny model's 100) sorts in full at no real cost
            tokens_N = _inverse_cdf_sorted(logp_N_V, top_p_N, u_N)
        if any(greedy):
            tokens_N = torch.where(torch.tensor(greedy, device=device), logits_N_V.argmax(-1), tokens_N)
        chosen_N = logp_N_V.gather(-1, tokens_N[:, None]).squeeze(-1)
        return tokens_N.tolist(), chosen_N.tolist()

    def _finish_reason(self, a: _Active, token: int) -> str | None:
        if token in self.eos_ids:
            return "eos"
        stops = a.request.sampling.stop
        if stops:
            # only the tail can hold a stop string completed by this token (we check every step);
            # 2x + 8 tokens leaves room for tokens that decode to less than one character
            window = 2 * max(map(len, stops)) + 8
            tail = self.tokenizer.decode(a.token_ids[-window:], skip_special_tokens=False)
            if any(s in tail for s in stops):
                return "stop"
        if len(a.token_ids) >= a.max_new:
            return "length"
        return None


# ---- sampling ---------------------------------------------------------------------------------
def _inverse_cdf_sorted(logp_N_V: torch.Tensor, top_p_N: torch.Tensor, u_N: torch.Tensor) -> torch.Tensor:
    """The reference draw: sort each row's distribution (descending, ties by token id), keep the
    top-p set (a token stays while the mass before it is < top_p; the top token always stays)
    and return the first kept token whose cumulative mass exceeds u times the kept mass."""
    sorted_logp_N_V, order_N_V = logp_N_V.sort(dim=-1, descending=True, stable=True)
    probs_N_V = sorted_logp_N_V.exp()
    keep_N_V = (probs_N_V.cumsum(-1) - probs_N_V) < top_p_N[:, None]
    kept_cum_N_V = (probs_N_V * keep_N_V).cumsum(-1)
    threshold_N = u_N * kept_cum_N_V[:, -1]
    idx_N = (kept_cum_N_V <= threshold_N[:, None]).sum(-1)  # first index whose cumsum exceeds u
    idx_N = torch.minimum(idx_N, keep_N_V.sum(-1) - 1)
    return order_N_V.gather(-1, idx_N[:, None]).squeeze(-1)


def _inverse_cdf_head_first(logp_N_V: torch.Tensor, top_p_N: torch.Tensor, u_N: torch.Tensor) -> torch.Tensor:
    """The same draw as `_inverse_cdf_sorted`, but sorting only each row's `_SAMPLE_HEAD` most
    likely tokens (a partial top-k instead of a full sort of a 50k vocabulary, which cost a
    quarter of a SmolLM2 decode step). A row is decided in the head when its top-p set ends
    there (its kept mass is then known), or when it keeps everything (top_p >= 1: the kept mass
    is the total) and u lands inside the head's mass. Only the other rows, u deep in the tail
    of a flat distribution, fall back to the full sort. The drawn distribution is the same; a
    draw can differ from the full sort's only when u lies within float rounding of a boundary
    (the total is summed in vocabulary order here, in sorted order there) or at exact ties."""
    head_logp_N_K, head_ids_N_K = logp_N_V.topk(_SAMPLE_HEAD, dim=-1)  # sorted, most likely first
    probs_N_K = head_logp_N_K.exp()
    keep_N_K = (probs_N_K.cumsum(-1) - probs_N_K) < top_p_N[:, None]
    kept_cum_N_K = (probs_N_K * keep_N_K).cumsum(-1)
    kept_N = keep_N_K.sum(-1)
    ends_in_head_N = kept_N < _SAMPLE_HEAD
    mass_N = torch.where(ends_in_head_N, kept_cum_N_K[:, -1], logp_N_V.exp().sum(-1))
    idx_N = (kept_cum_N_K <= (u_N * mass_N)[:, None]).sum(-1)
    decided_N = ends_in_head_N | ((top_p_N >= 1.0) & (idx_N < _SAMPLE_HEAD))
    idx_N = torch.minimum(idx_N, kept_N - 1)
    tokens_N = head_ids_N_K.gather(-1, idx_N[:, None]).squeeze(-1)
    if not bool(decided_N.all()):
        tail_N = (~decided_N).nonzero().squeeze(-1)
        tokens_N[tail_N] = _inverse_cdf_sorted(logp_N_V[tail_N], top_p_N[tail_N], u_N[tail_N])
    return tokens_N
