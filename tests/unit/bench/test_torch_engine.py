"""TorchEngine: log-prob parity with the learner, greedy parity with HF, continuous batching,
seeded determinism, weight updates mid-generation, finish reasons."""

from __future__ import annotations

import copy

import pytest
import torch

from bench.engines import make_engine
from bench.engines.base import GenerationRequest, SamplingParams
from bench.engines.torch_engine import TorchEngine
from bench.models.logprobs import response_logprobs
from bench.models.packing import pack
from bench.models.tiny import new_tiny_model


@pytest.fixture(scope="module")
def tiny():
    """A random tiny model and its tokenizer (engines get deep copies)."""
    return new_tiny_model(seed=0)


def _prompts(tok, n: int) -> list[list[int]]:
    texts = [
        "hi",
        "What is 2+2?",
        "x",
        "The quick brown fox\njumps",
        "a b c d e f g",
        "??",
        "Q: 17*3\nA:",
        "long " * 9,
    ]
    return [
        [tok.bos_token_id] + tok.encode(texts[i % len(texts)], add_special_tokens=False) for i in range(n)
    ]


def _requests(tok, n: int, sampling: SamplingParams, seed0: int = 0) -> list[GenerationRequest]:
    return [GenerationRequest(f"r{i}", p, sampling, seed=seed0 + i) for i, p in enumerate(_prompts(tok, n))]


def _engine(model, tok, **kwargs) -> TorchEngine:
    return TorchEngine(copy.deepcopy(model), tok, **kwargs)


def _recomputed(model, completions, temperature: float) -> list[torch.Tensor]:
    batch = pack([c.prompt_ids for c in completions], [c.token_ids for c in completions], 0)
    with torch.no_grad():
        logp_B_T, _ = response_logprobs(model, batch, temperature=temperature)
    return [logp_B_T[b, : len(c.token_ids)] for b, c in enumerate(completions)]


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9)])
def test_logprob_parity_with_learner(tiny, temperature, top_p):
    model, tok = tiny
    engine = _engine(model, tok, max_batch_size=3)  # fewer slots than requests: slots are refilled
    completions = engine.generate(_requests(tok, 8, SamplingParams(temperature, top_p, max_new_tokens=24)))
    assert sum(len(c.token_ids) for c in completions) > 50
    for c, ref in zip(completions, _recomputed(model, completions, temperature)):
        assert len(c.logprobs) == len(c.token_ids) == len(c.versions)
        assert (torch.tensor(c.logprobs) - ref).abs().max() <= 1e-4


def test_greedy_equals_hf_generate(tiny):
    model, tok = tiny
    engine = _engine(model, tok, max_batch_size=4)
    requests = _requests(tok, 4, SamplingParams(temperature=0.0, max_new_tokens=20))
    for request, c in zip(requests, engine.generate(requests)):
        with torch.no_grad():
            out = model.generate(
                torch.tensor([request.prompt_ids]),
                do_sample=False,
                max_new_tokens=20,
                eos_token_id=tok.eos_token_id,
                pad_token_id=tok.pad_token_id,
            )
        assert c.token_ids == out[0, len(request.prompt_ids) :].tolist()


def _simulated_steps(lengths: list[int], slots: int) -> int:
    """Steps a continuous batcher needs when a freed slot is refilled on the very next step."""
    waiting, active, steps = list(lengths), [], 0
    while waiting or active:
        while len(active) < slots and waiting:
            active.append(waiting.pop(0))
        active = [n - 1 for n in active if n > 1]
        steps += 1
    return steps


def test_continuous_batching_reuses_slots_immediately(tiny):
    model, tok = tiny
    engine = _engine(model, tok, max_batch_size=2)
    max_new = [3, 7, 2, 5, 4]
    for i, (p, n) in enumerate(zip(_prompts(tok, 5), max_new)):
        engine.submit(GenerationRequest(f"r{i}", p, SamplingParams(max_new_tokens=n), seed=i))
    done, tokens_per_step = {}, []
    while engine.has_work():
        waiting_before = engine.num_waiting
        before = engine.stats()["tokens_generated"]
        done.update({c.request_id: c for c in engine.step()})
        tokens_per_step.append(engine.stats()["tokens_generated"] - before)
        if waiting_before:  # a request was waiting, so both slots must have produced a token
            assert tokens_per_step[-1] == 2
    assert sorted(done) == [f"r{i}" for i in range(5)]
    lengths = [len(done[f"r{i}"].token_ids) for i in range(5)]
    assert all(1 <= n <= m for n, m in zip(lengths, max_new))
    assert len(tokens_per_step) == _simulated_steps(lengths, 2)
    stats = engine.stats()
    assert stats["tokens_generated"] == sum(lengths) and 1 < stats["mean_active_slots"] <= 2
    assert stats["tokens_per_s"] > 0


def test_seeded_sampling_is_independent_of_batching(tiny):
    model, tok = tiny
    sampling = SamplingParams(temperature=1.0, top_p=0.95, max_new_tokens=16)
    requests = _requests(tok, 6, sampling, seed0=100)
    runs = []
    for slots in (1, 4, 8):
        runs.append({c.request_id: c for c in _engine(model, tok, max_batch_size=slots).generate(requests)})
    mixed = _engine(model, tok, max_batch_size=3)  # other traffic, reversed order
    extra = _requests(tok, 3, sampling, seed0=999)
    for i, r in enumerate(extra):
        r.request_id = f"extra{i}"
    runs.append({c.request_id: c for c in mixed.generate(extra + requests[::-1])})
    for request in requests:
        first = runs[0][request.request_id]
        for run in runs[1:]:
            assert run[request.request_id].token_ids == first.token_ids
            torch.testing.assert_close(run[request.request_id].logprobs, first.logprobs, atol=1e-5, rtol=0)
    reseeded = [GenerationRequest(r.request_id, r.prompt_ids, sampling, r.seed + 1) for r in requests]
    other = _engine(model, tok, max_batch_size=8).generate(reseeded)
    assert any(c.token_ids != runs[0][c.request_id].token_ids for c in other)


def test_update_weights_mid_generation(tiny):
    model, tok = tiny
    new_model, _ = new_tiny_model(seed=1)
    engine = _engine(model, tok, max_batch_size=4)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=14)
    requests = _requests(tok, 4, sampling, seed0=7)
    for r in requests:
        engine.submit(r)
    done = {}
    for _ in range(5):
        done.update({c.request_id: c for c in engine.step()})
    engine.update_weights(new_model.state_dict(), version=1)
    while engine.has_work():
        done.update({c.request_id: c for c in engine.step()})
    completions = [done[r.request_id] for r in requests]
    long_ones = [c for c in completions if len(c.token_ids) > 5]
    assert long_ones, "every request ended before the update; pick other seeds"
    old_ref = _recomputed(model, completions, 1.0)
    new_ref = _recomputed(new_model, completions, 1.0)
    for c, old, new in zip(completions, old_ref, new_ref):
        n_old = min(5, len(c.token_ids))
        assert c.versions == [0] * n_old + [1] * (len(c.token_ids) - n_old)
        logp = torch.tensor(c.logprobs)
        assert (logp[:n_old] - old[:n_old]).abs().max() <= 1e-4
        if len(c.token_ids) > n_old:  # sampled from the new weights, over the whole prefix
            assert (logp[n_old:] - new[n_old:]).abs().max() <= 1e-4
    assert engine.version == 1 and engine.stats()["weight_updates"] == 1
    with pytest.raises(ValueError, match="unexpected"):
        engine.update_weights({"not.a.weight": torch.zeros(1)}, version=2)


def _greedy(model, tok, prompt, max_new=24, **sampling_kwargs):
    engine = _engine(model, tok, max_batch_size=2)
    sampling = SamplingParams(temperature=0.0, max_new_tokens=max_new, **sampling_kwargs)
    return engine.generate([GenerationRequest("g", prompt, sampling, seed=0)])[0]


def test_stop_string_eos_length_and_tiny_top_p(tiny):
    model, tok = tiny
    prompt = _prompts(tok, 2)[1]
    free = _greedy(model, tok, prompt)
    assert free.finish_reason == "length" and len(free.token_ids) == 24  # this prompt runs to the cap
    # a stop string taken from the greedy text: ends right after the token that completes it
    text = [tok.decode(free.token_ids[:k]) for k in range(len(free.token_ids) + 1)]
    stop = text[8][-3:]
    first = next(k for k in range(len(text)) if stop in text[k])
    stopped = _greedy(model, tok, prompt, stop=(stop,))
    assert stopped.finish_reason == "stop" and stopped.token_ids == free.token_ids[:first]
    # eos: declare the 6th greedy token an eos id; generation ends with it, included
    eos_model = copy.deepcopy(model)
    eos_model.generation_config.eos_token_id = [tok.eos_token_id, free.token_ids[5]]
    ended = _greedy(eos_model, tok, prompt)
    k = free.token_ids.index(free.token_ids[5]) + 1
    assert ended.finish_reason == "eos" and ended.token_ids == free.token_ids[:k]
    # top-p so small that only the most likely token survives: the greedy path
    nucleus = _engine(model, tok).generate(
        [GenerationRequest("p", prompt, SamplingParams(1.0, 1e-6, 24), seed=3)]
    )[0]
    assert nucleus.token_ids == free.token_ids
    torch.testing.assert_close(nucleus.logprobs, free.logprobs, atol=1e-6, rtol=0)


def test_prompt_at_context_limit_and_bad_requests(tiny):
    model, tok = tiny
    engine = _engine(model, tok, max_batch_size=2, max_seq_len=16)
    long_prompt = [1] + [50] * 15
    out = engine.generate(
        [
            GenerationRequest("a", long_prompt, SamplingParams(max_new_tokens=8), 0),
            GenerationRequest("b", long_prompt[:12], SamplingParams(max_new_tokens=8), 0),
        ]
    )
    assert out[0].token_ids == [] and out[0].finish_reason == "length"
    assert len(out[1].token_ids) <= 4  # only 4 positions left in the context
    with pytest.raises(ValueError, match="empty prompt"):
        engine.submit(GenerationRequest("c", [], SamplingParams(), 0))
    with pytest.raises(ValueError, match="top_p"):
        engine.submit(GenerationRequest("d", [1], SamplingParams(top_p=0.0), 0))


def test_fallback_runner_for_other_architectures():
    from transformers import GPT2Config, GPT2LMHeadModel

    from bench.models.tokenizer import build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=2, n_positions=128)
    ).eval()
    engine = TorchEngine(copy.deepcopy(model), tok, max_batch_size=3)
    assert not engine.cached
    completions = engine.generate(_requests(tok, 5, SamplingParams(0.8, 0.9, max_new_tokens=10)))
    for c, ref in zip(completions, _recomputed(model, completions, 0.8)):
        assert (torch.tensor(c.logprobs) - ref).abs().max() <= 1e-4


def test_make_engine_names(tiny):
    model, tok = tiny
    assert isinstance(make_engine("torch", copy.deepcopy(model), tok, max_batch_size=2), TorchEngine)
    with pytest.raises(ValueError, match="torch, vllm"):
        make_engine("tensorrt", model, tok)
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match=r"pip install -e \.\[gpu\]"):
            make_engine("vllm", model, tok)


def test_update_weights_from_another_thread(tiny):
    import threading

    model, tok = tiny
    engine = _engine(model, tok, max_batch_size=4)
    for r in _requests(tok, 12, SamplingParams(max_new_tokens=20), seed0=40):
        engine.submit(r)
    done, states = [], [new_tiny_model(seed)[0].state_dict() for seed in (1, 2)]

    def learner():  # pushes two versions while the engine thread keeps stepping
        for version, state in enumerate(states, start=1):
            engine.update_weights(state, version)

    thread = threading.Thread(target=learner)
    thread.start()
    while engine.has_work():
        done += engine.step()
    thread.join()
    assert len(done) == 12 and engine.version == 2
    for c in done:
        assert c.versions == sorted(c.versions)  # a token never carries an older version than its prefix


@pytest.mark.parametrize(
    "top_ps, expected",
    [
        # nothing cut: the distribution itself
        ([1.0], {2: 0.4, 0: 0.25, 4: 0.15, 1: 0.1, 5: 0.07, 3: 0.03}),
        # top-p 0.7 keeps 2, 0, 4 (mass before each: 0, 0.4, 0.65 < 0.7), renormalised by 0.8
        ([0.7], {2: 0.5, 0: 0.3125, 4: 0.1875}),
        # rows of one batch keep their own top_p: the top_p 1 rows are unchanged
        ([1.0, 0.7], {2: 0.4, 0: 0.25, 4: 0.15, 1: 0.1, 5: 0.07, 3: 0.03}),
    ],
)
def test_sampler_draws_the_top_p_distribution(tiny, top_ps, expected):
    """20,000 inverse-CDF draws match the hand-computed top-p distribution (4 standard errors),
    and each token's recorded log-prob is its log-prob under the full distribution."""
    from types import SimpleNamespace

    import numpy as np

    probs = torch.tensor([0.25, 0.1, 0.4, 0.03, 0.15, 0.07])  # vocabulary order is not probability order
    n = 20_000
    uniforms = np.random.default_rng(0).random(n).tolist()
    rows = [
        SimpleNamespace(
            request=SimpleNamespace(sampling=SamplingParams(temperature=1.0, top_p=top_ps[i % len(top_ps)])),
            next_uniform=lambda u=u: u,
        )
        for i, u in enumerate(uniforms)
    ]
    engine = _engine(*tiny)
    tokens, logps = engine._sample(probs.log().expand(n, -1).clone(), rows)
    checked = [t for i, t in enumerate(tokens) if top_ps[i % len(top_ps)] == top_ps[0]]
    counts = np.bincount(checked, minlength=6) / len(checked)
    for token in range(6):
        p = expected.get(token, 0.0)
        assert abs(counts[token] - p) < 4 * np.sqrt(p * (1 - p) / len(checked)) + 1e-9, (token, counts)
    assert np.allclose(logps, probs.log()[tokens].numpy(), atol=1e-6)


@pytest.mark.parametrize("shape", ["peaked", "flat", "mixed"])
def test_head_first_draw_matches_the_full_sort(shape):
    """The large-vocabulary sampler (top-k head, full sort only as a fallback) draws the same
    tokens as the reference full sort, for rows decided in the head (peaked distributions), rows
    that fall back (flat ones, where u lands in the tail) and top-p sets longer than the head.
    A draw may differ only where u sits within float rounding of a boundary (1 in 4000 here)."""
    from bench.engines.torch_engine import _SAMPLE_HEAD, _inverse_cdf_head_first, _inverse_cdf_sorted

    gen = torch.Generator().manual_seed(0)
    n, vocab = 4000, 8 * _SAMPLE_HEAD
    scale = {"peaked": 6.0, "flat": 0.05, "mixed": 1.5}[shape]
    logp = torch.log_softmax(scale * torch.randn(n, vocab, generator=gen), dim=-1)
    top_p = torch.tensor([1.0, 0.9, 0.5, 0.999])[torch.arange(n) % 4]
    u = torch.rand(n, generator=gen)
    head_first = _inverse_cdf_head_first(logp, top_p, u)
    reference = _inverse_cdf_sorted(logp, top_p, u)
    assert (head_first != reference).float().mean() <= 2e-3
    # the shapes reach both paths: most draws land in the head, or most fall back to the sort
    head_mass = logp.exp().topk(_SAMPLE_HEAD, dim=-1).values.sum(-1).mean()
    assert head_mass > 0.99 if shape == "peaked" else head_mass < 0.7
