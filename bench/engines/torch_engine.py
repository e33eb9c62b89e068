"""The pure-PyTorch rollout engine: continuous batching over a fixed set of slots.

Each `step()` admits waiting requests into free slots (lowest first, so a slot freed on one
step is refilled on the very next), prefills the new prompts (their last logits give their
first token), decodes one token for every other active slot, samples all rows in one
vectorised call, and retires rows that hit eos, a stop string or their token budget.

Forward passes, by architecture:
- Llama (`config.model_type == "llama"`: the tiny default, SmolLM2, Llama 2/3): `_LlamaRunner`,
  a batched incremental decode that calls the HF model's own submodules (embeddings,
  RMSNorms, `model.model.rotary_emb` incl. its rope scaling, q/k/v/o projections, MLP,
  lm_head) and only re-implements attention, against a per-slot K/V cache
  [slots, kv_heads, capacity, head_dim] that grows on demand up to `max_seq_len`.
- Anything else: `_FullForwardRunner`, a full forward of every active sequence per step
  through the HF model without a cache. Quadratic in length but architecture-agnostic.

Sampling is per request: its own `torch.Generator(seed)` draws one uniform per token for an
inverse-CDF draw over the (top-p truncated) sorted distribution, so a request's tokens do not
depend on the rest of the batch or on `max_batch_size` (up to floating-point differences
between batch shapes, which can only matter at near-exact ties).

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
from bench.models import pack

_MAX_PREFILL_TOKENS = 16384  # padded prompt tokens per prefill forward: bounds activation memory
_FUSE_MAX_BYTES = 512 << 20  # models up to this size get fused, pre-transposed weight copies
_UNIFORM_BLOCK = 64  # uniforms drawn from a request's generator at a time (same stream as one by one)


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
        return Completion(r.request_id, list(r.prompt_ids), self.token_ids, self.logprobs, self.versions, reason)


def _rms_norm(x: torch.Tensor, norm: Any) -> torch.Tensor:
    """HF `LlamaRMSNorm` as one fused op: float32 statistics, the weight applied in the model dtype."""
    if x.dtype == torch.float32:
        return F.rms_norm(x, x.shape[-1:], norm.weight, norm.variance_epsilon)
    return norm.weight * F.rms_norm(x.float(), x.shape[-1:], eps=norm.variance_epsilon).to(x.dtype)


_Weight = tuple[torch.Tensor, torch.Tensor | None]  # (weight as [in, out], bias or None)


def _project(h: torch.Tensor, parts: list[_Weight]) -> torch.Tensor:
    """h @ W (+ b) for each part, concatenated along the last dim."""
    flat = h.reshape(-1, h.shape[-1])
    outs = [torch.mm(flat, w) if b is None else torch.addmm(b, flat, w) for w, b in parts]
    out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=-1)
    return out.view(*h.shape[:-1], out.shape[-1])


def _add_linear(x: torch.Tensor, h: torch.Tensor, weight: _Weight) -> torch.Tensor:
    """The residual update x + h @ W (+ b), as one addmm."""
    w, b = weight
    out = torch.addmm(x.reshape(-1, x.shape[-1]), h.reshape(-1, h.shape[-1]), w).view_as(x)
    return out if b is None else out + b


@dataclass
class _Block:
    """One decoder layer as the runner uses it: projections as [in, out] matrices (q/k/v and
    gate/up concatenated, all made contiguous, when the runner fuses: small models)."""

    ln1: Any
    qkv: list[_Weight]
    o: _Weight
    ln2: Any
    gate_up: list[_Weight]
    down: _Weight
    act: Any
    scaling: float


class _LlamaRunner:
    """Batched prefill/decode of a HF Llama model against a per-slot K/V cache.

    Speed (decode of a small model is bound by per-op overhead, not FLOPs): per layer one
    fused RMSNorm, one q/k/v matmul (weights concatenated once, rebuilt when the model's
    weights change), RoPE on q and k together from a cos/sin table indexed by position,
    attention as baddbmm/softmax/bmm on cache views with an additive mask shared by all
    layers, residual adds folded into addmm, one gate/up matmul.
    """

    def __init__(self, model: Any, slots: int, max_len: int) -> None:
        cfg = model.config
        self.model, self.slots, self.max_len = model, slots, max_len
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.group = self.heads // self.kv_heads
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype
        self._params = list(model.parameters())
        self.fuse = sum(p.numel() * p.element_size() for p in self._params) <= _FUSE_MAX_BYTES
        rope_type = str(getattr(model.model.rotary_emb, "rope_type", "default"))
        # dynamic/longrope frequencies depend on the batch's length: no position table for them
        self.rope_table = "dynamic" not in rope_type and "longrope" not in rope_type
        half = self.head_dim // 2
        self.sign = torch.tensor([-1.0] * half + [1.0] * (self.head_dim - half), device=self.device, dtype=self.dtype)
        self.capacity = 0
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []
        self.cos = self.sin = torch.empty(0)
        self._blocks: list[_Block] = []
        self._head: _Weight = (torch.empty(0), None)
        self._weights_key: tuple = ()

    def ensure_capacity(self, needed: int) -> None:
        """Grow every layer's cache (and the RoPE table) to `needed` positions (doubling, capped)."""
        if needed <= self.capacity:
            return
        new_cap = min(self.max_len, max(needed, 2 * self.capacity, 64))

        def grown(old: torch.Tensor | None) -> torch.Tensor:
            new = torch.zeros((self.slots, self.kv_heads, new_cap, self.head_dim), device=self.device, dtype=self.dtype)
            if old is not None:
                new[:, :, : self.capacity] = old
            return new

        n_layers = len(self.model.model.layers)
        self.k = [grown(self.k[i] if self.k else None) for i in range(n_layers)]
        self.v = [grown(self.v[i] if self.v else None) for i in range(n_layers)]
        if self.rope_table:
            cos, sin = self._hf_rope(torch.arange(new_cap, device=self.device)[None])  # [1, cap, 1, d]
            self.cos, self.sin = cos[0], sin[0]  # [cap, 1, d]
        self.capacity = new_cap

    def _hf_rope(self, positions_N_Q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sign-folded sin [N, Q, 1, d] from the model's own rotary module (its scaling
        included): rotate_half(x) * sin == roll(x, d/2) * (sign * sin)."""
        cos, sin = self.model.model.rotary_emb(torch.empty(0, device=self.device, dtype=self.dtype), positions_N_Q)
        return cos[:, :, None], (sin * self.sign)[:, :, None]

    def blocks(self) -> list[_Block]:
        """The layers' weights; fused copies are rebuilt whenever a parameter changed in place."""
        key = tuple((p.data_ptr(), p._version) for p in self._params) if self.fuse else (0,)
        if key != self._weights_key:
            with torch.no_grad():
                self._blocks = [self._block(layer) for layer in self.model.model.layers]
                head = self.model.lm_head
                self._head = (head.weight.t().contiguous() if self.fuse else head.weight.t(), head.bias)
            self._weights_key = key
        return self._blocks

    def _block(self, layer: Any) -> _Block:
        attn, mlp = layer.self_attn, layer.mlp

        def parts(*linears: Any) -> list[_Weight]:
            if not self.fuse:  # transposed views of the model's own weights
                return [(lin.weight.t(), lin.bias) for lin in linears]
            bias = None if linears[0].bias is None else torch.cat([lin.bias for lin in linears])
            # a contiguous [in, out] copy: MKL's small-batch GEMM is faster on it than on W.t()
            return [(torch.cat([lin.weight for lin in linears]).t().contiguous(), bias)]

        act = F.silu if isinstance(mlp.act_fn, torch.nn.SiLU) else mlp.act_fn
        return _Block(
            layer.input_layernorm, parts(attn.q_proj, attn.k_proj, attn.v_proj), parts(attn.o_proj)[0],
            layer.post_attention_layernorm, parts(mlp.gate_proj, mlp.up_proj), parts(mlp.down_proj)[0], act,
            getattr(attn, "scaling", self.head_dim**-0.5),
        )

    def _layers(self, x_N_Q_H: torch.Tensor, positions_N_Q: torch.Tensor, attend) -> torch.Tensor:
        """The decoder stack; `attend(layer_idx, q, k, v, scaling)` (each [N, Q, heads, d])
        supplies attention over the cache and returns [N, Q, heads * d]."""
        if self.rope_table:
            cos, sin = self.cos[positions_N_Q], self.sin[positions_N_Q]  # [N, Q, 1, d]
        else:
            cos, sin = self._hf_rope(positions_N_Q)
        H, Hkv, d = self.heads, self.kv_heads, self.head_dim
        for i, b in enumerate(self.blocks()):
            qkv = _project(_rms_norm(x_N_Q_H, b.ln1), b.qkv)  # [N, Q, (H + 2 Hkv) d]
            qk = qkv[..., : (H + Hkv) * d].unflatten(-1, (H + Hkv, d))  # [N, Q, H + Hkv, d]
            qk = torch.addcmul(qk * cos, qk.roll(d // 2, -1), sin)  # RoPE on q and k at once
            v = qkv[..., (H + Hkv) * d :].unflatten(-1, (Hkv, d))  # [N, Q, Hkv, d]
            x_N_Q_H = _add_linear(x_N_Q_H, attend(i, qk[:, :, :H], qk[:, :, H:], v, b.scaling), b.o)
            gate, up = _project(_rms_norm(x_N_Q_H, b.ln2), b.gate_up).chunk(2, dim=-1)
            x_N_Q_H = _add_linear(x_N_Q_H, b.act(gate) * up, b.down)
        return _rms_norm(x_N_Q_H, self.model.model.norm)

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
        ids_N_Q = torch.tensor([seq + [0] * (Q - len(seq)) for seq in seqs], device=self.device)
        slots_N = torch.tensor(slots, device=self.device)
        positions_N_Q = torch.arange(Q, device=self.device).expand(N, Q)

        def attend(i, q, k, v, scaling):
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [N, heads, Q, d]
            self.k[i][slots_N, :, :Q] = k
            self.v[i][slots_N, :, :Q] = v
            k, v = k.repeat_interleave(self.group, dim=1), v.repeat_interleave(self.group, dim=1)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling)  # [N, H, Q, d]
            return out.transpose(1, 2).reshape(N, Q, self.heads * self.head_dim)

        x = self._layers(self.model.model.embed_tokens(ids_N_Q), positions_N_Q, attend)
        last_N = torch.tensor([len(s) - 1 for s in seqs], device=self.device)
        return _project(x[torch.arange(N, device=self.device), last_N], [self._head])

    def decode(self, slots: list[int], tokens: list[int], positions: list[int]) -> torch.Tensor:
        """Feed one token per listed slot at its position; logits_N_V for those slots.

        The batch is the slot range [0, max(slots)] as cache views (no gather copies); idle slots
        in it run a dummy token at position 0, never write the cache, and are dropped.
        """
        R, K = max(slots) + 1, max(positions) + 1  # K: keys needed, every prefix incl. its new token
        tokens_R, positions_R = [0] * R, [0] * R
        for slot, token, pos in zip(slots, tokens, positions):
            tokens_R[slot], positions_R[slot] = token, pos
        self.ensure_capacity(K)
        dev, Hkv, g, d = self.device, self.kv_heads, self.group, self.head_dim
        slots_N, positions_N = torch.tensor(slots, device=dev), torch.tensor(positions, device=dev)
        positions_R_1 = torch.tensor(positions_R, device=dev)[:, None]
        masked_R_K = torch.arange(K, device=dev)[None, :] > positions_R_1
        bias_R_K = torch.zeros((R, K), device=dev, dtype=self.dtype).masked_fill_(masked_R_K, float("-inf"))
        bias_M_g_K = bias_R_K[:, None, None, :].expand(R, Hkv, g, K).reshape(R * Hkv, g, K)  # M = R * Hkv

        def attend(i, q, k, v, scaling):
            # write only the listed slots: an idle row may be a slot prefilled on this very step
            self.k[i][slots_N, :, positions_N] = k[slots_N, 0]  # [N, Hkv, d] at each slot's position
            self.v[i][slots_N, :, positions_N] = v[slots_N, 0]
            keys_M_K_d = self.k[i][:R, :, :K].reshape(R * Hkv, K, d)  # views of the cache
            values_M_K_d = self.v[i][:R, :, :K].reshape(R * Hkv, K, d)
            # grouped-query attention without repeating K/V: the g heads of one KV group share a bmm
            q_M_g_d = q.reshape(R * Hkv, g, d)
            scores_M_g_K = torch.baddbmm(bias_M_g_K, q_M_g_d, keys_M_K_d.transpose(1, 2), alpha=scaling)
            probs_M_g_K = torch.softmax(scores_M_g_K, dim=-1, dtype=torch.float32).to(self.dtype)
            return torch.bmm(probs_M_g_K, values_M_K_d).view(R, 1, self.heads * d)

        x = self._layers(self.model.model.embed_tokens(torch.tensor(tokens_R, device=dev)[:, None]), positions_R_1, attend)
        return _project(x[slots_N, 0], [self._head])

    def close(self) -> None:
        """Free the cache."""
        self.k, self.v, self.capacity = [], [], 0
        self._blocks, self._weights_key = [], ()


class _FullForwardRunner:
    """Fallback for non-Llama models: each step runs every active sequence in full, left-padded,
    through the HF forward (no cache). Correct for any causal LM, quadratic in length."""

    def __init__(self, model: Any, pad_id: int) -> None:
        self.model, self.pad_id = model, pad_id
        self.device = next(model.parameters()).device

    def logits(self, seqs: list[list[int]]) -> torch.Tensor:
        """logits_N_V of the next token after each sequence (left-padded like the learner's batch)."""
        batch = pack(seqs, [[] for _ in seqs], self.pad_id).to(self.device)
        out = self.model(
            input_ids=batch.input_ids_B_L, attention_mask=batch.attention_mask_B_L,
            position_ids=batch.position_ids_B_L, use_cache=False,
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
        """The tokenizer's eos plus the generation config's (instruct models often add one)."""
        gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        ids = [tokenizer.eos_token_id] + (gen_eos if isinstance(gen_eos, list) else [gen_eos])
        return {i for i in ids if i is not None}

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
                    a.record(token, logp, self.version)
                    reason = self._finish_reason(a, token)
                    if reason is not None:
                        finished.append(a.completion(reason))
                        self._slots[a.slot] = None
            c = self._counters
            c["tokens"], c["active"], c["steps"] = c["tokens"] + len(rows), c["active"] + len(rows), c["steps"] + 1
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
        temps = [a.request.sampling.temperature for a in rows]
        greedy = [t == 0 for t in temps]
        if any(t != 1.0 for t in temps):  # greedy rows record the untempered distribution
            temps_N = torch.tensor([1.0 if g else t for g, t in zip(greedy, temps)], device=device)
            logp_N_V = torch.log_softmax(logits_N_V / temps_N[:, None], dim=-1)
        else:
            logp_N_V = torch.log_softmax(logits_N_V, dim=-1)
        top_p_N = torch.tensor([a.request.sampling.top_p for a in rows], device=device)
        sorted_logp_N_V, order_N_V = logp_N_V.sort(dim=-1, descending=True, stable=True)
        probs_N_V = sorted_logp_N_V.exp()
        keep_N_V = (probs_N_V.cumsum(-1) - probs_N_V) < top_p_N[:, None]  # the top token always stays
        kept_cum_N_V = (probs_N_V * keep_N_V).cumsum(-1)
        u_N = torch.tensor([a.next_uniform() for a in rows], device=device)
        threshold_N = u_N * kept_cum_N_V[:, -1]
        idx_N = (kept_cum_N_V <= threshold_N[:, None]).sum(-1)  # first index whose cumsum exceeds u
        idx_N = torch.minimum(idx_N, keep_N_V.sum(-1) - 1)
        tokens_N = order_N_V.gather(-1, idx_N[:, None]).squeeze(-1)
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
