"""`EngineWorker`: the thread that steps a rollout engine for everyone else."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from bench.engines.base import Completion, Engine, GenerationRequest


class EngineWorker:
    """Runs `engine.step()` in its own thread; requests arrive from any thread and each
    finished completion is handed to the callback given with its request."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._inbox: queue.Queue = queue.Queue()
        self._callbacks: dict[str, Callable[[Completion], None]] = {}
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="engine-worker", daemon=True)
        self._thread.start()

    def submit(self, request: GenerationRequest, callback: Callable[[Completion], None]) -> None:
        """Queue a request; `callback(completion)` runs on the engine thread when it finishes."""
        self._inbox.put((request, callback))

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                block = not self.engine.has_work()
                try:
                    while True:  # drain everything that arrived; block only when idle
                        request, callback = self._inbox.get(block=block, timeout=0.05)
                        block = False
                        self._callbacks[request.request_id] = callback
                        self.engine.submit(request)
                except queue.Empty:
                    pass
                if self.engine.has_work():
                    for completion in self.engine.step():
                        self._callbacks.pop(completion.request_id)(completion)
        except BaseException as exc:  # surfaced to the learner by the producer
            self.error = exc

    def close(self) -> None:
        """Stop the thread (in-flight requests are abandoned)."""
        self._stop.set()
        self._thread.join(timeout=10)
