"""`bench pretrain`: the supervised warm-start that makes the tiny model's base checkpoint.

The tiny model starts from random weights, so RL alone would never see a reward. Each task
supplies demonstrations (for `arith`, deliberately noisy ones, so the cloned model is right
only part of the time and RL has headroom). The checkpoint is cached per (task, task args,
seed, recipe version) in the user cache dir and made automatically on the first `bench run`.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import math
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import torch

RECIPE_VERSION = 2  # bump when the recipe (model shape, data, optimiser) changes
PRECISIONS = ("fp32", "bf16")  # of the forward passes; see `pretrain`


def cache_root() -> Path:
    """Where base checkpoints live (BENCH_CACHE_DIR overrides the user cache dir)."""
    if os.environ.get("BENCH_CACHE_DIR"):
        return Path(os.environ["BENCH_CACHE_DIR"])
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("rl-bench"))


def base_checkpoint_path(task: str, task_args: dict[str, Any] | None = None, seed: int = 0) -> Path:
    """The cache path of a task's tiny base checkpoint. The key holds the task's own recipe
    (`pretrain_steps`, `pretrain_batch_size`) and every constructor argument, defaults
    included, so changing a recipe, an argument or a default makes a new base, and spelling
    out a default selects the same base as leaving it unset; arguments that only change
    episodes (`Task.episode_only_args`) are left out."""
    from envs.registry import get_task_class

    cls = get_task_class(task)
    skip = set(cls.episode_only_args)
    args = {k: v for k, v in {**_constructor_defaults(cls), **(task_args or {})}.items() if k not in skip}
    recipe = {"steps": cls.pretrain_steps, "batch_size": cls.pretrain_batch_size}
    key = json.dumps(
        {"task": task, "args": args, "seed": seed, "v": RECIPE_VERSION, "recipe": recipe}, sort_keys=True
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return cache_root() / "tiny" / f"{task}-v{RECIPE_VERSION}-s{seed}-{digest}"


def _constructor_defaults(cls: type) -> dict[str, Any]:
    """The default value of every keyword parameter of `cls.__init__` that has one."""
    params = inspect.signature(cls.__init__).parameters.values()
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


def ensure_base_checkpoint(
    task: str, task_args: dict[str, Any] | None = None, seed: int = 0, progress: bool = True
) -> Path:
    """The base checkpoint for `task`, pretraining it first if it is not cached yet (with a
    progress bar unless `progress` is False)."""
    path = base_checkpoint_path(task, task_args, seed)
    if (path / "config.json").exists():
        return path
    from bench.errors import UsageError
    from envs.registry import get_task

    try:  # before announcing anything: a task without demonstrations has no tiny base model
        get_task(task, **(task_args or {})).demonstrations(random.Random(0), 1)
    except NotImplementedError as exc:
        raise UsageError(f"--model tiny cannot be used with task {task!r}: {exc}") from None
    print(f"bench: no tiny base checkpoint for task {task!r} yet; pretraining it (one-off, cached in {path})")
    pretrain(task, task_args or {}, seed=seed, out=path, progress=progress)
    return path


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
    `steps` and `batch_size` default to the task's recipe (`Task.pretrain_steps`,
    `Task.pretrain_batch_size`).

    precision "bf16" (not a task recipe: see README) runs every forward under bfloat16 autocast
    with HF's eager attention; weights, gradients, AdamW and the loss stay float32. On CPUs with
    bfloat16 matrix instructions the matmuls run ~2.5x faster; eager attention, because the CPU
    flash-attention kernel's bfloat16 backward is slower than its float32 one. The saved model
    is float32, with the tiny model's default attention."""
    from bench.chat import render_transcript
    from bench.models import new_tiny_model
    from bench.seeding import seed_everything
    from envs.registry import get_task

    seed_everything(seed)
    task = get_task(task_name, **task_args)
    steps = steps or task.pretrain_steps
    batch_size = batch_size or task.pretrain_batch_size
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
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 100) * 0.5 * (1 + math.cos(math.pi * s / steps))
    )
    model.train()
    start, losses = time.perf_counter(), []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, desc=f"pretrain {task_name}", unit="step", dynamic_ncols=True)
    buckets = _length_buckets(examples)
    for _ in range(steps):
        batch = _sample_batch(examples, buckets, batch_size, rng)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = _lm_loss(model, batch, tokenizer.pad_token_id)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if bar is not None:
            bar.set_postfix(loss=f"{sum(losses[-50:]) / len(losses[-50:]):.3f}", refresh=False)
            bar.update(1)
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
        tmp = Path(str(out) + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "pretrain.json").write_text(json.dumps(info, indent=2))
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    return info


Example = tuple[list[int], list[int], list[int]]
"""(prompt ids, response ids, action mask) from `bench.chat.render_transcript`."""


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


def add_pretrain_arguments(p: argparse.ArgumentParser) -> None:
    """Options of `bench pretrain`."""
    p.add_argument("--task", default="arith", help="task whose demonstrations to clone (default: arith)")
    p.add_argument("--seed", type=int, default=0, help="seed of model init and data order (default: 0)")
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="optimizer steps (default: the task's recipe, e.g. 1000 for arith, ~5 min on 2 idle "
        "cores; a non-default value needs --out, since the cache holds the default recipe)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="transcripts per optimizer step (default: the task's recipe, 64 for arith; a non-default "
        "value needs --out)",
    )
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="fp32",
        help="fp32 (the recipes'), or bf16: forward passes under bfloat16 autocast, weights, optimizer "
        "and loss in float32; ~1.5x faster on CPUs with bfloat16 instructions, but arith's bf16 base "
        "gained less from RL (README); a non-default value needs --out (default: fp32)",
    )
    p.add_argument("--out", default=None, help="write the checkpoint here instead of the cache")
    p.add_argument("--force", action="store_true", help="rebuild even if the cached checkpoint exists")


def pretrain_from_cli(args: argparse.Namespace) -> int:
    """Handler of `bench pretrain`."""
    from bench.errors import UsageError
    from envs.registry import get_task_class

    task_class = get_task_class(args.task)
    recipe = {
        "--steps": (args.steps, task_class.pretrain_steps),
        "--batch-size": (args.batch_size, task_class.pretrain_batch_size),
        "--precision": (args.precision, "fp32"),
    }
    for flag, (value, default) in recipe.items():
        if isinstance(value, int) and value < 1:
            raise UsageError(f"{flag} must be >= 1, got {value}")
        if value not in (None, default) and not args.out:
            raise UsageError(
                f"{flag} other than the {args.task} recipe's {default} needs --out DIR (the cache holds the default)"
            )
    out = Path(args.out) if args.out else base_checkpoint_path(args.task, {}, args.seed)
    if (out / "config.json").exists() and not args.force:
        print(f"base checkpoint already exists: {out} (use --force to rebuild)")
        return 0
    info = pretrain(
        args.task,
        {},
        seed=args.seed,
        out=out,
        steps=args.steps,
        batch_size=args.batch_size,
        precision=args.precision,
    )
    print(json.dumps({**info, "path": str(out)}, indent=2))
    return 0
