"""The vLLM server routes and JSON bodies the HTTP engine speaks, in one place (client and CPU
double both build and read them here).

Checked against vLLM 0.34's source (`tests/unit/bench/test_vllm_routes.py` re-reads it when
/tmp/vllm-src or an installed vllm is there):
- `vllm/entrypoints/scale_out/token_in_token_out/`: `POST /inference/v1/generate`, body
  `GenerateRequest` {request_id, token_ids, sampling_params}; non-streaming answer
  `GenerateTokensResponse` {request_id, choices: [{index, finish_reason, token_ids,
  logprobs: {content: [{token_id, logprob}]}, weight_versions: [{version, start, end}]}]}.
- `vllm/entrypoints/rl/online/api_router.py` (served with `VLLM_SERVER_DEV_MODE=1`):
  `POST /pause?mode=abort|wait|keep` -> {status: "paused"}; `POST /resume` -> {status: "resumed"};
  `GET /is_paused` -> {is_paused}; `POST /init_weight_transfer_engine` {init_info};
  `POST /start_weight_update`; `POST /update_weights` {update_info};
  `POST /finish_weight_update` {weight_version}; `GET /weight_info` -> {weight_version};
  `POST /shutdown_weight_transfer_engine`. `GET /health` (serve/instrumentator/health.py).
- `vllm/sampling_params.py` `SamplingParams`: temperature, top_p, max_tokens, seed, stop,
  include_stop_str_in_output, logprobs (0: the sampled token's only).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from bench.engines.base import GenerationRequest


class Route(StrEnum):
    """Paths of the vLLM server routes the engine uses."""

    GENERATE = "/inference/v1/generate"
    PAUSE = "/pause"
    RESUME = "/resume"
    IS_PAUSED = "/is_paused"
    INIT_WEIGHT_TRANSFER = "/init_weight_transfer_engine"
    START_WEIGHT_UPDATE = "/start_weight_update"
    UPDATE_WEIGHTS = "/update_weights"
    FINISH_WEIGHT_UPDATE = "/finish_weight_update"
    WEIGHT_INFO = "/weight_info"
    SHUTDOWN_WEIGHT_TRANSFER = "/shutdown_weight_transfer_engine"
    GET_WORLD_SIZE = "/get_world_size"  # the server's inference workers (the NCCL transfer group's size)
    HEALTH = "/health"


class PauseMode(StrEnum):
    """vLLM's `/pause` modes (`vllm.v1.engine.PauseMode`)."""

    ABORT = "abort"  # in-flight requests end now with finish_reason "abort" and their tokens so far
    WAIT = "wait"  # in-flight requests run to their end
    KEEP = "keep"  # in-flight requests freeze and continue after /resume


SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "stop",
    "include_stop_str_in_output",
    "logprobs",
)
"""The `SamplingParams` fields a generate body sets."""


def generate_body(
    request_id: str, token_ids: list[int], request: GenerationRequest, max_tokens: int, seed: int
) -> dict:
    """A `/inference/v1/generate` body: continue `token_ids` by at most `max_tokens` tokens with
    `request`'s sampling, recording the sampled token's log-prob."""
    s = request.sampling
    return {
        "request_id": request_id,
        "token_ids": token_ids,
        "sampling_params": {
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": max_tokens,
            "seed": seed,
            "stop": list(s.stop) or None,
            "include_stop_str_in_output": True,
            "logprobs": 0,
        },
    }


def generate_response(
    request_id: str, token_ids: list[int], logprobs: list[float], finish_reason: str, spans: list[dict]
) -> dict:
    """A non-streaming `GenerateTokensResponse` with one choice."""
    content = [{"token_id": t, "logprob": lp} for t, lp in zip(token_ids, logprobs, strict=True)]
    choice = {
        "index": 0,
        "finish_reason": finish_reason,
        "token_ids": token_ids,
        "logprobs": {"content": content},
        "weight_versions": spans,
    }
    return {"request_id": request_id, "output_mode": "tokens", "choices": [choice]}


def parse_choice(response: dict) -> tuple[list[int], list[float], list[str], str]:
    """(token ids, log-probs, weight version label of each token, finish reason) of a response's
    single choice; the labels come from its `weight_versions` spans, which must cover every token."""
    (choice,) = response["choices"]
    token_ids = list(choice["token_ids"] or [])
    logprobs = [float(entry["logprob"]) for entry in (choice.get("logprobs") or {}).get("content") or []]
    labels: list[Any] = [None] * len(token_ids)
    for span in choice.get("weight_versions") or []:
        labels[span["start"] : span["end"]] = [span["version"]] * (span["end"] - span["start"])
    if len(logprobs) != len(token_ids) or len(labels) != len(token_ids) or None in labels:
        raise ValueError(
            f"generate response {response.get('request_id')}: {len(token_ids)} tokens, {len(logprobs)} "
            "log-probs, weight_versions spans not covering every token (serve with logprobs and weight versions)"
        )
    return token_ids, logprobs, labels, str(choice["finish_reason"])


def version_spans(labels: list[str]) -> list[dict]:
    """`weight_versions` spans ({version, start, end}, end exclusive) of per-token labels."""
    spans: list[dict] = []
    for i, label in enumerate(labels):
        if spans and spans[-1]["version"] == label and spans[-1]["end"] == i:
            spans[-1]["end"] = i + 1
        else:
            spans.append({"version": label, "start": i, "end": i + 1})
    return spans
