"""The CPU double of a vLLM server: the torch engine behind the vLLM routes the HTTP engine uses.

`python -m bench.engines.double_server --model DIR [--port P] [--slots N]` serves an HF model
directory (saved with its tokenizer) on 127.0.0.1; it prints one line `serving http://HOST:PORT`
once it answers, so a launcher can wait for it. What it serves (`bench.engines.vllm_routes`, each
route and body checked against vLLM 0.34's source): token-in/token-out generation with per-token
log-probs and `weight_versions` spans, `/pause` (abort and wait; keep is refused with HTTP 400,
since the double's engine re-prefills on every update and would not show what vLLM's keep does),
`/resume`, `/is_paused`, and the weight-transfer routes, receiving vLLM's packed payloads over a
gloo broadcast (`bench.engines.weight_wire`). While paused, new generate requests get HTTP 503,
as vLLM answers them. Everything else vLLM serves is absent (404).

One engine thread steps the `TorchEngine`; each HTTP request waits on its own completion.
Weights received by `/update_weights` are staged and loaded by `/finish_weight_update`, which
labels every later token with its `weight_version` (the engine's integer versions index the labels).
"""

from __future__ import annotations

import argparse
import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import torch

from bench.engines.base import Completion, GenerationRequest, SamplingParams
from bench.engines.torch_engine import TorchEngine
from bench.engines.vllm_routes import PauseMode, Route, generate_response, version_spans
from bench.engines.weight_wire import open_group, receive


class DoubleServer:
    """The routes' behaviour, independent of HTTP (the handler below only parses and replies)."""

    def __init__(self, model: Any, tokenizer: Any, max_batch_size: int = 32) -> None:
        self.engine = TorchEngine(model, tokenizer, max_batch_size=max_batch_size)
        self.tokenizer = tokenizer
        self.labels: list[str | None] = [None]  # weight version label of each engine version
        self.paused = False
        self._cv = threading.Condition()
        self._results: dict[str, Completion] = {}
        self._group: Any = None
        self._buffer_bytes = 0
        self._staged: dict[str, torch.Tensor] | None = None  # this update's tensors, by name
        self._store: dict[str, torch.Tensor] = {}  # staging memory, kept between updates
        self._buffers: list[torch.Tensor] = []  # receive buffers, kept between updates
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="double-engine", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._stopped and not self.engine.has_work():
                    self._cv.wait(0.5)
                if self._stopped:
                    return
            self._deliver(self.engine.step())

    def _deliver(self, done: list[Completion]) -> None:
        if done:
            with self._cv:
                self._results.update((c.request_id, c) for c in done)
                self._cv.notify_all()

    def generate(self, body: dict) -> tuple[int, dict]:
        """`/inference/v1/generate`, non-streaming: (HTTP status, response body)."""
        params = body.get("sampling_params") or {}
        token_ids, request_id = body.get("token_ids"), str(body.get("request_id"))
        if (
            not isinstance(token_ids, list)
            or not token_ids
            or not all(isinstance(t, int) and t >= 0 for t in token_ids)
        ):
            return 400, {"error": "token_ids: need a non-empty list of non-negative ints"}
        seed = params.get("seed")
        sampling = SamplingParams(
            temperature=float(params.get("temperature", 1.0)),
            top_p=float(params.get("top_p", 1.0)),
            max_new_tokens=int(params.get("max_tokens") or 16),  # vLLM's default max_tokens
            stop=tuple([params["stop"]] if isinstance(params.get("stop"), str) else params.get("stop") or ()),
        )
        request = GenerationRequest(
            request_id, token_ids, sampling, random.getrandbits(62) if seed is None else int(seed)
        )
        with self._cv:
            if self.paused:
                return 503, {"error": "generation is paused"}
            try:
                self.engine.submit(request)
            except ValueError as err:
                return 400, {"error": str(err)}
            self._cv.notify_all()
            while request_id not in self._results:
                self._cv.wait()
            done = self._results.pop(request_id)
        return 200, self._response(done, sampling, params.get("logprobs") is not None)

    def _response(self, done: Completion, sampling: SamplingParams, logprobs: bool) -> dict:
        reason = done.finish_reason
        stop_reason = None
        if reason == "stop":  # vLLM's stop_reason names the stop string; eos is "stop" without one
            text = self.tokenizer.decode(done.token_ids, skip_special_tokens=False)
            stop_reason = next((s for s in sampling.stop if s in text), sampling.stop[0])
        vllm_reason = "stop" if reason == "eos" else reason
        body = generate_response(
            done.request_id,
            done.token_ids,
            done.logprobs,
            vllm_reason,
            version_spans([self.labels[v] for v in done.versions]),
        )
        choice = body["choices"][0]
        choice["stop_reason"] = stop_reason
        if not logprobs:
            choice["logprobs"] = None
        return body

    def pause(self, mode: str) -> tuple[int, dict]:
        """`/pause?mode=...`: abort ends in-flight requests with their tokens so far; wait lets
        them finish; both reject new requests until `/resume`."""
        if mode not in (PauseMode.ABORT, PauseMode.WAIT):
            return 400, {"error": f"pause mode {mode!r}: the CPU double serves abort and wait"}
        with self._cv:
            self.paused = True
        if mode == PauseMode.ABORT:
            self._deliver(self.engine.abort_all())
        else:
            with self._cv:
                while self.engine.has_work():
                    self._cv.wait(0.05)
        return 200, {"status": "paused"}

    def resume(self) -> tuple[int, dict]:
        """`/resume`."""
        with self._cv:
            self.paused = False
        return 200, {"status": "resumed"}

    def init_transfer(self, body: dict) -> tuple[int, dict]:
        """`/init_weight_transfer_engine`: join the trainer's group as rank `rank_offset`."""
        info = body["init_info"]
        self._buffer_bytes = int(info["packed_buffer_size_bytes"])
        rank = int(info["rank_offset"])  # one worker: the double has no tensor parallelism
        self.shutdown_transfer()
        self._group = open_group(
            info["master_address"], int(info["master_port"]), rank, int(info["world_size"])
        )
        return 200, {"message": "Weight transfer initialized"}

    def start_update(self) -> tuple[int, dict]:
        """`/start_weight_update`."""
        if self._group is None:
            return 400, {"error": "weight transfer not initialized; POST /init_weight_transfer_engine first"}
        self._staged = {}
        return 200, {"message": "Weight update started"}

    def update(self, body: dict) -> tuple[int, dict]:
        """`/update_weights`: receive the broadcast the update info describes."""
        if self._staged is None:
            return 400, {"error": "POST /start_weight_update first"}
        for chunk in receive(self._group, body["update_info"], self._buffer_bytes, self._buffers):
            for name, tensor in chunk:  # copied out: the views die with the next buffer
                kept = self._store.get(name)
                if kept is None or kept.shape != tensor.shape or kept.dtype != tensor.dtype:
                    kept = self._store[name] = torch.empty_like(tensor)
                self._staged[name] = kept.copy_(tensor)
        return 200, {"message": "Weights updated"}

    def finish_update(self, body: dict | None) -> tuple[int, dict]:
        """`/finish_weight_update`: load the staged weights; later tokens carry `weight_version`."""
        if self._staged is None:
            return 400, {"error": "POST /start_weight_update first"}
        label = (body or {}).get("weight_version")
        own = self.engine.model.state_dict()
        merged = {name: self._staged.get(name, tensor) for name, tensor in own.items()}
        self.labels.append(label)
        self.engine.update_weights(merged, len(self.labels) - 1)
        self._staged = None
        return 200, {"message": "Weight update finished"}

    def shutdown_transfer(self) -> tuple[int, dict]:
        """`/shutdown_weight_transfer_engine`: the group's threads stop."""
        if self._group is not None:
            self._group.shutdown()
        self._group = None
        return 200, {"message": "Weight transfer shut down"}

    def close(self) -> None:
        """Stop the engine thread."""
        with self._cv:
            self._stopped = True
            self._cv.notify_all()
        self._thread.join(timeout=10)
        self.engine.close()


def _handler(server: DoubleServer) -> type[BaseHTTPRequestHandler]:
    """The HTTP side: route by path, JSON in and out."""
    posts = {
        Route.GENERATE: server.generate,
        Route.INIT_WEIGHT_TRANSFER: server.init_transfer,
        Route.UPDATE_WEIGHTS: server.update,
        Route.FINISH_WEIGHT_UPDATE: server.finish_update,
    }
    no_body = {
        Route.RESUME: server.resume,
        Route.START_WEIGHT_UPDATE: server.start_update,
        Route.SHUTDOWN_WEIGHT_TRANSFER: server.shutdown_transfer,
    }
    gets = {
        Route.HEALTH: lambda: (200, None),
        Route.IS_PAUSED: lambda: (200, {"is_paused": server.paused}),
        Route.WEIGHT_INFO: lambda: (200, {"weight_version": server.labels[server.engine.version]}),
        Route.GET_WORLD_SIZE: lambda: (200, {"world_size": 1}),  # one process: one worker
    }

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: one connection per client thread

        def log_message(self, *args: Any) -> None:  # quiet: one line per request would flood logs
            pass

        def _reply(self, status: int, body: dict | None) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            route = gets.get(urlsplit(self.path).path)
            self._reply(*(route() if route else (404, {"error": "not found"})))

        def do_POST(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            if url.path == Route.PAUSE:
                self._reply(*server.pause(parse_qs(url.query).get("mode", [PauseMode.ABORT])[0]))
            elif url.path in posts:
                self._reply(*posts[url.path](body))
            elif url.path in no_body:
                self._reply(*no_body[url.path]())
            else:
                self._reply(404, {"error": "not found"})

    return Handler


class _Listener(ThreadingHTTPServer):
    request_queue_size = 1024  # every slot of every client may connect at once (socketserver's 5 reset them)


def serve(server: DoubleServer, port: int = 0, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """An HTTP server for `server` on host:port (0: a free port), serving from a daemon thread."""
    http = _Listener((host, port), _handler(server))
    http.daemon_threads = True
    threading.Thread(target=http.serve_forever, name="double-http", daemon=True).start()
    return http


def main(argv: list[str] | None = None) -> None:
    """Serve an HF model directory until killed."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="HF model directory (with its tokenizer)")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    parser.add_argument("--slots", type=int, default=32, help="concurrent sequences")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    http = serve(DoubleServer(model, tokenizer, args.slots), args.port, args.host)
    print(f"serving http://{http.server_address[0]}:{http.server_address[1]}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
