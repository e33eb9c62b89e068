"""The pure-PyTorch rollout engine: continuous batching over a fixed set of slots.

Each `step()` (1) admits waiting requests into free slots, lowest slot first, so a slot freed
on one step is refilled on the very next; (2) prefills the new prompts, whose last-position
logits give their first token; (3) decodes one token for every other active slot; (4) samples
all of those rows in one vectorised call; (5) retires rows that hit eos, a stop string or
their token budget.

Forward passes, by architecture:
- Llama (`config.model_type == "llama"`: the tiny default, SmolLM2, Llama 2/3): `_LlamaRunner`,
  a batched incremental decode that calls the HF model's own submodules (embeddings,
  RMSNorms, `model.model.rotary_emb` incl. its rope scaling, q/k/v/o projections, MLP,
  lm_head) and only re-implements attention, against a per-slot K/V cache
  [slots, kv_heads, capacity, head_dim] that grows on demand up to `max_seq_len`.
- Anything else: `_FullForwardRunner`, a full forward of every active sequence per step
  through the HF model without a cache. Quadratic in length but architecture-agnostic.

Sampling is per request: its own `torch.Generator(seed)` draws one uniform per token, used
by an inverse-CDF draw over the (top-p truncated) sorted distribution. A request's tokens
therefore do not depend on what else is in the batch or on `max_batch_size` (up to
floating-point differences between batch shapes, which can only matter at near-exact ties).

Weight updates (`update_weights`) take the same lock as `step()`. On the cached path the
K/V of in-flight sequences were computed with the old weights, so every active slot is
re-prefilled with the new ones before its next token: each token is then sampled exactly
from the policy version recorded for it (one extra prefill per weight update).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from bench.engines.base import Completion, Engine, GenerationRequest

_MAX_PREFILL_TOKENS = 16384  # padded prompt tokens per prefill forward: bounds activation memory


@dataclass
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

    def completion(self, reason: str) -> Completion:
        """The finished request."""
        r = self.request
        return Completion(r.request_id, list(r.prompt_ids), self.token_ids, self.logprobs, self.versions, reason)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding (HF convention: rotate_half over the two halves of head_dim)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos.unsqueeze(1) + rotated * sin.unsqueeze(1)


class _LlamaRunner:
    """Batched prefill/decode of a HF Llama model against a per-slot K/V cache."""

    def __init__(self, model: Any, slots: int, max_len: int) -> None:
        cfg = model.config
        self.model, self.slots, self.max_len = model, slots, max_len
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.group = self.heads // self.kv_heads
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype
        self.capacity = 0
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []

    def ensure_capacity(self, needed: int) -> None:
        """Grow every layer's cache to hold `needed` positions (doubling, capped at max_len)."""
        if needed <= self.capacity:
            return
        new_cap = min(self.max_len, max(needed, 2 * self.capacity, 64))
        shape = (self.slots, self.kv_heads, new_cap, self.head_dim)
        for cache in (self.k, self.v):
            for i in range(len(self.model.model.layers)):
                grown = torch.zeros(shape, device=self.device, dtype=self.dtype)
                if cache and i < len(cache):
                    grown[:, :, : self.capacity] = cache[i]
                    cache[i] = grown
                else:
                    cache.append(grown)
        self.capacity = new_cap

    def _layers(self, x_N_Q_H: torch.Tensor, positions_N_Q: torch.Tensor, attend) -> torch.Tensor:
        """The decoder stack; `attend(layer_idx, q, k, v)` supplies attention over the cache."""
        cos, sin = self.model.model.rotary_emb(x_N_Q_H, positions_N_Q)
        N, Q, _ = x_N_Q_H.shape
        for i, layer in enumerate(self.model.model.layers):
            h = layer.input_layernorm(x_N_Q_H)
            attn = layer.self_attn
            q = attn.q_proj(h).view(N, Q, self.heads, self.head_dim).transpose(1, 2)  # [N, H, Q, d]
            k = attn.k_proj(h).view(N, Q, self.kv_heads, self.head_dim).transpose(1, 2)  # [N, Hkv, Q, d]
            v = attn.v_proj(h).view(N, Q, self.kv_heads, self.head_dim).transpose(1, 2)
            q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
            out_N_Q_D = attend(i, q, k, v, getattr(attn, "scaling", self.head_dim**-0.5))
            x_N_Q_H = x_N_Q_H + attn.o_proj(out_N_Q_D)
            x_N_Q_H = x_N_Q_H + layer.mlp(layer.post_attention_layernorm(x_N_Q_H))
        return self.model.model.norm(x_N_Q_H)

    def prefill(self, slots: list[int], seqs: list[list[int]]) -> torch.Tensor:
        """Run whole sequences from position 0 into their slots; logits_N_V at each last token."""
        out: list[torch.Tensor] = []
        start = 0
        while start < len(seqs):  # chunks of rows, so one forward stays under the token budget
            end = start + 1
            while end < len(seqs) and (end + 1 - start) * max(map(len, seqs[start : end + 1])) <= _MAX_PREFILL_TOKENS:
                end += 1
            out.append(self._prefill_chunk(slots[start:end], seqs[start:end]))
            start = end
        return torch.cat(out)

    def _prefill_chunk(self, slots: list[int], seqs: list[list[int]]) -> torch.Tensor:
        N, Q = len(seqs), max(map(len, seqs))
        self.ensure_capacity(Q)
        # right padding: with a purely causal mask no real token ever attends to a pad, and the
        # pads' K/V land at cache positions >= the sequence length, which decode masks out
        ids_N_Q = torch.zeros((N, Q), dtype=torch.long)
        for n, seq in enumerate(seqs):
            ids_N_Q[n, : len(seq)] = torch.tensor(seq)
        ids_N_Q = ids_N_Q.to(self.device)
        slots_N = torch.tensor(slots, device=self.device)
        positions_N_Q = torch.arange(Q, device=self.device).expand(N, Q)

        def attend(i, q, k, v, scaling):
            self.k[i][slots_N, :, :Q] = k
            self.v[i][slots_N, :, :Q] = v
            k, v = k.repeat_interleave(self.group, dim=1), v.repeat_interleave(self.group, dim=1)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling)  # [N, H, Q, d]
            return out.transpose(1, 2).reshape(N, Q, self.heads * self.head_dim)

        x = self._layers(self.model.model.embed_tokens(ids_N_Q), positions_N_Q, attend)
        last_N = torch.tensor([len(s) - 1 for s in seqs], device=self.device)
        return self.model.lm_head(x[torch.arange(N, device=self.device), last_N])

    def decode(self, slots: list[int], tokens: list[int], positions: list[int]) -> torch.Tensor:
        """Feed one token per listed slot at its position; logits_N_V for those slots.

        The batch is the slot range [0, max(slots)] as views of the cache (no gather copies);
        idle slots inside it run a dummy token at position 0 (reading, never writing, the
        cache), and their outputs are dropped.
        """
        R = max(slots) + 1
        tokens_R, positions_R = torch.zeros(R, dtype=torch.long), torch.zeros(R, dtype=torch.long)
        tokens_R[slots], positions_R[slots] = torch.tensor(tokens), torch.tensor(positions)
        tokens_R, positions_R = tokens_R.to(self.device), positions_R.to(self.device)
        K = max(positions) + 1  # keys needed: every slot's prefix including its new token
        self.ensure_capacity(K)
        slots_N = torch.tensor(slots, device=self.device)
        positions_N = positions_R[slots_N]
        allowed_R_K = torch.arange(K, device=self.device)[None, :] <= positions_R[:, None]

        def attend(i, q, k, v, scaling):
            # write only the listed slots: an idle row may be a slot prefilled on this very step
            self.k[i][slots_N, :, positions_N] = k[slots_N, :, 0]  # [N, Hkv, d] at each slot's position
            self.v[i][slots_N, :, positions_N] = v[slots_N, :, 0]
            keys, values = self.k[i][:R, :, :K], self.v[i][:R, :, :K]  # [R, Hkv, K, d] views
            # grouped-query attention without repeating K/V: heads of one KV group share a matmul
            q_R_G_g_d = q.view(R, self.kv_heads, self.group, self.head_dim)
            scores = torch.matmul(q_R_G_g_d, keys.transpose(-1, -2)).float() * scaling  # [R, Hkv, g, K]
            scores = scores.masked_fill(~allowed_R_K[:, None, None, :], float("-inf"))
            probs = torch.softmax(scores, dim=-1).to(values.dtype)
            out = torch.matmul(probs, values)  # [R, Hkv, g, d]
            return out.reshape(R, 1, self.heads * self.head_dim)

        x = self._layers(self.model.model.embed_tokens(tokens_R[:, None]), positions_R[:, None], attend)
        return self.model.lm_head(x[slots, 0])

    def close(self) -> None:
        """Free the cache."""
        self.k, self.v, self.capacity = [], [], 0


class _FullForwardRunner:
    """Fallback for non-Llama models: each step runs every active sequence in full, left-padded,
    through the HF forward (no cache). Correct for any causal LM, quadratic in length."""

    def __init__(self, model: Any, pad_id: int) -> None:
        self.model, self.pad_id = model, pad_id
        self.device = next(model.parameters()).device

    def logits(self, seqs: list[list[int]]) -> torch.Tensor:
        """logits_N_V of the next token after each sequence."""
        L = max(map(len, seqs))
        ids_N_L = torch.full((len(seqs), L), self.pad_id, dtype=torch.long)
        mask_N_L = torch.zeros((len(seqs), L), dtype=torch.long)
        for n, seq in enumerate(seqs):
            ids_N_L[n, L - len(seq) :] = torch.tensor(seq)
            mask_N_L[n, L - len(seq) :] = 1
        positions_N_L = (mask_N_L.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=ids_N_L.to(self.device), attention_mask=mask_N_L.to(self.device),
            position_ids=positions_N_L.to(self.device), use_cache=False,
        )
        return out.logits[:, -1]


class TorchEngine(Engine):
    """Continuous-batching engine in plain PyTorch (module docstring); CPU or a single GPU."""

    def __init__(self, model: Any, tokenizer: Any, max_batch_size: int = 32, max_seq_len: int | None = None) -> None:
        self.model, self.tokenizer = model.eval(), tokenizer
        self.max_batch_size = max_batch_size
        self.max_seq_len = int(max_seq_len or getattr(model.config, "max_position_embeddings", 2048))
        self.version = 0
        self.eos_ids = self._eos_ids(model, tokenizer)
        self.device = next(model.parameters()).device
        inner = getattr(model, "model", None)
        if model.config.model_type == "llama" and hasattr(inner, "rotary_emb") and hasattr(inner, "layers"):
            self._runner: Any = _LlamaRunner(model, max_batch_size, self.max_seq_len)
        else:
            pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
            self._runner = _FullForwardRunner(model, pad)
        self.cached = isinstance(self._runner, _LlamaRunner)
        self._slots: list[_Active | None] = [None] * max_batch_size
        self._waiting: deque[GenerationRequest] = deque()
        self._queue_lock = threading.Lock()  # submit() may come from another thread
        self._lock = threading.Lock()  # step() vs update_weights()
        self._stale_cache = False
        self._counters = {"tokens": 0, "seconds": 0.0, "steps": 0, "active": 0, "updates": 0}

    @staticmethod
    def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
        ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
        gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        ids.update(gen_eos if isinstance(gen_eos, list) else [] if gen_eos is None else [gen_eos])
        return ids

    # ---- protocol -------------------------------------------------------------------------
    def submit(self, request: GenerationRequest) -> None:
        """Queue a request (validated here so a bad one fails its caller, not the engine thread)."""
        s = request.sampling
        if not request.prompt_ids:
            raise ValueError(f"request {request.request_id}: empty prompt (add the bos token)")
        if s.temperature < 0 or not 0 < s.top_p <= 1:
            raise ValueError(f"request {request.request_id}: need temperature >= 0 and 0 < top_p <= 1, got {s}")
        with self._queue_lock:
            self._waiting.append(request)

    def has_work(self) -> bool:
        """True while any request is waiting or active."""
        return bool(self._waiting) or any(a is not None for a in self._slots)

    @property
    def num_active(self) -> int:
        """Requests currently holding a slot."""
        return sum(a is not None for a in self._slots)

    @property
    def num_waiting(self) -> int:
        """Requests queued for a slot."""
        return len(self._waiting)

    def step(self) -> list[Completion]:
        """Admit, prefill, decode one token per active slot; return what finished."""
        with self._lock, torch.inference_mode():
            start = time.perf_counter()
            finished: list[Completion] = []
            new = self._admit(finished)
            old = [a for a in self._slots if a is not None and a not in new]
            rows = new + old
            if rows:
                logits_N_V = self._next_logits(new, old)
                tokens, logps = self._sample(logits_N_V, rows)
                for a, token, logp in zip(rows, tokens, logps):
                    a.seq.append(token)
                    a.token_ids.append(token)
                    a.logprobs.append(logp)
                    a.versions.append(self.version)
                    reason = self._finish_reason(a, token)
                    if reason is not None:
                        finished.append(a.completion(reason))
                        self._slots[a.slot] = None
            c = self._counters
            c["tokens"] += len(rows)
            c["active"] += len(rows)
            c["steps"] += 1
            c["seconds"] += time.perf_counter() - start
            return finished

    def update_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Copy `state_dict` into the model between steps; later tokens carry `version`."""
        with self._lock, torch.no_grad():
            own = self.model.state_dict()
            unexpected = [k for k in state_dict if k not in own]
            provided = {own[k].data_ptr() for k in state_dict if k in own}
            # a key may be absent only if it shares storage with a provided one (tied embeddings)
            missing = [k for k in own if k not in state_dict and own[k].data_ptr() not in provided]
            if unexpected or missing:
                raise ValueError(f"update_weights: unexpected keys {unexpected[:5]}, missing keys {missing[:5]}")
            for name, tensor in state_dict.items():
                own[name].copy_(tensor)
            self.version = version
            self._stale_cache = self.cached  # in-flight K/V were computed with the old weights
            self._counters["updates"] += 1

    def stats(self) -> dict[str, float]:
        """tokens_generated, step_seconds, tokens_per_s, mean_active_slots, steps, weight_updates."""
        c = self._counters
        return {
            "tokens_generated": float(c["tokens"]),
            "step_seconds": c["seconds"],
            "tokens_per_s": c["tokens"] / c["seconds"] if c["seconds"] > 0 else 0.0,
            "mean_active_slots": c["active"] / c["steps"] if c["steps"] else 0.0,
            "steps": float(c["steps"]),
            "weight_updates": float(c["updates"]),
        }

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
        temps_N = torch.tensor([a.request.sampling.temperature for a in rows], device=device)
        top_p_N = torch.tensor([a.request.sampling.top_p for a in rows], device=device)
        greedy_N = temps_N == 0
        logp_N_V = torch.log_softmax(logits_N_V / torch.where(greedy_N, 1.0, temps_N)[:, None], dim=-1)
        sorted_logp_N_V, order_N_V = logp_N_V.sort(dim=-1, descending=True, stable=True)
        probs_N_V = sorted_logp_N_V.exp()
        keep_N_V = (probs_N_V.cumsum(-1) - probs_N_V) < top_p_N[:, None]  # the top token always stays
        kept_cum_N_V = (probs_N_V * keep_N_V).cumsum(-1)
        u_N = torch.tensor([torch.rand((), generator=a.generator).item() for a in rows], device=device)
        threshold_N = u_N * kept_cum_N_V[:, -1]
        idx_N = (kept_cum_N_V <= threshold_N[:, None]).sum(-1)  # first index whose cumsum exceeds u
        idx_N = torch.minimum(idx_N, keep_N_V.sum(-1) - 1)
        tokens_N = order_N_V.gather(-1, idx_N[:, None]).squeeze(-1)
        tokens_N = torch.where(greedy_N, logits_N_V.argmax(-1), tokens_N)
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
