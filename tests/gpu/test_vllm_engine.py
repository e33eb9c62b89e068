"""VLLMEngine on a GPU: generation through vLLM and log-prob parity with the learner.

Tolerance: 1e-2 in log-prob. vLLM runs the tiny model in float32 here, so the two sides
differ only by kernel choice (attention backend, reduction order), ~1e-5 in practice; the
margin also covers a vLLM build that falls back to a reduced-precision attention path.
"""

from __future__ import annotations

import copy

import pytest
import torch

from bench.engines import make_engine
from bench.engines.base import GenerationRequest, SamplingParams
from bench.models.logprobs import response_logprobs
from bench.models.packing import pack
from bench.models.tiny import new_tiny_model

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def vllm_engine():
    """A VLLMEngine around a random tiny model (saved to a temporary directory by the engine)."""
    pytest.importorskip("vllm")
    model, tok = new_tiny_model(seed=0)
    engine = make_engine(
        "vllm", copy.deepcopy(model), tok, max_batch_size=8, dtype="float32", gpu_memory_utilization=0.2
    )
    yield engine, model, tok
    engine.close()


def _requests(tok, n: int, sampling: SamplingParams) -> list[GenerationRequest]:
    texts = ["hi", "What is 2+2?", "x", "The quick brown fox\njumps", "a b c", "Q: 17*3\nA:"]
    return [
        GenerationRequest(
            f"r{i}",
            [tok.bos_token_id] + tok.encode(texts[i % len(texts)], add_special_tokens=False),
            sampling,
            seed=i,
        )
        for i in range(n)
    ]


def _max_logprob_error(model, completions, temperature: float) -> float:
    batch = pack([c.prompt_ids for c in completions], [c.token_ids for c in completions], 0)
    with torch.no_grad():
        logp_B_T, _ = response_logprobs(model, batch, temperature=temperature)
    return max(
        (torch.tensor(c.logprobs) - logp_B_T[b, : len(c.token_ids)]).abs().max().item()
        for b, c in enumerate(completions)
        if c.token_ids
    )


def test_vllm_generates_with_parity(vllm_engine):
    engine, model, tok = vllm_engine
    completions = engine.generate(_requests(tok, 6, SamplingParams(temperature=0.8, max_new_tokens=24)))
    assert all(len(c.token_ids) == len(c.logprobs) == len(c.versions) for c in completions)
    assert all(c.finish_reason in ("eos", "stop", "length") for c in completions)
    assert sum(len(c.token_ids) for c in completions) > 20
    assert _max_logprob_error(model, completions, 0.8) <= 1e-2
    assert engine.stats()["tokens_generated"] >= sum(len(c.token_ids) for c in completions)


def test_vllm_update_weights(vllm_engine):
    engine, _, tok = vllm_engine
    new_model, _ = new_tiny_model(seed=1)
    engine.update_weights(new_model.state_dict(), version=3)
    completions = engine.generate(_requests(tok, 4, SamplingParams(temperature=1.0, max_new_tokens=16)))
    assert all(v == 3 for c in completions for v in c.versions)
    assert _max_logprob_error(new_model, completions, 1.0) <= 1e-2
