"""The engine contract (`bench.engines.base`), the same tests for every engine.

Parametrised over engines: `torch` runs here on CPU, which shows the tests themselves are right;
`http` is the disaggregated engine (`bench.engines.http_engine`) against one CPU double server
process per architecture (`bench.engines.double_server`: vLLM's routes over the torch engine,
weights over gloo); `vllm` is marked `gpu` (skipped without a CUDA device and without vLLM) and
runs them, unchanged, on a GPU machine. Tolerance 1e-3 in log-prob against the learner's `response_logprobs` (both
sides float32: the engine's dtype defaults to the learner's parameters'). What they check:
parity at T 0.8 and 1.0; greedy = argmax; a seed reproduces its sample alone and in a batch;
stop strings; the context budget; an in-flight weight update after which every token labelled
with the new version is exactly the new weights' (and every older one the old weights'); close
and re-create in one process. Each test runs on two architectures: the tiny Llama and a
Qwen3-shaped model of the same size (per-head q/k norms, head_dim 64 instead of 128 / 4, a size
GPU attention kernels support), both served by the torch engine's KV-cached runner.
`docs/backends.md` records where each engine passed them.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
import time

import pytest
import torch

from bench.engines import make_engine
from bench.engines.base import GenerationRequest, SamplingParams
from bench.models.logprobs import response_logprobs
from bench.models.packing import pack
from bench.models.tiny import new_tiny_model
from tests.requires import requires

TOLERANCE = 1e-3
TEXTS = ["hi", "What is 2+2?", "x", "The quick brown fox\njumps", "a b c", "Q: 17*3\nA:"]


@pytest.fixture(params=["torch", "http", pytest.param("vllm", marks=pytest.mark.gpu)])
def kind(request) -> str:
    """The engine under test; vLLM only where it is installed (and, by the marker, a GPU)."""
    if request.param == "vllm":
        requires("vllm")
    return request.param


def new_tiny_qwen3_model(seed: int):
    """A random Qwen3-shaped model over the tiny tokenizer, as large as the tiny Llama."""
    from transformers import AutoModelForCausalLM, Qwen3Config

    _, tok = new_tiny_model(seed)
    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        intermediate_size=384,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
        for layer in model.model.layers:  # q/k norm weights start at 1: make them matter
            torch.nn.init.uniform_(layer.self_attn.q_norm.weight, 0.5, 1.5)
            torch.nn.init.uniform_(layer.self_attn.k_norm.weight, 0.5, 1.5)
    return model, tok


@pytest.fixture(scope="module", params=["llama", "qwen3"])
def models(request):
    """The policy before and after an update (random tiny models, float32) and the tokenizer."""
    build = new_tiny_model if request.param == "llama" else new_tiny_qwen3_model
    old, tok = build(0)
    new, _ = build(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return old.to(device).eval(), new.to(device).eval(), tok


_SERVERS: dict = {}  # model_type -> the double server process serving that architecture


@pytest.fixture(scope="module", autouse=True)
def _stop_servers():
    """Stop the double servers this module started."""
    yield
    while _SERVERS:
        server, folder = _SERVERS.popitem()[1]
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def engine_for(kind: str, model, tok, **kwargs):
    """An engine of `kind` on a copy of `model` (vLLM: a small share of the GPU; http: the
    double server of the model's architecture, started once, the model's weights pushed)."""
    if kind == "http":
        from bench.engines.http_engine import HTTPEngine

        arch = model.config.model_type
        if arch not in _SERVERS:
            _SERVERS[arch] = start_double_for(model, tok)
        return HTTPEngine([_SERVERS[arch][0].url], copy.deepcopy(model), tok, max_batch_size=8, **kwargs)
    if kind == "vllm":
        kwargs.setdefault("engine_args", {"gpu_memory_utilization": 0.2})
    return make_engine(kind, copy.deepcopy(model), tok, max_batch_size=8, **kwargs)


def start_double_for(model, tok):
    """A double server process over a saved copy of `model` (its weights are replaced anyway),
    and the folder it was saved in."""
    from bench.engines.server_procs import start_double

    folder = tempfile.mkdtemp(prefix="double-")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return start_double(folder, slots=8), folder


def requests(tok, n: int, sampling: SamplingParams, seed0: int = 0) -> list[GenerationRequest]:
    return [
        GenerationRequest(
            f"r{seed0 + i}",
            [tok.bos_token_id] + tok.encode(TEXTS[i % len(TEXTS)], add_special_tokens=False),
            sampling,
            seed=seed0 + i,
        )
        for i in range(n)
    ]


def learner_logprobs(model, completions, temperature: float) -> list[torch.Tensor]:
    batch = pack([c.prompt_ids for c in completions], [c.token_ids for c in completions], 0)
    with torch.no_grad():
        logp_B_T, _ = response_logprobs(model, batch, temperature=temperature)
    return [logp_B_T[b, : len(c.token_ids)].float().cpu() for b, c in enumerate(completions)]


@pytest.mark.parametrize("temperature", [0.8, 1.0])
def test_logprob_parity_with_the_learner(kind, models, temperature):
    old, _, tok = models
    engine = engine_for(kind, old, tok)
    assert getattr(engine, "cached", True)  # the torch engine runs both architectures KV-cached
    try:
        done = engine.generate(requests(tok, 6, SamplingParams(temperature=temperature, max_new_tokens=24)))
    finally:
        engine.close()
    assert all(len(c.token_ids) == len(c.logprobs) == len(c.versions) for c in done)
    assert sum(len(c.token_ids) for c in done) > 20 and {c.finish_reason for c in done} <= {
        "eos",
        "stop",
        "length",
    }
    for c, ref in zip(done, learner_logprobs(old, done, temperature)):
        assert (torch.tensor(c.logprobs) - ref).abs().max().item() <= TOLERANCE


def test_greedy_is_the_argmax(kind, models):
    old, _, tok = models
    engine = engine_for(kind, old, tok)
    try:
        done = engine.generate(requests(tok, 4, SamplingParams(temperature=0.0, max_new_tokens=16)))
    finally:
        engine.close()
    for c in done:
        ids = torch.tensor([c.prompt_ids + c.token_ids], device=next(old.parameters()).device)
        with torch.no_grad():
            logits = old(input_ids=ids).logits[0].float()
        start = len(c.prompt_ids) - 1
        assert c.token_ids == logits[start : start + len(c.token_ids)].argmax(-1).tolist()


def test_a_seed_reproduces_alone_and_in_a_batch(kind, models):
    old, _, tok = models
    sampling = SamplingParams(temperature=1.0, max_new_tokens=20)
    engine = engine_for(kind, old, tok)
    try:
        batch = engine.generate(requests(tok, 6, sampling))
        again = engine.generate(requests(tok, 6, sampling))
        alone = engine.generate(requests(tok, 6, sampling)[2:3])
    finally:
        engine.close()
    assert [c.token_ids for c in batch] == [c.token_ids for c in again]
    assert alone[0].token_ids == batch[2].token_ids


def test_stop_strings_end_after_the_completing_token(kind, models):
    old, _, tok = models
    free = SamplingParams(temperature=1.0, max_new_tokens=24)
    engine = engine_for(kind, old, tok)
    try:
        (full,) = engine.generate(requests(tok, 1, free))
        stop = tok.decode(full.token_ids[3:4])
        (stopped,) = engine.generate(requests(tok, 1, SamplingParams(1.0, 1.0, 24, stop=(stop,))))
    finally:
        engine.close()
    assert stopped.finish_reason == "stop" and stop in tok.decode(stopped.token_ids)
    assert stopped.token_ids == full.token_ids[: len(stopped.token_ids)] and len(stopped.token_ids) <= 4
    assert stop not in tok.decode(stopped.token_ids[:-1])  # ended by the token that completed it


def test_the_context_budget(kind, models):
    old, _, tok = models
    engine = engine_for(kind, old, tok, max_seq_len=24)
    try:
        short, too_long = (
            GenerationRequest("a", [tok.bos_token_id] * 20, SamplingParams(1.0, 1.0, 50), 1),
            GenerationRequest("b", [tok.bos_token_id] * 24, SamplingParams(1.0, 1.0, 50), 2),
        )
        done = engine.generate([short, too_long])
    finally:
        engine.close()
    assert len(done[0].token_ids) <= 4 and (
        done[0].finish_reason in ("eos", "stop") or len(done[0].token_ids) == 4
    )
    assert done[1].token_ids == [] and done[1].finish_reason == "length"


def test_an_in_flight_update_is_exact(kind, models):
    old, new, tok = models
    engine = engine_for(kind, old, tok)
    try:
        # short requests and one long one: the update comes once a short one has finished, so
        # the long one is mid-sequence whatever the engine's pace (a server engine's step() only
        # collects; a fixed number of steps raced the server on a loaded machine)
        long = requests(tok, 1, SamplingParams(temperature=1.0, max_new_tokens=200), seed0=10)
        for request in [*requests(tok, 4, SamplingParams(temperature=1.0, max_new_tokens=8)), *long]:
            engine.submit(request)
        done: list = []
        deadline = time.monotonic() + 120
        while not done and time.monotonic() < deadline:
            done += engine.step()
        engine.update_weights(new.state_dict(), version=1)
        while engine.has_work():
            done += engine.step()
    finally:
        engine.close()
    assert any(0 in c.versions and 1 in c.versions for c in done)  # updated mid-sequence
    for c, under_old, under_new in zip(
        done, learner_logprobs(old, done, 1.0), learner_logprobs(new, done, 1.0)
    ):
        versions = torch.tensor(c.versions)
        assert versions.tolist() == sorted(versions.tolist())
        recorded = torch.tensor(c.logprobs)
        expected = torch.where(versions == 1, under_new, under_old)
        assert (recorded - expected).abs().max().item() <= TOLERANCE


def test_close_and_recreate_in_one_process(kind, models):
    old, _, tok = models
    sampling = SamplingParams(temperature=1.0, max_new_tokens=16)
    first = engine_for(kind, old, tok)
    a = first.generate(requests(tok, 3, sampling))
    first.close()
    first.close()  # idempotent
    second = engine_for(kind, old, tok)
    try:
        b = second.generate(requests(tok, 3, sampling))
    finally:
        second.close()
    assert [c.token_ids for c in a] == [c.token_ids for c in b]


@pytest.mark.gpu
def test_vllm_defaults_to_the_learner_dtype_and_records_it():
    requires("vllm")
    model, tok = new_tiny_model(seed=0)
    engine = make_engine("vllm", model, tok, engine_args={"gpu_memory_utilization": 0.2})
    try:
        record = engine.provenance()
    finally:
        engine.close()
    assert record["dtype"] == record["learner_dtype"] == "float32"
    assert record["engine_args"]["async_scheduling"] is False and record["vllm_version"]
