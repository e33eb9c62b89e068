"""The KV-cached fast path of `TorchEngine`: `_CachedRunner` and the pieces it is built from.

For Llama-family decoders (`CACHED_ARCHITECTURES`: Llama; Qwen2, which adds q/k/v biases; Qwen3,
which adds an RMSNorm over each head's q and k before RoPE and a `head_dim` independent of
hidden / heads), full attention in every layer (no sliding window). A batched incremental
decode built from the HF model's own weights, RMSNorm epsilons and
rotary module (its rope scaling included), against a per-slot K/V cache
[slots, kv_heads, capacity, head_dim] that grows on demand up to `max_seq_len`: fused,
pre-transposed q/k/v and gate/up weights for small models (`_Block`), a cos/sin table indexed
by position for RoPE, grouped-query attention on cache views, and prompt prefill in length
buckets (`bench.models.packing.length_buckets`) rather than padded to the longest. The engine protocol (slots,
admission, sampling, stopping, weight versions) is in `bench.engines.torch_engine`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from bench.models.packing import length_buckets

_MAX_PREFILL_TOKENS = 16384  # padded prompt tokens per prefill forward: bounds activation memory
_FUSE_MAX_BYTES = 512 << 20  # models up to this size get fused, pre-transposed weight copies
_PREFILL_CHUNK_COST = 64  # fixed cost of one prefill forward, in padded-token equivalents

CACHED_ARCHITECTURES = ("llama", "qwen2", "qwen3")
"""The `config.model_type`s `_CachedRunner` runs (the rest get `_FullForwardRunner`)."""


def supports_cache(model: Any) -> bool:
    """True for a model `_CachedRunner` runs exactly: a `CACHED_ARCHITECTURES` decoder with the
    usual HF layout (`.model.layers`, `.model.rotary_emb`) and full attention in every layer
    (Qwen2/Qwen3 with `use_sliding_window` have sliding-window layers: not these)."""
    config, inner = model.config, getattr(model, "model", None)
    if config.model_type not in CACHED_ARCHITECTURES or not hasattr(inner, "rotary_emb"):
        return False
    if not hasattr(inner, "layers"):
        return False
    layer_types = getattr(config, "layer_types", None) or []
    return all(kind == "full_attention" for kind in layer_types)


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """HF's RMSNorm (Llama, Qwen2, Qwen3) over the last dim through `F.rms_norm`: float32
    statistics, the weight applied in the model dtype; `weight` [..., d] may hold one row per head."""
    if x.dtype == torch.float32 and weight.dim() == 1:
        return F.rms_norm(x, x.shape[-1:], weight, eps)
    return weight * F.rms_norm(x.float(), x.shape[-1:], eps=eps).to(x.dtype)


def _norm(x: torch.Tensor, norm: Any) -> torch.Tensor:
    """`_rms_norm` with an HF norm module's weight and epsilon."""
    return _rms_norm(x, norm.weight, norm.variance_epsilon)


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
    qk_norm: tuple[torch.Tensor, float] | None  # Qwen3: weight [H + Hkv, d] (q rows, then k), eps
    o: _Weight
    ln2: Any
    gate_up: list[_Weight]
    down: _Weight
    act: Any
    scaling: float


class _CachedRunner:
    """Batched prefill/decode of a HF Llama, Qwen2 or Qwen3 model against a per-slot K/V cache.

    Speed (decode of a small model is bound by per-op overhead, not FLOPs): per layer one
    fused RMSNorm, one q/k/v matmul (weights concatenated once, rebuilt when the model's
    weights change), for Qwen3 one RMSNorm over every head of q and k together, RoPE on q and k together from a cos/sin table indexed by position,
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
        self.sign = torch.tensor(
            [-1.0] * half + [1.0] * (self.head_dim - half), device=self.device, dtype=self.dtype
        )
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
            new = torch.zeros(
                (self.slots, self.kv_heads, new_cap, self.head_dim), device=self.device, dtype=self.dtype
            )
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
        cos, sin = self.model.model.rotary_emb(
            torch.empty(0, device=self.device, dtype=self.dtype), positions_N_Q
        )
        return cos[:, :, None], (sin * self.sign)[:, :, None]

    def blocks(self) -> list[_Block]:
        """The layers' weights; fused copies are rebuilt whenever a parameter changed in place."""
        key = tuple((p.data_ptr(), p._version) for p in self._params)  # in-place updates bump _version
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
        qk_norm = None
        if hasattr(attn, "q_norm"):  # both norms are built with the config's rms_norm_eps
            weight = torch.cat(
                [
                    attn.q_norm.weight.expand(self.heads, self.head_dim),
                    attn.k_norm.weight.expand(self.kv_heads, self.head_dim),
                ]
            )
            qk_norm = (weight, attn.q_norm.variance_epsilon)
        return _Block(
            layer.input_layernorm,
            parts(attn.q_proj, attn.k_proj, attn.v_proj),
            qk_norm,
            parts(attn.o_proj)[0],
            layer.post_attention_layernorm,
            parts(mlp.gate_proj, mlp.up_proj),
            parts(mlp.down_proj)[0],
            act,
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
            qkv = _project(_norm(x_N_Q_H, b.ln1), b.qkv)  # [N, Q, (H + 2 Hkv) d]
            qk = qkv[..., : (H + Hkv) * d].unflatten(-1, (H + Hkv, d))  # [N, Q, H + Hkv, d]
            if b.qk_norm is not None:  # Qwen3: each head's q and k normalised before RoPE
                qk = _rms_norm(qk, *b.qk_norm)
            qk = torch.addcmul(qk * cos, qk.roll(d // 2, -1), sin)  # RoPE on q and k at once
            v = qkv[..., (H + Hkv) * d :].unflatten(-1, (Hkv, d))  # [N, Q, Hkv, d]
            x_N_Q_H = _add_linear(x_N_Q_H, attend(i, qk[:, :, :H], qk[:, :, H:], v, b.scaling), b.o)
            gate, up = _project(_norm(x_N_Q_H, b.ln2), b.gate_up).chunk(2, dim=-1)
            x_N_Q_H = _add_linear(x_N_Q_H, b.act(gate) * up, b.down)
        return _norm(x_N_Q_H, self.model.model.norm)

    def prefill(self, slots: list[int], seqs: list[list[int]]) -> torch.Tensor:
        """Run whole sequences from position 0 into their slots; logits_N_V at each last token.

        Rows are cut into chunks of similar length (`bench.models.packing.length_buckets`), so short prompts are
        not padded to the longest one and one forward stays under the token budget.
        """
        chunks = length_buckets([len(s) for s in seqs], _PREFILL_CHUNK_COST, _MAX_PREFILL_TOKENS)
        out = torch.cat([self._prefill_chunk([slots[n] for n in c], [seqs[n] for n in c]) for c in chunks])
        order = [n for c in chunks for n in c]
        return out[torch.tensor(order, device=out.device).argsort()]  # back to the callers' order

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

        rows_N = slice(None) if slots == list(range(R)) else slots_N  # all of [0, R) active: no gather

        def attend(i, q, k, v, scaling):
            # write only the listed slots: an idle row may be a slot prefilled on this very step
            self.k[i][slots_N, :, positions_N] = k[rows_N, 0]  # [N, Hkv, d] at each slot's position
            self.v[i][slots_N, :, positions_N] = v[rows_N, 0]
            keys_M_K_d = self.k[i][:R, :, :K].reshape(R * Hkv, K, d)  # views of the cache
            values_M_K_d = self.v[i][:R, :, :K].reshape(R * Hkv, K, d)
            # grouped-query attention without repeating K/V: the g heads of one KV group share a bmm
            q_M_g_d = q.reshape(R * Hkv, g, d)
            scores_M_g_K = torch.baddbmm(bias_M_g_K, q_M_g_d, keys_M_K_d.transpose(1, 2), alpha=scaling)
            probs_M_g_K = torch.softmax(scores_M_g_K, dim=-1, dtype=torch.float32).to(self.dtype)
            return torch.bmm(probs_M_g_K, values_M_K_d).view(R, 1, self.heads * d)

        x = self._layers(
            self.model.model.embed_tokens(torch.tensor(tokens_R, device=dev)[:, None]), positions_R_1, attend
        )
        return _project(x[rows_N, 0], [self._head])

    def close(self) -> None:
        """Free the cache."""
        self.k, self.v, self.capacity = [], [], 0
        self._blocks, self._weights_key = [], ()
