"""The tiny model's base checkpoints: where they are cached, and making one on first use.

A base checkpoint is cached per (task, task args, seed, recipe) in the user cache dir
(`BENCH_CACHE_DIR` overrides it) and made by `bench.models.pretrain.pretrain` the first time a
run or an evaluation asks for it.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import random
from pathlib import Path
from typing import Any

from bench.models.paths import cache_root
from bench.models.recipes import RECIPE_VERSION, recipe_for


def base_checkpoint_path(task: str, task_args: dict[str, Any] | None = None, seed: int = 0) -> Path:
    """The cache path of a task's tiny base checkpoint. The key holds the task's tiny-model recipe
    (`bench.models.recipes`: pretrain steps and batch size) and every constructor argument, defaults
    included, so changing a recipe, an argument or a default makes a new base, and spelling
    out a default selects the same base as leaving it unset; arguments that only change
    episodes (`Task.episode_only_args`) are left out."""
    from envs import registry as task_registry

    cls = task_registry.get(task)
    skip = set(cls.episode_only_args)
    args = {k: v for k, v in {**_constructor_defaults(cls), **(task_args or {})}.items() if k not in skip}
    tiny = recipe_for(task)
    recipe = {"steps": tiny.pretrain_steps, "batch_size": tiny.pretrain_batch_size}
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
    from envs import registry as task_registry

    try:  # before announcing anything: a task without demonstrations has no tiny base model
        task_registry.make(task, **(task_args or {})).demonstrations(random.Random(0), 1)
    except NotImplementedError as exc:
        raise UsageError(f"--model tiny cannot be used with task {task!r}: {exc}") from None
    print(f"bench: no tiny base checkpoint for task {task!r} yet; pretraining it (one-off, cached in {path})")
    from bench.models.pretrain import pretrain

    pretrain(task, task_args or {}, seed=seed, out=path, progress=progress)
    return path
