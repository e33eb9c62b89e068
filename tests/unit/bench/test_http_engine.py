"""The disaggregated engine's parts on CPU: the gloo transport of vLLM's packed payloads, the
double server's pause semantics, and the HTTP engine's failures (the engine contract itself is in
tests/gpu/test_engine_contract.py)."""

from __future__ import annotations

import copy
import threading
import time

import pytest
import torch

from bench.engines.base import GenerationRequest, SamplingParams
from bench.engines.double_server import DoubleServer, serve
from bench.engines.http_engine import HTTPEngine, ServerFailed, call
from bench.engines.vllm_routes import Route
from bench.engines.weight_wire import free_port, open_group, receive, send, unique_tensors, update_info
from bench.models.tiny import new_tiny_model


def test_packed_gloo_transfer_round_trips_several_buffers_and_dtypes():
    named = [
        ("a", torch.arange(6, dtype=torch.float32).reshape(2, 3)),
        ("b", torch.tensor([1.5, -2.0], dtype=torch.bfloat16)),
        ("c", torch.arange(10, dtype=torch.int64)),
    ]
    port = free_port()
    received: list = []

    def worker() -> None:
        group = open_group("127.0.0.1", port, 1, 2)
        for chunk in receive(group, update_info(named), 16, []):
            received.append([(n, t.clone()) for n, t in chunk])

    thread = threading.Thread(target=worker)
    thread.start()
    sent = send(open_group("127.0.0.1", port, 0, 2), named, 16, [])
    thread.join(timeout=60)
    # 24 bytes (> 16: closes alone), then 4 + 80 bytes: two buffers
    assert [[n for n, _ in chunk] for chunk in received] == [["a"], ["b", "c"]]
    assert sent == 24 + 4 + 80
    for (name, tensor), (got_name, got) in zip(named, [x for chunk in received for x in chunk]):
        assert name == got_name and got.dtype == tensor.dtype and torch.equal(got, tensor)


def test_tied_tensors_are_sent_once():
    model, _ = new_tiny_model(0)
    state = model.state_dict()
    names = [n for n, _ in unique_tensors(state)]
    assert model.config.tie_word_embeddings and "lm_head.weight" in state and "lm_head.weight" not in names
    assert len(names) == len(state) - 1


@pytest.fixture
def double():
    model, tok = new_tiny_model(0)
    server = DoubleServer(copy.deepcopy(model), tok, max_batch_size=4)
    http = serve(server)
    server.http = http  # for the test that takes it down
    yield server, f"http://127.0.0.1:{http.server_address[1]}", model, tok
    http.shutdown()
    http.server_close()
    server.close()


def test_the_double_pauses_like_vllm(double):
    server, url, model, tok = double
    assert call(url, Route.PAUSE, query="?mode=keep")[0] == 400  # the double serves abort and wait
    assert call(url, Route.PAUSE, query="?mode=abort") == (200, {"status": "paused"})
    assert call(url, Route.IS_PAUSED) == (200, {"is_paused": True})
    body = {"request_id": "x", "token_ids": [tok.bos_token_id], "sampling_params": {"max_tokens": 3}}
    assert call(url, Route.GENERATE, body)[0] == 503  # new requests wait for /resume
    assert call(url, Route.RESUME) == (200, {"status": "resumed"})
    status, answer = call(url, Route.GENERATE, body)
    assert status == 200 and len(answer["choices"][0]["token_ids"]) <= 3
    assert answer["choices"][0]["logprobs"] is None  # not asked for (sampling_params.logprobs unset)
    assert call(url, Route.START_WEIGHT_UPDATE)[0] == 400  # no transfer group yet


def test_an_update_resubmits_in_flight_requests_and_labels_versions(double):
    _, url, model, tok = double
    other, _ = new_tiny_model(1)
    engine = HTTPEngine([url], copy.deepcopy(model), tok, max_batch_size=4)
    try:
        sampling = SamplingParams(temperature=1.0, max_new_tokens=200)
        for i in range(4):
            engine.submit(GenerationRequest(f"r{i}", [tok.bos_token_id], sampling, i))
        done = engine.step()
        engine.update_weights(other.state_dict(), 7)
        while engine.has_work():
            done += engine.step()
        assert call(url, Route.WEIGHT_INFO) == (200, {"weight_version": "7"})
    finally:
        engine.close()
    assert all(set(c.versions) <= {0, 7} and c.versions == sorted(c.versions) for c in done)
    assert engine.stats()["resubmitted"] >= 1 and engine.stats()["weight_updates"] == 2


def test_a_server_that_does_not_answer_is_one_clear_error():
    model, tok = new_tiny_model(0)
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerFailed, match=f"rollout server {url} does not answer"):
        HTTPEngine([url], model, tok)


def test_a_server_dying_mid_run_fails_step(double):
    server, url, model, tok = double
    engine = HTTPEngine([url], copy.deepcopy(model), tok, max_batch_size=4)
    try:
        server.http.shutdown()  # the server goes away: connections are refused from here on
        server.http.server_close()
        engine.submit(GenerationRequest("r", [tok.bos_token_id], SamplingParams(max_new_tokens=4), 0))
        with pytest.raises(ServerFailed, match="rollout server"):
            for _ in range(500):
                engine.step()
    finally:
        engine.close()


def test_the_run_config_pairs_the_http_engine_with_answering_servers(double, monkeypatch):
    from bench.config import build_config, validate
    from bench.errors import UsageError

    _, url, _, _ = double
    validate(build_config({"engine": "http", "rollout_urls": f"{url}, {url}"}))
    with pytest.raises(UsageError, match="rollout_urls: the http engine needs them"):
        validate(build_config({"engine": "http"}))
    with pytest.raises(UsageError, match="and only it takes them"):
        validate(build_config({"rollout_urls": url}))
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(UsageError, match=f"rollout_urls: rollout server {dead} does not answer"):
        validate(build_config({"engine": "http", "rollout_urls": f"{url},{dead}"}))
    monkeypatch.setenv("WORLD_SIZE", "2")  # learner ranks: rank 0 pushes the weights, every rank generates
    validate(build_config({"engine": "http", "rollout_urls": url}))


def test_every_slot_may_connect_at_once():
    # 64 requests connecting together overflowed socketserver's default listen backlog (5):
    # connections were reset and the run stopped as if the server had died
    model, tok = new_tiny_model(0)
    server = DoubleServer(copy.deepcopy(model), tok, max_batch_size=64)
    http = serve(server)
    engine = HTTPEngine(
        [f"http://127.0.0.1:{http.server_address[1]}"], copy.deepcopy(model), tok, max_batch_size=64
    )
    try:
        sampling = SamplingParams(max_new_tokens=8)
        done = engine.generate(
            [GenerationRequest(f"r{i}", [tok.bos_token_id], sampling, i) for i in range(256)]
        )
    finally:
        engine.close()
        http.shutdown()
        http.server_close()
        server.close()
    assert len(done) == 256 and {c.finish_reason for c in done} <= {"eos", "length"}


def _gloo_threads() -> list[str]:
    from pathlib import Path

    names = []
    for task in Path("/proc/self/task").iterdir():
        try:
            names.append((task / "comm").read_text().strip())
        except FileNotFoundError:  # the thread ended between listing and reading (CI saw it)
            continue
    return [n for n in names if "gloo" in n or "tcpstore" in n]


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/task"), reason="needs Linux /proc")
def test_close_stops_the_transfer_threads(double):
    # left running, they made a later fork (the ProcessEngine's child) hang on an inherited lock
    _, url, model, tok = double
    before = _gloo_threads()
    engine = HTTPEngine([url], copy.deepcopy(model), tok, max_batch_size=4)
    assert len(_gloo_threads()) > len(before)
    engine.close()
    deadline = time.monotonic() + 10
    while len(_gloo_threads()) > len(before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gloo_threads() == before


def test_a_remote_server_is_given_this_hosts_address_for_the_transfer_store():
    # the trainer hosts the store: a server on another node must be told an address of this
    # host (before, it was told its own address, which the trainer cannot bind)
    import socket

    from bench.engines.http_engine import _transfer_address

    assert _transfer_address("http://127.0.0.1:8100") == "127.0.0.1"
    assert _transfer_address("http://localhost:8100") == "127.0.0.1"
    try:
        address = _transfer_address("http://192.0.2.77:8100")  # TEST-NET-1: never this host
    except OSError:
        pytest.skip("no IPv4 route on this machine")
    assert address != "192.0.2.77"
    with socket.socket() as s:
        s.bind((address, 0))  # an address of this host
