"""Start inference servers as child processes and stop them: CPU double servers
(`bench.engines.double_server`) and, on GPUs, `vllm serve` with the RL routes and the NCCL
weight transfer the http engine uses (`weight_transfer=nccl`).

Independent of who places them (tests, `bench run`, a Ray launcher later): a server is a process
and the URL it printed once it answered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT_S = 120.0
VLLM_START_TIMEOUT_S = 900.0  # a large model loads and compiles for minutes


@dataclass
class ServerProcess:
    """A running double server: its process and URL."""

    process: subprocess.Popen
    url: str

    def stop(self) -> None:
        """Kill the server and reap it (idempotent)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_double(
    model_dir: str | Path,
    slots: int = 32,
    port: int = 0,
    timeout: float = START_TIMEOUT_S,
    host: str = "127.0.0.1",
) -> ServerProcess:
    """A double server over the HF model in `model_dir` on host:`port` (0: a free one), once it
    serves; raises RuntimeError with its output when it exits or stays silent for `timeout`
    seconds. Its URL names `host` as given (0.0.0.0 when it listens on every interface: the
    placer knows the address other hosts reach it at)."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.engines.double_server",
            "--model",
            str(model_dir),
            "--slots",
            str(slots),
            "--port",
            str(port),
            "--host",
            host,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        seen.append(line)
        if line.startswith("serving "):
            return ServerProcess(process, line.split()[1])
    process.kill()
    process.wait()
    raise RuntimeError(
        f"double server did not start (exit code {process.returncode}):\n{''.join(seen[-20:])}"
    )


def vllm_serve_command(model: str, port: int, tp: int, host: str = "127.0.0.1") -> list[str]:
    """`vllm serve` for the http engine: the RL routes need VLLM_SERVER_DEV_MODE=1 (set by
    `start_vllm`), log-probs after temperature (`processed_logprobs`, what the learner computes),
    the NCCL weight transfer, `tp` GPUs."""
    cmd = ["vllm", "serve", model, "--host", host, "--port", str(port)]
    cmd += ["--tensor-parallel-size", str(tp), "--logprobs-mode", "processed_logprobs"]
    return cmd + ["--weight-transfer-config", json.dumps({"backend": "nccl"})]


def start_vllm(
    model: str, gpus: str, tp: int, timeout: float = VLLM_START_TIMEOUT_S, host: str = "127.0.0.1"
) -> ServerProcess:
    """`vllm serve` on `gpus` (CUDA_VISIBLE_DEVICES) and a free port, once `/health` answers; its
    output goes to a log file (a pipe nobody reads would stall it); raises RuntimeError with the
    log's end when it exits or stays silent for `timeout` seconds."""
    from bench.engines.weight_wire import free_port

    port = free_port()
    log = tempfile.NamedTemporaryFile("w+", prefix="bench-vllm-serve-", suffix=".log", delete=False)
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", "CUDA_VISIBLE_DEVICES": gpus}
    process = subprocess.Popen(
        vllm_serve_command(model, port, tp, host), stdout=log, stderr=subprocess.STDOUT, env=env
    )
    url = f"http://{host}:{port}"
    local = f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(local + "/health", timeout=5) as answer:
                if answer.status == 200:
                    return ServerProcess(process, url)
        except OSError:
            time.sleep(1.0)
    process.kill()
    process.wait()
    tail = Path(log.name).read_text(errors="replace")[-3000:]
    raise RuntimeError(
        f"vllm serve on GPUs {gpus} did not start (exit code {process.returncode}; log {log.name}):\n{tail}"
    )
