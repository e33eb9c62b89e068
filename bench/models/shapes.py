"""Decoder shapes: the numbers model FLOPs (`bench.models.flops`) and memory (`bench.models.memory`)
are computed from, read from a Hugging Face config (object or config.json dict) or named.

Known shapes (`KNOWN_SHAPES`) are the published configs of models the project plans for, so a
plan or a GPU check needs no download: `hf_config(name)` builds the transformers config, from
which `AutoModelForCausalLM.from_config` makes a randomly initialised model of that shape.
Nothing here imports torch or transformers at module level.

Supported architectures: Llama (`llama`: the tiny model, SmolLM2, Llama 2/3), Qwen2 (`qwen2`:
q/k/v biases), Qwen3 (`qwen3`: per-head q/k RMSNorm, `head_dim` independent of hidden/heads)
and Qwen3-MoE (`qwen3_moe`: routed experts).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import UsageError

ARCHITECTURES = ("llama", "qwen2", "qwen3", "qwen3_moe")
"""The `model_type`s whose shape is read here."""


def _qwen3(hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int, tied: bool) -> dict:
    """The fields of a Qwen3 config.json that differ between sizes, over those they share."""
    return {
        "model_type": "qwen3",
        "vocab_size": 151936,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": 128,
        "tie_word_embeddings": tied,
        "max_position_embeddings": 40960,
        "rope_theta": 1_000_000.0,
        "rms_norm_eps": 1e-6,
    }


KNOWN_SHAPES: dict[str, dict[str, Any]] = {
    # the published config.json of each model (Qwen/Qwen3-*, HuggingFaceTB/SmolLM2-135M-Instruct)
    "qwen3-0.6b": _qwen3(1024, 3072, 28, 16, 8, tied=True),
    "qwen3-1.7b": _qwen3(2048, 6144, 28, 16, 8, tied=True),
    "qwen3-4b": _qwen3(2560, 9728, 36, 32, 8, tied=True),
    "qwen3-8b": _qwen3(4096, 12288, 36, 32, 8, tied=False),
    "qwen3-14b": _qwen3(5120, 17408, 40, 40, 8, tied=False),
    "qwen3-30b-a3b": {
        **_qwen3(2048, 6144, 48, 32, 4, tied=False),
        "model_type": "qwen3_moe",
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 768,
    },
    "smollm2-135m": {
        "model_type": "llama",
        "vocab_size": 49152,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "tie_word_embeddings": True,
        "max_position_embeddings": 8192,
        "rope_theta": 100000.0,
        "rms_norm_eps": 1e-5,
    },
}
"""Shape name -> the fields of its Hugging Face config (with `model_type`)."""


@dataclass(frozen=True)
class DecoderShape:
    """A pre-norm decoder-only transformer (RMSNorm, rotary positions, gated MLP or routed experts)
    in the numbers that its FLOPs and memory depend on."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int  # width of a dense MLP layer
    vocab: int
    tied_embeddings: bool
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False  # Qwen3: an RMSNorm over each head's q and k before RoPE
    experts: int = 0  # routed experts in each MoE layer (0: a dense model)
    experts_per_token: int = 0
    expert_intermediate: int = 0
    moe_layers: int = 0  # how many of `layers` are MoE layers (the rest are dense)

    # ---- parameters of one layer ----------------------------------------------------------------
    def attention_params(self) -> int:
        """Matmul parameters of one attention block: q, k, v and o projections (no biases)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return self.hidden * q + 2 * self.hidden * kv + q * self.hidden

    def dense_mlp_params(self) -> int:
        """Matmul parameters of one gated MLP (gate, up, down)."""
        return 3 * self.hidden * self.intermediate

    def expert_params(self) -> int:
        """Matmul parameters of one routed expert (a gated MLP of width `expert_intermediate`)."""
        return 3 * self.hidden * self.expert_intermediate

    def router_params(self) -> int:
        """Matmul parameters of one MoE layer's router (hidden -> experts logits)."""
        return self.hidden * self.experts

    def _layer_other_params(self) -> int:
        """Norm weights and biases of one layer (no matmuls: no FLOPs counted for them)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        out = 2 * self.hidden + (2 * self.head_dim if self.qk_norm else 0)
        out += (q + 2 * kv) if self.qkv_bias else 0
        out += self.hidden if self.o_bias else 0
        return out + ((2 * self.intermediate + self.hidden) if self.mlp_bias else 0)

    @property
    def dense_layers(self) -> int:
        """Layers with a dense MLP."""
        return self.layers - self.moe_layers

    # ---- whole-model counts ---------------------------------------------------------------------
    def lm_head_params(self) -> int:
        """Matmul parameters of the LM head (vocab x hidden; the embedding matrix when tied)."""
        return self.vocab * self.hidden

    def attention_params_total(self) -> int:
        """Every layer's attention parameters (matmuls, q/k norms and biases): what SAO's
        frozen-attention critic freezes."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        per_layer = self.attention_params() + (2 * self.head_dim if self.qk_norm else 0)
        per_layer += ((q + 2 * kv) if self.qkv_bias else 0) + (self.hidden if self.o_bias else 0)
        return self.layers * per_layer

    def backbone_params(self) -> int:
        """Parameters without the LM head: embedding, every layer (all experts) and the final norm."""
        mlp = self.dense_layers * self.dense_mlp_params()
        mlp += self.moe_layers * (self.experts * self.expert_params() + self.router_params())
        per_layer_other = self.layers * (self.attention_params() + self._layer_other_params())
        return self.vocab * self.hidden + mlp + per_layer_other + self.hidden

    def parameters(self) -> int:
        """Every parameter of the causal LM, each counted once (a tied LM head adds none)."""
        return self.backbone_params() + (0 if self.tied_embeddings else self.lm_head_params())

    def body_matmul_params_per_token(self) -> int:
        """Matmul parameters one token passes through in the decoder layers: attention
        projections, the dense MLPs, and in MoE layers the router and `experts_per_token` experts."""
        moe = self.experts_per_token * self.expert_params() + self.router_params()
        return (
            self.layers * self.attention_params()
            + self.dense_layers * self.dense_mlp_params()
            + self.moe_layers * moe
        )

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """Bytes of K and V cache one token takes in every layer."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


class ShapeError(UsageError):
    """A model this module cannot read: an unsupported architecture, an unknown shape name."""


def _getter(config: Any) -> Callable[[str, Any], Any]:
    if isinstance(config, Mapping):
        return lambda key, default=None: config.get(key, default)
    return lambda key, default=None: getattr(config, key, default)


def decoder_shape(config: Any) -> DecoderShape:
    """The shape of a Hugging Face config (a `PretrainedConfig`, a config.json dict, or a model,
    `ValueModel` or DDP-wrapped model holding one); ShapeError for other architectures."""
    if hasattr(config, "module") and not hasattr(config, "config"):  # a DDP-style wrapper
        config = config.module
    if hasattr(config, "backbone") and not hasattr(config, "config"):  # bench.models.critic.ValueModel
        config = config.backbone
    config = getattr(config, "config", config)
    get = _getter(config)
    model_type = get("model_type", None)
    if model_type not in ARCHITECTURES:
        raise ShapeError(f"unsupported architecture {model_type!r}; supported: {', '.join(ARCHITECTURES)}")
    heads, hidden = int(get("num_attention_heads")), int(get("hidden_size"))
    bias = bool(get("attention_bias", False))
    fields: dict[str, Any] = {
        "layers": int(get("num_hidden_layers")),
        "hidden": hidden,
        "heads": heads,
        "kv_heads": int(get("num_key_value_heads", None) or heads),
        "head_dim": int(get("head_dim", None) or hidden // heads),
        "intermediate": int(get("intermediate_size")),
        "vocab": int(get("vocab_size")),
        "tied_embeddings": bool(get("tie_word_embeddings", False)),
        "qkv_bias": bias or model_type == "qwen2",
        "o_bias": bias and model_type != "qwen2",
        "mlp_bias": bool(get("mlp_bias", False)),
        "qk_norm": model_type.startswith("qwen3"),
    }
    if model_type == "qwen3_moe":
        fields.update(_moe_fields(get, fields["layers"]))
    return DecoderShape(**fields)


def _moe_fields(get: Callable[[str, Any], Any], layers: int) -> dict[str, int]:
    """Qwen3-MoE: layer i is an MoE layer unless listed in `mlp_only_layers`, when experts exist
    and (i + 1) is a multiple of `decoder_sparse_step` (transformers' Qwen3MoeDecoderLayer)."""
    # config.json says num_experts; transformers 5 writes it back as num_local_experts
    experts = int(get("num_experts", None) or get("num_local_experts", 0) or 0)
    step = int(get("decoder_sparse_step", 1) or 1)
    dense_only = set(get("mlp_only_layers", None) or [])
    moe = sum(1 for i in range(layers) if i not in dense_only and experts > 0 and (i + 1) % step == 0)
    return {
        "experts": experts,
        "experts_per_token": int(get("num_experts_per_tok")),
        "expert_intermediate": int(get("moe_intermediate_size")),
        "moe_layers": moe,
    }


def known_shape(name: str) -> DecoderShape:
    """The shape of a `KNOWN_SHAPES` name (ShapeError naming the known ones otherwise)."""
    if name not in KNOWN_SHAPES:
        raise ShapeError(f"unknown model shape {name!r}; known shapes: {', '.join(KNOWN_SHAPES)}")
    return decoder_shape(KNOWN_SHAPES[name])


def hf_config(name: str, **overrides: Any) -> Any:
    """The transformers config of a known shape (`overrides` replace its fields), for
    `AutoModelForCausalLM.from_config`: a randomly initialised model of that shape, no download."""
    from transformers import AutoConfig

    known_shape(name)  # the error for an unknown name
    fields = {**KNOWN_SHAPES[name], **overrides}
    return AutoConfig.for_model(fields.pop("model_type"), **fields)


def resolve_shape(spec: str) -> DecoderShape:
    """The shape a model spec names, without loading weights: `tiny` (the embedded model), a
    `KNOWN_SHAPES` name, `smollm2` (the converted model's config when present, else its
    published shape) or a local directory holding a config.json; ShapeError otherwise."""
    from bench.models.offline import OFFLINE_MODELS, offline_model_dir

    if spec == "tiny":
        from bench.models.tiny import tiny_config
        from bench.models.tokenizer import build_tiny_tokenizer

        return decoder_shape(tiny_config(len(build_tiny_tokenizer())))
    if spec in KNOWN_SHAPES:
        return known_shape(spec)
    if spec in OFFLINE_MODELS:
        converted = offline_model_dir(spec) / "config.json"
        return (
            decoder_shape(json.loads(converted.read_text()))
            if converted.is_file()
            else known_shape("smollm2-135m")
        )
    config = Path(spec).expanduser() / "config.json"
    if not config.is_file():
        raise ShapeError(
            f"model {spec!r}: not a known shape and no config.json there; valid: tiny, "
            f"{', '.join(OFFLINE_MODELS)}, {', '.join(KNOWN_SHAPES)}, or a local transformers directory"
        )
    return decoder_shape(json.loads(config.read_text()))
