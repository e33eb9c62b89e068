"""The rollout-engine protocol: requests in, completions (tokens, log-probs, versions) out.

An engine owns a model copy and a set of batch slots. The async loop drives it from one
thread: `submit` requests, call `step` repeatedly (each call admits waiting requests into
free slots and decodes one token for every active slot), and collect the completions it
returns. `update_weights` may be called from another thread; it takes effect between steps.

What a completion records, token by token:
- `logprobs`: log_softmax(logits / temperature) of the sampled token, in float32, over the
  FULL vocabulary, i.e. before top-p truncation. The learner recomputes exactly this
  quantity (`bench.models.response_logprobs` at the same temperature) for importance ratios,
  so the two must be the same function of the logits; the top-p renormalisation is a
  sampling detail that the learner cannot reproduce from a log-prob alone. With
  temperature 0 (greedy) the untempered distribution (temperature 1) is recorded.
- `versions`: the policy version that produced each token.
- The eos token, when sampled, is included (with its log-prob) and ends the request
  ("eos"); a stop string ends it after the token that completes it, that token included
  ("stop"); reaching `max_new_tokens` ends it with "length". A request the engine aborted or
  failed (vLLM) ends with "abort" or "error": not a natural end, never reported as "length".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # type hints only: the protocol and its names import no torch
    from torch import Tensor

ENGINE_NAMES = ("torch", "vllm", "http")
"""Engines `bench.engines.make_engine` builds."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion."""

    temperature: float = 1.0
    """Softmax temperature; 0 means greedy decoding."""
    top_p: float = 1.0
    """Nucleus sampling: keep the smallest set of tokens whose probability reaches top_p."""
    max_new_tokens: int = 128
    """Hard cap on generated tokens (finish reason "length")."""
    stop: tuple[str, ...] = ()
    """Stop strings: generation ends after the token that completes one of them."""


@dataclass
class GenerationRequest:
    """One prompt to complete; `seed` fixes its random stream (independent of batching)."""

    request_id: str
    prompt_ids: list[int]
    sampling: SamplingParams
    seed: int


@dataclass
class Completion:
    """A finished request: generated tokens with their log-probs and policy versions."""

    request_id: str
    prompt_ids: list[int]
    token_ids: list[int]
    logprobs: list[float]
    versions: list[int]  # policy version that produced each token
    finish_reason: (
        str  # "eos" | "stop" | "length" | "abort" | "error" (vLLM: the request was aborted or failed)
    )


class Engine(ABC):
    """A continuous-batching generator with a policy version (see the module docstring)."""

    version: int = 0  # current policy version

    @abstractmethod
    def submit(self, request: GenerationRequest) -> None:
        """Queue a request; it is admitted on a later `step`."""

    @abstractmethod
    def step(self) -> list[Completion]:
        """Admit waiting requests into free slots (prefill), decode ONE token for every active
        slot, and return the requests that finished on this step."""

    @abstractmethod
    def has_work(self) -> bool:
        """True while any request is waiting or active."""

    def generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        """Convenience for evals and tests: submit all, step until done, return in request order.

        Must not be mixed with concurrent `submit`/`step` users: completions of requests not in
        `requests` would be lost, so it refuses to start while other work is in flight.
        """
        if self.has_work():
            raise RuntimeError("generate() needs an idle engine; other requests are in flight")
        if len({r.request_id for r in requests}) != len(requests):
            raise ValueError("generate(): request ids must be unique")
        for request in requests:
            self.submit(request)
        done: dict[str, Completion] = {}
        while self.has_work():
            for completion in self.step():
                done[completion.request_id] = completion
        return [done[r.request_id] for r in requests]

    @abstractmethod
    def update_weights(self, state_dict: Mapping[str, Tensor], version: int) -> None:
        """Load new policy weights; thread-safe against `step()` and effective between decode
        steps. Tokens already sampled keep their version."""

    def sleep(self) -> None:
        """Give back the accelerator memory the engine holds (its weights and KV cache) while
        the learner trains beside it; only with nothing in flight (sync mode, between batches).
        The default keeps everything: an engine without a sleep mode."""
        return None

    def wake_up(self) -> None:
        """Take back what `sleep` gave, before the next weight update and generation."""
        return None

    @abstractmethod
    def stats(self) -> dict[str, float]:
        """Throughput counters: tokens_generated, step_seconds, tokens_per_s, mean_active_slots."""

    @abstractmethod
    def close(self) -> None:
        """Release the model, caches and any worker the engine started."""

    def provenance(self) -> dict:
        """What a run's env.json records of the engine (vLLM adds its version, dtypes, options)."""
        return {"engine": type(self).__name__}


def check_request(request: GenerationRequest) -> None:
    """Reject a request no engine can serve (empty prompt, temperature < 0, top_p outside
    (0, 1]); engines call it in `submit`, so a bad request fails its caller, not the engine's
    thread or process."""
    s = request.sampling
    if not request.prompt_ids:
        raise ValueError(f"request {request.request_id}: empty prompt (add the bos token)")
    if s.temperature < 0 or not 0 < s.top_p <= 1:
        raise ValueError(f"request {request.request_id}: need temperature >= 0 and 0 < top_p <= 1, got {s}")


def throughput_stats(counters: Mapping[str, float]) -> dict[str, float]:
    """The shared part of every engine's `stats()`, from its counters (tokens, seconds,
    active slot-steps, steps)."""
    return {
        "tokens_generated": float(counters["tokens"]),
        "step_seconds": counters["seconds"],
        "tokens_per_s": counters["tokens"] / counters["seconds"] if counters["seconds"] > 0 else 0.0,
        "mean_active_slots": counters["active"] / counters["steps"] if counters["steps"] else 0.0,
        "steps": float(counters["steps"]),
    }
