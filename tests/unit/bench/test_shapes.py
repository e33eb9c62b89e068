"""Decoder shapes (`bench.models.shapes`): parameter counts equal the models transformers builds
(on the meta device: no memory), for small configs of every supported architecture and for
every known shape, whose totals also match the published model cards."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config, Qwen3MoeConfig

from bench.models.shapes import KNOWN_SHAPES, ShapeError, decoder_shape, hf_config, known_shape


def _numel(config) -> int:
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


SMALL = {
    "llama": LlamaConfig(hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=4),
    "llama-biases": LlamaConfig(
        mlp_bias=True,
    ),
    "qwen2": Qwen2Config(hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=4),
    "qwen3": Qwen3Config(
        hidden_size=48, intermediate_size=80, num_hidden_layers=3, num_attention_heads=4, head_dim=20
    ),
    "qwen3-moe": Qwen3MoeConfig(
        hidden_size=48,
        intermediate_size=80,
        moe_intermediate_size=24,
        num_experts=6,
        num_experts_per_tok=2,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        mlp_only_layers=[0],
        decoder_sparse_step=1,
    ),
}


@pytest.mark.parametrize("name", list(SMALL))
def test_parameters_equal_the_models_own_count(name):
    config = SMALL[name]
    assert decoder_shape(config).parameters() == _numel(config)


def test_moe_layers_follow_mlp_only_layers_and_the_sparse_step():
    shape = decoder_shape(SMALL["qwen3-moe"])
    assert (shape.moe_layers, shape.dense_layers) == (3, 1)
    stepped = decoder_shape({**SMALL["qwen3-moe"].to_dict(), "mlp_only_layers": [], "decoder_sparse_step": 2})
    assert stepped.moe_layers == 2  # layers 1 and 3


# (total, without embedding and LM head) in billions, as the model cards state them (rounded there)
CARDS = {
    "qwen3-0.6b": ("0.6", "0.44"),
    "qwen3-1.7b": ("1.7", "1.4"),
    "qwen3-4b": ("4.0", "3.6"),
    "qwen3-8b": ("8.2", "6.95"),
    "qwen3-14b": ("14.8", "13.2"),
    "qwen3-30b-a3b": ("30.5", "29.9"),
    "smollm2-135m": ("0.135", None),
}


def _as_card(count: int, card: str) -> str:
    """`count` in billions, rounded to the card's digits."""
    return f"{count / 1e9:.{len(card.split('.')[1])}f}"


@pytest.mark.parametrize("name", list(KNOWN_SHAPES))
def test_known_shapes_build_and_match_their_model_cards(name):
    shape = known_shape(name)
    assert shape.parameters() == _numel(hf_config(name))
    total, body = CARDS[name]
    assert _as_card(shape.parameters(), total) == total
    if body is not None:
        embeddings = shape.vocab * shape.hidden * (1 if shape.tied_embeddings else 2)
        assert _as_card(shape.parameters() - embeddings, body) == body


def test_qwen3_30b_a3b_activates_about_3_billion_parameters_per_token():
    shape = known_shape("qwen3-30b-a3b")
    active = shape.body_matmul_params_per_token() + 2 * shape.vocab * shape.hidden
    # the card's "3.3B activated": attention, router, 8 of 128 experts, embedding and LM head = 3.35B
    assert 3.3e9 <= active < 3.4e9


def test_unknown_names_and_architectures_are_refused():
    with pytest.raises(ShapeError, match="known shapes: qwen3-0.6b"):
        known_shape("qwen3-5b")
    with pytest.raises(ShapeError, match="supported: llama, qwen2, qwen3, qwen3_moe"):
        decoder_shape({"model_type": "gpt2"})
