"""`HTTPEngine`: the `Engine` protocol against N inference servers speaking vLLM's routes.

Data parallelism: request i goes to server i mod N (tensor parallelism is each server's own
setting). Each request waits for its answer in a thread of a pool (the server batches them);
`step()` hands back the completions that arrived. Routes and bodies: `bench.engines.vllm_routes`;
weights: vLLM's weight-transfer payloads (`bench.engines.weight_wire`), one transfer group per
server (the trainer is rank 0 of each), opened at construction, where the model's weights are
pushed as version 0 so the servers serve exactly the learner's policy.

Exact per-token versions, by pause(abort) and resubmit: `update_weights` blocks new requests,
pauses every server with `mode=abort` (each in-flight request comes back with finish_reason
"abort" and its tokens so far), moves the weights (start / update while broadcasting / finish
with `weight_version`), resumes, and every aborted request is resubmitted as prompt + tokens so
far with the remaining budget: one re-prefill per in-flight sequence under the new weights,
the cost the in-process torch engine pays. The alternative, pause(keep) with vLLM's
`weight_versions` spans, continues frozen sequences on K/V computed by the old weights, so the
tokens labelled new would not be exactly the new policy's (docs/backends.md). Versions come from
the answers' `weight_versions` spans (labels are the learner's integer versions).

A server that stops answering raises `ServerFailed` from `step()` or `update_weights` with
one line naming it; the run loop ends the run there with a checkpoint to resume from.
"""

from __future__ import annotations

import json
import queue
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import torch

from bench.engines.base import Completion, Engine, GenerationRequest, check_request, throughput_stats
from bench.engines.vllm_routes import PauseMode, Route, generate_body, parse_choice
from bench.engines.weight_wire import (
    DEFAULT_BUFFER_BYTES,
    free_port,
    init_info,
    open_group,
    send,
    unique_tensors,
    update_info,
)
from bench.errors import RunStopped, UsageError
from results.rundir import RunOutcome

_POLL_S = 0.01  # how long step() waits for a completion before returning an empty list
REQUEST_TIMEOUT_S = 600.0  # one generation or one weight-transfer call
_SEED_STRIDE = 1_000_003  # a resubmitted request's seed: its own stream, not the first attempt's again


class ServerFailed(RunStopped):
    """An inference server did not answer or answered with an error: the run stops with this
    one line (outcome "failed"); its checkpoints stay, and `--resume` continues once the server
    answers again at the same URL."""

    outcome = RunOutcome.FAILED


def call(
    url: str, route: str, body: dict | None = None, timeout: float = REQUEST_TIMEOUT_S, query: str = ""
) -> tuple[int, Any]:
    """(HTTP status, decoded JSON or None) of `route` on the server at `url`: POST when `body`
    is given or the route takes one, GET for the read-only routes. ServerFailed when it does not answer."""
    method = "GET" if route in (Route.HEALTH, Route.IS_PAUSED, Route.WEIGHT_INFO) else "POST"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{url}{route}{query}", data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    except (OSError, urllib.error.URLError) as err:
        raise ServerFailed(f"rollout server {url} does not answer ({route}): {err}") from None
    return status, json.loads(raw) if raw else None


def _ok(url: str, route: str, body: dict | None = None, query: str = "") -> Any:
    status, answer = call(url, route, body, query=query)
    if status != 200:
        raise ServerFailed(f"rollout server {url}: {route} answered HTTP {status}: {answer}")
    return answer


def check_servers(urls: list[str]) -> None:
    """UsageError naming the first server in `urls` that does not answer `/health` (checked
    before any model loads)."""
    for url in urls:
        try:
            status, _ = call(url.rstrip("/"), Route.HEALTH, timeout=10)
        except ServerFailed as err:
            raise UsageError(f"rollout_urls: {err}") from None
        if status != 200:
            raise UsageError(f"rollout_urls: {url} answered /health with HTTP {status}")


def _transfer_address(url: str) -> str:
    """The address a server reaches the trainer's transfer store at: loopback for a server on
    this host, else this host's own address on the route to the server (the trainer hosts the
    store; the server's address, used before, cannot be bound here)."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    if host in ("localhost", "127.0.0.1", "::1"):
        return "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:  # no packet is sent: the kernel picks the route
        probe.connect((host, parts.port or 80))
        return str(probe.getsockname()[0])


class HTTPEngine(Engine):
    """The engine protocol over vLLM-route servers (module docstring)."""

    def __init__(
        self,
        urls: list[str],
        model: Any,
        tokenizer: Any = None,
        max_batch_size: int = 32,
        max_seq_len: int | None = None,
        buffer_bytes: int = DEFAULT_BUFFER_BYTES,
        pushes_weights: bool = True,
        weight_transfer: str = "gloo",
    ) -> None:
        """Connect to `urls`, open one transfer group per server and push `model`'s weights as
        version 0. `max_batch_size`: requests in flight per server; `max_seq_len`: a context
        budget on top of the servers' own (None: the model's max_position_embeddings).

        `pushes_weights=False`: a learner rank other than the first of a data-parallel run. It
        only generates: rank 0's engine owns the transfer groups and pushes every update, and
        this one resubmits the requests that rank 0's pauses abort (its `update_weights` records
        the version; the caller waits at a barrier until rank 0's push is done).

        `weight_transfer`: "gloo" (the wire the CPU double server reads, `weight_wire`) or "nccl"
        (vLLM's own trainer-side NCCL engine against `vllm serve` on GPUs, `nccl_wire`)."""
        self.urls = [u.rstrip("/") for u in urls]
        self.pushes_weights, self.weight_transfer = pushes_weights, weight_transfer
        self._first_push = unique_tensors(model.state_dict())  # what an NCCL group is planned from
        self.version = 0
        self.max_seq_len = int(max_seq_len or getattr(model.config, "max_position_embeddings", 1 << 30))
        self.buffer_bytes = buffer_bytes
        for url in self.urls:
            _ok(url, Route.HEALTH)
        self._pool = ThreadPoolExecutor(
            max_workers=max_batch_size * len(self.urls), thread_name_prefix="rollout-http"
        )
        self._groups = list(self._pool.map(self._open_transfer, self.urls)) if pushes_weights else []
        self._send_buffers: dict[str, list] = {url: [] for url in self.urls}  # packing memory per server
        self._done: queue.Queue = queue.Queue()
        self._gate = threading.Condition()  # guards _updating, _epoch, _closing
        self._updating, self._epoch, self._closing = False, 0, False
        self._in_flight, self._next_server = 0, 0
        self._counters = {"tokens": 0, "seconds": 0.0, "active": 0, "steps": 0}
        self._transfer = {"updates": 0, "seconds": 0.0, "send_seconds": 0.0, "bytes": 0, "resubmitted": 0}
        self._started = time.perf_counter()
        self.update_weights(model.state_dict(), 0)

    def _open_transfer(self, url: str) -> Any:
        """This trainer as rank 0 of a 2-rank group with the server (its init call blocks until
        both joined, so it runs beside the trainer's own join); with `weight_transfer=nccl`,
        vLLM's trainer engine for that server (`nccl_wire.NCCLTransfer`)."""
        port = free_port()
        if self.weight_transfer == "nccl":
            from bench.engines.nccl_wire import NCCLTransfer

            return NCCLTransfer(url, self._first_push, _transfer_address(url), port, REQUEST_TIMEOUT_S)
        body = {"init_info": init_info(_transfer_address(url), port, 2, self.buffer_bytes)}
        with ThreadPoolExecutor(max_workers=1) as one:
            answer = one.submit(_ok, url, Route.INIT_WEIGHT_TRANSFER, body)
            group = open_group("0.0.0.0", port, 0, 2)
            answer.result()
        return group

    # ---- protocol -------------------------------------------------------------------------
    def submit(self, request: GenerationRequest) -> None:
        """Send a request to its server from a pool thread (checked here, so a bad one fails its caller)."""
        check_request(request)
        url = self.urls[self._next_server % len(self.urls)]
        self._next_server += 1
        self._in_flight += 1
        self._pool.submit(self._run_reporting, request, url)

    def has_work(self) -> bool:
        """True while any submitted request has not come back."""
        return self._in_flight > 0

    def step(self) -> list[Completion]:
        """Completions that arrived since the last call (waits up to ~10 ms for one)."""
        out: list[Completion] = []
        try:
            item = self._done.get(timeout=_POLL_S)
            while True:
                if isinstance(item, BaseException):
                    raise item
                out.append(item)
                item = self._done.get_nowait()
        except queue.Empty:
            pass
        self._in_flight -= len(out)
        c = self._counters
        c["tokens"] += sum(len(x.token_ids) for x in out)
        c["seconds"] = time.perf_counter() - self._started
        return out

    def update_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Pause (abort) every server, move the weights, resume; aborted requests resubmit. An
        engine that does not push (`pushes_weights=False`) records the version only."""
        if not self.pushes_weights:
            self.version = version
            return
        start = time.perf_counter()
        named = unique_tensors(state_dict)
        with self._gate:
            self._updating = True
            self._epoch += 1
        try:
            list(
                self._pool_for_servers().map(
                    self._update_one,
                    self.urls,
                    self._groups,
                    [named] * len(self.urls),
                    [version] * len(self.urls),
                )
            )
        finally:
            with self._gate:
                self._updating = False
                self._gate.notify_all()
        self.version = version
        t = self._transfer
        t["updates"] += 1
        t["seconds"] += time.perf_counter() - start
        t["bytes"] += sum(x.numel() * x.element_size() for _, x in named) * len(self.urls)

    def _pool_for_servers(self) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max_workers=len(self.urls), thread_name_prefix="rollout-update")

    def _update_one(self, url: str, group: Any, named: list, version: int) -> None:
        """One server's update: pause(abort), start, update while broadcasting, finish, resume
        (with `weight_transfer=nccl`, vLLM's `send_weights` makes the three middle calls)."""
        _ok(url, Route.PAUSE, query=f"?mode={PauseMode.ABORT}")
        if self.weight_transfer == "nccl":
            start = time.perf_counter()
            group.send(named, version)
            self._transfer["send_seconds"] += time.perf_counter() - start
            _ok(url, Route.RESUME)
            return
        _ok(url, Route.START_WEIGHT_UPDATE)
        with ThreadPoolExecutor(max_workers=1) as one:
            answer = one.submit(_ok, url, Route.UPDATE_WEIGHTS, {"update_info": update_info(named)})
            start = time.perf_counter()
            send(group, named, self.buffer_bytes, self._send_buffers[url])
            self._transfer["send_seconds"] += time.perf_counter() - start
            answer.result()
        _ok(url, Route.FINISH_WEIGHT_UPDATE, {"weight_version": str(version)})
        _ok(url, Route.RESUME)

    def stats(self) -> dict[str, float]:
        """Tokens received, seconds since construction, tokens/s; weight updates with their
        seconds, the seconds of the broadcasts alone and the bytes (summed over servers);
        requests resubmitted after an update's abort."""
        t = self._transfer
        return {
            **throughput_stats(self._counters),
            "weight_updates": float(t["updates"]),
            "weight_update_seconds": t["seconds"],
            "weight_send_seconds": t["send_seconds"],
            "weight_bytes": float(t["bytes"]),
            "resubmitted": float(t["resubmitted"]),
        }

    def close(self) -> None:
        """End in-flight requests (pause abort, then resume, so the servers are left clean) and
        stop the pool; idempotent, quiet about servers already gone."""
        with self._gate:
            if self._closing:
                return
            self._closing = True
            self._epoch += 1
        for url in self.urls if self.pushes_weights else ():  # the other ranks' requests go on
            try:
                _ok(url, Route.PAUSE, query=f"?mode={PauseMode.ABORT}")
                _ok(url, Route.SHUTDOWN_WEIGHT_TRANSFER)
                _ok(url, Route.RESUME)
            except ServerFailed:
                pass
        self._pool.shutdown(wait=True, cancel_futures=True)
        for group in self._groups:  # its threads must not outlive the engine: a later fork
            group.shutdown()  # (the ProcessEngine's child) would inherit their locks and hang
        self._groups = []
        self._in_flight = 0

    def provenance(self) -> dict:
        """The engine's class and the servers it used."""
        return {"engine": type(self).__name__, "rollout_urls": list(self.urls)}

    # ---- one request --------------------------------------------------------------------
    def _run_reporting(self, request: GenerationRequest, url: str) -> None:
        try:
            self._done.put(self._run(request, url))
        except BaseException as err:  # raised from step() in the caller's thread
            self._done.put(
                err if isinstance(err, ServerFailed) else ServerFailed(f"rollout server {url}: {err!r}")
            )

    def _run(self, request: GenerationRequest, url: str) -> Completion:
        """Generate `request` on `url`, resubmitting prompt + tokens so far after an update's abort."""
        tokens: list[int] = []
        logprobs: list[float] = []
        versions: list[int] = []
        budget = min(request.sampling.max_new_tokens, self.max_seq_len - len(request.prompt_ids))
        while True:
            with self._gate:
                while self._updating and not self._closing:
                    self._gate.wait()
                epoch, closing = self._epoch, self._closing
            remaining = budget - len(tokens)
            if remaining <= 0 or closing:
                reason = "abort" if closing else "length"
                return Completion(
                    request.request_id, list(request.prompt_ids), tokens, logprobs, versions, reason
                )
            seed = request.seed if not tokens else (request.seed * _SEED_STRIDE + len(tokens)) % (1 << 62)
            body = generate_body(
                f"{request.request_id}#{len(tokens)}", request.prompt_ids + tokens, request, remaining, seed
            )
            status, answer = call(url, Route.GENERATE, body)
            if status == 503:  # paused by an update that started after we looked: wait for it
                time.sleep(_POLL_S)
                continue
            if status != 200:
                raise ServerFailed(f"rollout server {url}: generate answered HTTP {status}: {answer}")
            ids, lps, labels, reason = parse_choice(answer)
            tokens += ids
            logprobs += lps
            versions += [int(label) for label in labels]
            # aborted by our own pause, or (an engine that does not push) by rank 0's
            if reason == "abort" and (self._epoch != epoch or not self.pushes_weights):
                self._transfer["resubmitted"] += 1
                continue
            if reason == "stop":  # vLLM says "stop" for eos too; stop_reason names a matched string
                reason = "stop" if isinstance(answer["choices"][0].get("stop_reason"), str) else "eos"
            return Completion(
                request.request_id, list(request.prompt_ids), tokens, logprobs, versions, reason
            )
