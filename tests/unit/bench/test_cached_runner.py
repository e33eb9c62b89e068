"""The KV-cached torch runner (`bench.engines.cached_runner`) on Qwen2 and Qwen3: the engine's
log-probs of greedy and sampled continuations equal the HF model's full-forward log-probs.

Random tiny models with grouped-query attention (kv heads < heads) and a head_dim that is not
hidden / heads. Tolerances: float32 1e-4 (as the Llama parity test: only summation order
differs; measured ~1e-6); bfloat16 2e-2 in log-prob, against the HF model run in bfloat16 too
(both round every matmul and norm output to 8 mantissa bits, in different op orders; measured
up to 4e-3 here, printed with -s).
"""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config

from bench.engines.base import GenerationRequest, SamplingParams
from bench.engines.cached_runner import _MAX_PREFILL_TOKENS, _PREFILL_CHUNK_COST
from bench.engines.torch_engine import TorchEngine
from bench.models.logprobs import response_logprobs
from bench.models.packing import length_buckets, pack
from bench.models.tokenizer import build_tiny_tokenizer

TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2}


def tiny_model(kind: str, tok, **extra):
    """A random Qwen2 or Qwen3 model over the tiny tokenizer's vocabulary."""
    common = dict(
        vocab_size=len(tok),
        num_hidden_layers=3,
        intermediate_size=96,
        max_position_embeddings=512,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        **extra,
    )
    if kind == "qwen3":  # head_dim 20, not 48 / 4
        config = Qwen3Config(
            hidden_size=48, num_attention_heads=4, num_key_value_heads=2, head_dim=20, **common
        )
    elif kind == "qwen2":  # head_dim 12, not 48 / 6; q/k/v biases
        config = Qwen2Config(
            hidden_size=48, num_attention_heads=6, num_key_value_heads=2, head_dim=12, **common
        )
    else:
        config = LlamaConfig(hidden_size=48, num_attention_heads=6, num_key_value_heads=3, **common)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    if kind == "qwen2":  # transformers initialises biases at 0: make them matter
        with torch.no_grad():
            for layer in model.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    proj.bias.normal_(0, 0.5)
    if kind == "qwen3":  # the q/k norm weights start at 1: make them matter too
        with torch.no_grad():
            for layer in model.model.layers:
                layer.self_attn.q_norm.weight.uniform_(0.5, 1.5)
                layer.self_attn.k_norm.weight.uniform_(0.5, 1.5)
    return model


@pytest.fixture(scope="module")
def tok():
    return build_tiny_tokenizer()


def prompts(tok) -> list[list[int]]:
    """Prompts from 2 to ~160 tokens: prefill runs in several length buckets."""
    texts = ["hi", "What is 2+2?", "x" * 150, "The quick brown fox\njumps", "Q: 17*3\nA:" * 6, "a b c"]
    return [[tok.bos_token_id] + tok.encode(t, add_special_tokens=False) for t in texts]


def full_forward_logprobs(model, completions, temperature: float) -> list[torch.Tensor]:
    batch = pack([c.prompt_ids for c in completions], [c.token_ids for c in completions], 0)
    with torch.no_grad():
        logp_B_T, _ = response_logprobs(model, batch, temperature=temperature)
    return [logp_B_T[b, : len(c.token_ids)].float() for b, c in enumerate(completions)]


def test_the_prompts_prefill_in_several_buckets(tok):
    chunks = length_buckets([len(p) for p in prompts(tok)], _PREFILL_CHUNK_COST, _MAX_PREFILL_TOKENS)
    assert len(chunks) >= 2


@pytest.mark.parametrize("kind", ["qwen2", "qwen3"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_cached_logprobs_equal_the_full_forward(tok, kind, dtype, temperature):
    model = tiny_model(kind, tok).to(dtype)
    # 3 slots for 6 requests of different budgets: slots are refilled and decode rows sit at different positions
    engine = TorchEngine(copy.deepcopy(model), tok, max_batch_size=3)
    assert engine.cached
    requests = [
        GenerationRequest(f"r{i}", p, SamplingParams(temperature, 1.0, max_new_tokens=8 + 5 * i), seed=i)
        for i, p in enumerate(prompts(tok))
    ]
    done = engine.generate(requests)
    assert sum(len(c.token_ids) for c in done) > 60
    worst = 0.0
    for c, ref in zip(done, full_forward_logprobs(model, done, temperature or 1.0)):
        worst = max(worst, (torch.tensor(c.logprobs) - ref).abs().max().item())
    print(f"{kind} {dtype} T={temperature}: max |log-prob difference| {worst:.2e}")
    assert worst <= TOLERANCE[dtype], worst
    if temperature == 0.0:  # greedy: each token is the full forward's argmax
        for c in done:
            ids = torch.tensor([c.prompt_ids + c.token_ids])
            with torch.no_grad():
                logits = model(input_ids=ids).logits[0].float()
            start = len(c.prompt_ids) - 1
            argmax = logits[start : start + len(c.token_ids)].argmax(-1).tolist()
            # bf16 may flip a near-tie; float32 must not
            agree = sum(a == b for a, b in zip(argmax, c.token_ids)) / len(c.token_ids)
            assert agree == 1.0 if dtype == torch.float32 else agree >= 0.9


def test_a_weight_update_re_prefills_qwen3_slots_exactly(tok):
    old, new = tiny_model("qwen3", tok), tiny_model("qwen3", tok)
    with torch.no_grad():
        for p in new.parameters():
            p.add_(0.05 * torch.randn_like(p))
    engine = TorchEngine(copy.deepcopy(old), tok, max_batch_size=4)
    for i, p in enumerate(prompts(tok)[:4]):
        engine.submit(GenerationRequest(f"r{i}", p, SamplingParams(1.0, 1.0, max_new_tokens=30), seed=i))
    done = [c for _ in range(5) for c in engine.step()]
    engine.update_weights(new.state_dict(), version=1)
    while engine.has_work():
        done += engine.step()
    assert any(0 in c.versions and 1 in c.versions for c in done)
    for c, under_old, under_new in zip(
        done, full_forward_logprobs(old, done, 1.0), full_forward_logprobs(new, done, 1.0)
    ):
        expected = torch.where(torch.tensor(c.versions) == 1, under_new, under_old)
        assert (torch.tensor(c.logprobs) - expected).abs().max().item() <= 1e-4


def test_sliding_window_models_fall_back_to_the_full_forward(tok):
    model = tiny_model("qwen3", tok, use_sliding_window=True, sliding_window=16, max_window_layers=1)
    assert model.config.layer_types == ["full_attention", "sliding_attention", "sliding_attention"]
    assert not TorchEngine(model, tok, max_batch_size=2).cached
    assert TorchEngine(tiny_model("llama", tok), tok, max_batch_size=2).cached
