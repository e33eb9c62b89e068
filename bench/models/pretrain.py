"""The supervised warm-start that makes the tiny model's base checkpoint (`bench pretrain`).

The tiny model starts from random weights, so RL alone would never see a reward. Each task
supplies demonstrations (for `arith`, deliberately noisy ones, so the cloned model is right
only part of the time and RL has headroom). `bench.models.cache` decides where the result is
cached and calls `pretrain` on first use.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from bench.models.recipes import PRECISIONS, RECIPE_VERSION, recipe_for


def pretrain(
    task_name: str,
    task_args: dict[str, Any],
    seed: int = 0,
    out: Path | None = None,
    steps: int | None = None,
    batch_size: int | None = None,
    precision: str = "fp32",
    lr: float = 3e-3,
    n_examples: int = 40000,
    progress: bool = True,
) -> dict[str, Any]:
    """Train a fresh tiny model on the task's demonstrations; save it to `out` atomically.
    `steps` and `batch_size` default to the task's tiny-model recipe (`bench.models.recipes`).

    precision "bf16" (not a task recipe: see REPRODUCE.md) runs every forward under bfloat16
    autocast with HF's eager attention; weights, gradients, AdamW and the loss stay float32. It
    pays on CPUs with bfloat16 matrix instructions; eager attention, because the CPU
    flash-attention kernel's bfloat16 backward is slower than its float32 one. The saved model
    is float32, with the tiny model's default attention."""
    from bench.models.chat import render_transcript
    from bench.models.tiny import new_tiny_model
    from bench.seeding import seed_everything
    from envs import registry as task_registry

    seed_everything(seed)
    task = task_registry.make(task_name, **task_args)
    steps = steps or recipe_for(task_name).pretrain_steps
    batch_size = batch_size or recipe_for(task_name).pretrain_batch_size
    if precision not in PRECISIONS:
        raise ValueError(f"pretrain precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    model, tokenizer = new_tiny_model(seed)
    default_attention = model.config._attn_implementation
    if precision == "bf16":
        model.set_attn_implementation("eager")
    rng = random.Random(seed)
    try:
        demonstrations = task.demonstrations(rng, n_examples)
    except NotImplementedError as exc:
        from bench.errors import UsageError

        raise UsageError(f"cannot pretrain a tiny model for task {task_name!r}: {exc}") from None
    examples = [render_transcript(tokenizer, t) for t in demonstrations]
    start = time.perf_counter()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, desc=f"pretrain {task_name}", unit="step", dynamic_ncols=True)
    try:
        losses = _fit(model, examples, tokenizer.pad_token_id, steps, batch_size, lr, precision, rng, bar)
    finally:
        if bar is not None:
            bar.close()
    model.set_attn_implementation(default_attention)
    info = {
        "task": task_name,
        "task_args": task_args,
        "seed": seed,
        "steps": steps,
        "batch_size": batch_size,
        "precision": precision,
        "lr": lr,
        "final_loss": sum(losses[-50:]) / max(len(losses[-50:]), 1),
        "seconds": time.perf_counter() - start,
        "recipe_version": RECIPE_VERSION,
    }
    if out is not None:
        _save_atomically(out, model, tokenizer, info)
    return info


def _fit(
    model,
    examples,
    pad_id: int,
    steps: int,
    batch_size: int,
    lr: float,
    precision: str,
    rng: random.Random,
    bar,
) -> list[float]:
    """`steps` AdamW steps (warmup then cosine decay) on length-bucketed batches of `examples`;
    the loss of every step."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 100) * 0.5 * (1 + math.cos(math.pi * s / steps))
    )
    model.train()
    losses: list[float] = []
    buckets = _length_buckets(examples)
    for _ in range(steps):
        batch = _sample_batch(examples, buckets, batch_size, rng)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = _lm_loss(model, batch, pad_id)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if bar is not None:
            bar.set_postfix(loss=f"{sum(losses[-50:]) / len(losses[-50:]):.3f}", refresh=False)
            bar.update(1)
    return losses


def _save_atomically(out: Path, model, tokenizer, info: dict[str, Any]) -> None:
    """Model, tokenizer and `pretrain.json` into `out`, through a temporary directory and a rename."""
    tmp = Path(str(out) + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "pretrain.json").write_text(json.dumps(info, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


Example = tuple[list[int], list[int], list[int]]
"""(prompt ids, response ids, action mask) from `bench.models.chat.render_transcript`."""


def _bucket_of(example: Example, width: int = 16) -> int:
    """The length bucket of an example: its total length in steps of `width` tokens."""
    return (len(example[0]) + len(example[1])) // width


def _length_buckets(examples: list[Example]) -> dict[int, list[int]]:
    """Example indices grouped by `_bucket_of`."""
    buckets: dict[int, list[int]] = {}
    for i, example in enumerate(examples):
        buckets.setdefault(_bucket_of(example), []).append(i)
    return buckets


def _sample_batch(examples, buckets: dict[int, list[int]], batch_size: int, rng: random.Random):
    """A batch of examples of similar length: pick an example uniformly, then fill the batch
    from its length bucket. Each example is still drawn with equal probability on average,
    but a batch is padded to ~its own length instead of the longest problem's, which halves
    the cost on arith's heavy-tailed lengths."""
    bucket = buckets[_bucket_of(examples[rng.randrange(len(examples))])]
    return [examples[bucket[rng.randrange(len(bucket))]] for _ in range(batch_size)]


def _lm_loss(model: torch.nn.Module, batch: list[Example], pad_id: int) -> torch.Tensor:
    """Next-token loss on the model's own turns only (prompt and observations are context)."""
    seqs = [p + r for p, r, _ in batch]
    L = max(len(s) for s in seqs)
    ids_B_L = torch.full((len(seqs), L), pad_id, dtype=torch.long)
    labels_B_L = torch.full((len(seqs), L), -100, dtype=torch.long)
    for i, (p, r, m) in enumerate(batch):
        ids_B_L[i, : len(p) + len(r)] = torch.tensor(p + r)
        labels_B_L[i, len(p) : len(p) + len(r)] = torch.tensor(
            [t if keep else -100 for t, keep in zip(r, m, strict=True)]
        )
    mask_B_L = torch.arange(L)[None, :] < torch.tensor([len(s) for s in seqs])[:, None]
    logits = model(input_ids=ids_B_L, attention_mask=mask_B_L.long()).logits[:, :-1].float()  # [B, L-1, V]
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels_B_L[:, 1:].reshape(-1)
    )
