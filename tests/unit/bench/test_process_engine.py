"""`ProcessEngine`: the torch engine in a child process gives exactly the in-process engine's
completions, picks up weight pushes with their version, and surfaces a dead child."""

from __future__ import annotations

import pytest

from bench.engines import make_engine
from bench.engines.base import GenerationRequest, SamplingParams
from bench.engines.process_engine import ProcessEngine
from bench.engines.torch_engine import TorchEngine
from bench.models.tiny import new_tiny_model


def _requests(tokenizer, n: int = 12, max_new: int = 24) -> list[GenerationRequest]:
    return [
        GenerationRequest(
            f"r{i}",
            [tokenizer.bos_token_id] + tokenizer.encode(f"{i}+{i % 7}=?\n", add_special_tokens=False),
            SamplingParams(temperature=1.0, max_new_tokens=max_new),
            seed=100 + i,
        )
        for i in range(n)
    ]


def _same(a, b) -> bool:
    return all(
        x.token_ids == y.token_ids
        and x.finish_reason == y.finish_reason
        and max((abs(p - q) for p, q in zip(x.logprobs, y.logprobs)), default=0.0) <= 1e-5
        for x, y in zip(a, b, strict=True)
    )


def test_same_completions_as_in_process_and_weight_pushes():
    model, tokenizer = new_tiny_model(0)
    other, _ = new_tiny_model(1)
    requests = _requests(tokenizer)
    engine = make_engine("torch", model, tokenizer, process=True, max_batch_size=5)
    assert isinstance(engine, ProcessEngine)
    try:
        assert _same(
            engine.generate(requests), TorchEngine(model, tokenizer, max_batch_size=5).generate(requests)
        )
        engine.update_weights(other.state_dict(), 7)
        pushed = engine.generate(requests)
        assert _same(pushed, TorchEngine(other, tokenizer, max_batch_size=5).generate(requests))
        assert {v for c in pushed for v in c.versions} == {7} and engine.version == 7
        stats = engine.stats()
        assert stats["tokens_generated"] > 0 and stats["weight_updates"] == 1.0
        with pytest.raises(ValueError, match="empty prompt"):
            engine.submit(GenerationRequest("bad", [], SamplingParams(), seed=0))
    finally:
        engine.close()


def test_a_dead_child_is_reported_not_waited_for():
    model, tokenizer = new_tiny_model(0)
    engine = ProcessEngine(model, tokenizer, max_batch_size=2)
    engine._child.kill()
    engine._child.join()
    engine.submit(_requests(tokenizer, 1)[0])
    with pytest.raises(RuntimeError, match="rollout engine process died"):
        engine.step()
    engine.close()
