"""`bench perf` section `kv_cache`: the torch engine's KV-cached runner against its full-forward
runner on a small random Qwen3 model (the architecture that had no cache before).

Both sides are `TorchEngine.generate` on the same prompts and seeds, exactly N new tokens each,
differing only in `kv_cache`; the model is built here from a Qwen3 config (no download) over the
tiny character tokenizer, so the section does not depend on `--model`.
"""

from __future__ import annotations

import copy
from typing import Any

from bench.perf import comparison, interleaved, timed
from bench.perf.model_sections import bench_prompts

QWEN3_SMALL = {
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 768,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": True,
}
"""The measured shape: Qwen3's layout (q/k norms, GQA) at ~3M parameters, CPU-sized."""


def _small_qwen3(tokenizer: Any) -> Any:
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    config = Qwen3Config(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, **QWEN3_SMALL)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return AutoModelForCausalLM.from_config(config).eval()


def kv_cache_section(repeats: int, quick: bool) -> dict[str, Any]:
    """Tokens/s of the cached runner vs the full-forward runner, same engine, prompts and seeds."""
    import torch

    from bench.engines.base import GenerationRequest, SamplingParams
    from bench.engines.torch_engine import TorchEngine
    from bench.models.tokenizer import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    model = _small_qwen3(tokenizer)
    B, N = (4, 16) if quick else (8, 128)
    prompts = bench_prompts(tokenizer, B)
    sampling = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=N)
    engines = {
        cached: TorchEngine(copy.deepcopy(model), tokenizer, max_batch_size=B, kv_cache=cached)
        for cached in (True, False)
    }
    for engine in engines.values():
        engine.eos_ids = set()  # eos is an ordinary token: every request runs to N tokens

    def run(cached: bool) -> float:
        requests = [GenerationRequest(f"r{i}", p, sampling, seed=i) for i, p in enumerate(prompts)]
        seconds, completions = timed(lambda: engines[cached].generate(requests))
        if any(len(c.token_ids) != N for c in completions):
            raise RuntimeError("kv_cache: a completion ended before max_new_tokens")
        return B * N / seconds

    runs_cached, runs_full = interleaved(lambda: run(True), lambda: run(False), repeats)
    return comparison(
        "tokens_per_s",
        runs_cached,
        runs_full,
        peer="TorchEngine(kv_cache=False): a full forward of every active sequence per token",
        ratio="ours / peer (tokens/s)",
        setup={
            "model": f"random Qwen3 {QWEN3_SMALL}, vocabulary {len(tokenizer)}",
            "parameters": sum(p.numel() for p in model.parameters()),
            "prompts": B,
            "new_tokens_per_prompt": N,
            "prompt_lengths": sorted({len(p) for p in prompts}),
            "engine_threads": engines[True].num_threads or torch.get_num_threads(),
        },
        notes=[
            "tokens/s = prompts x new tokens / wall seconds of one whole batch, prefill included",
            "the full forward's cost per token grows with the sequence, the cache's does not: the ratio "
            "grows with new_tokens_per_prompt",
        ],
    )
