"""The off-policy regime's first half: an engine sampling in bfloat16 beside a float32 learner
(`engine_dtype`), in the thread engine and the process engine; the mismatch it makes is measured
per step (`policy/logp_mismatch_*`)."""

from __future__ import annotations

import copy

import pytest
import torch

from bench.engines import make_engine
from bench.engines.base import GenerationRequest, SamplingParams
from bench.models.logprobs import response_logprobs
from bench.models.packing import pack
from bench.models.tiny import new_tiny_model
from bench.train.metrics import logp_mismatch


@pytest.fixture(scope="module")
def tiny():
    """A random tiny model (float32, the learner's dtype) and its tokenizer."""
    return new_tiny_model(seed=0)


def _mismatch(model, tok, process: bool, **engine_kwargs) -> tuple[float, float, dict]:
    """(mean, max) |engine log-prob - learner log-prob| over 8 sampled completions, and the
    engine's provenance; the learner is `model` in float32."""
    engine = make_engine(
        "torch", copy.deepcopy(model), tok, process=process, max_batch_size=8, **engine_kwargs
    )
    try:
        prompts = [[tok.bos_token_id] + tok.encode(f"{i}+{i}=?", add_special_tokens=False) for i in range(8)]
        sampling = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=16)
        requests = [GenerationRequest(f"r{i}", p, sampling, seed=i) for i, p in enumerate(prompts)]
        done = []
        for r in requests:
            engine.submit(r)
        while len(done) < len(requests):
            done += engine.step()
        provenance = engine.provenance()
    finally:
        engine.close()
    done.sort(key=lambda c: c.request_id)
    batch = pack([c.prompt_ids for c in done], [c.token_ids for c in done], 0)
    with torch.no_grad():
        learner_B_T, _ = response_logprobs(model, batch)
    rollout_B_T = torch.zeros_like(learner_B_T)
    for b, c in enumerate(done):
        rollout_B_T[b, : len(c.logprobs)] = torch.tensor(c.logprobs)
    found = logp_mismatch(learner_B_T, rollout_B_T, batch.response_mask_B_T)
    return found["policy/logp_mismatch_mean"], found["policy/logp_mismatch_max"], provenance


@pytest.mark.parametrize("process", [False, True], ids=["thread", "process"])
def test_a_bf16_engine_samples_measurably_off_the_float32_learner(tiny, process):
    model, tok = tiny
    same_mean, same_max, same = _mismatch(model, tok, process)
    bf16_mean, bf16_max, bf16 = _mismatch(model, tok, process, dtype="bfloat16")
    assert same["dtype"] == "torch.float32" and bf16["dtype"] == "torch.bfloat16"
    assert same_max < 1e-4  # the same numerics up to kernel order
    assert bf16_mean > 1e-3 and bf16_mean > 100 * same_mean and bf16_max > 10 * same_max


def test_a_bf16_engine_keeps_its_dtype_when_it_receives_float32_weights(tiny):
    model, tok = tiny
    engine = make_engine("torch", copy.deepcopy(model), tok, dtype="bfloat16")
    engine.update_weights(model.state_dict(), 1)  # the learner's float32 tensors, cast on the copy
    assert {p.dtype for p in engine.model.parameters()} == {torch.bfloat16} and engine.version == 1
    expected = model.state_dict()["lm_head.weight"].to(torch.bfloat16)
    assert torch.equal(engine.model.state_dict()["lm_head.weight"], expected)


def test_the_mismatch_is_the_mean_and_max_of_abs_log_ratio_on_action_tokens():
    learner_B_T = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.5, 0.0]])
    engine_B_T = torch.tensor([[-1.1, -2.0, -2.5], [-0.5, -0.2, 9.0]])
    mask_B_T = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # the 9.0 is padding
    found = logp_mismatch(learner_B_T, engine_B_T, mask_B_T)
    assert found["policy/logp_mismatch_mean"] == pytest.approx((0.1 + 0 + 0.5 + 0 + 0.3) / 5)
    assert found["policy/logp_mismatch_max"] == pytest.approx(0.5)
    none = logp_mismatch(learner_B_T, engine_B_T, torch.zeros_like(mask_B_T))
    assert none == {"policy/logp_mismatch_mean": 0.0, "policy/logp_mismatch_max": 0.0}
