"""The embedded tiny model: a ~1M-parameter Llama with a character-level tokenizer (no hub)."""

from __future__ import annotations

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

from bench.models.loading import DTYPE_KW
from bench.models.tokenizer import build_tiny_tokenizer


def tiny_config(vocab_size: int) -> LlamaConfig:
    """The embedded default model: a ~1M-parameter Llama (GQA, RoPE, tied embeddings)."""
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=384,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        **{DTYPE_KW: "float32"},
    )  # rope: the default (theta 10000, no scaling)


def new_tiny_model(seed: int) -> tuple[LlamaForCausalLM, transformers.PreTrainedTokenizerFast]:
    """A randomly initialised tiny model and its tokenizer; same seed -> same weights.

    The global RNG state is restored afterwards, so building a model does not shift the
    random stream of the caller.
    """
    tokenizer = build_tiny_tokenizer()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(tiny_config(len(tokenizer)))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model, tokenizer
