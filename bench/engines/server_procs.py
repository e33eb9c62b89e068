"""Start CPU double servers (`bench.engines.double_server`) as child processes and stop them.

Independent of who places them (tests, `bench run`, a Ray launcher later): a server is a process
and the URL it printed once it answered.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT_S = 120.0


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
    model_dir: str | Path, slots: int = 32, port: int = 0, timeout: float = START_TIMEOUT_S
) -> ServerProcess:
    """A double server over the HF model in `model_dir` on `port` (0: a free one), once it serves; raises
    RuntimeError with its output when it exits or stays silent for `timeout` seconds."""
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
