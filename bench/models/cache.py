"""The tiny model's base checkpoints: shipped with the project, cached, or made on first use.

A base checkpoint is keyed by (task, task args, seed, recipe) (`base_checkpoint_path`). The
project ships one per task with default arguments and seed 0 (`bench/models/bases/<task>/`,
each with a manifest: its key, the command that made it, its held-out score); it is used while
its key matches the current recipe's, so a changed recipe falls back to pretraining (and a
test names the command that regenerates the shipped one: `python scripts/ship_base.py TASK`).
Anything else is cached in the user cache dir (`BENCH_CACHE_DIR` overrides it), made by
`bench.models.pretrain.pretrain` the first time a run or an evaluation asks for it.
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
    (`bench.models.recipes`: pretrain steps and batch size), the version of its demonstrations
    (`Task.demonstrations_version`) and every constructor argument, defaults
    included, so changing a recipe, the demonstrations, an argument or a default makes a new base, and spelling
    out a default selects the same base as leaving it unset; arguments that only change
    episodes (`Task.episode_only_args`) are left out, and so is an argument of
    `Task.keyed_when_set` at its default."""
    from envs import registry as task_registry

    cls = task_registry.get(task)
    defaults = _constructor_defaults(cls)
    args = {
        k: v
        for k, v in {**defaults, **(task_args or {})}.items()
        if k not in cls.episode_only_args and not (k in cls.keyed_when_set and v == defaults[k])
    }
    tiny = recipe_for(task)
    recipe = {"steps": tiny.pretrain_steps, "batch_size": tiny.pretrain_batch_size}
    fields = {"task": task, "args": args, "seed": seed, "v": RECIPE_VERSION, "recipe": recipe}
    if cls.demonstrations_version > 1:  # version 1 predates the field: its bases keep their keys
        fields["demos"] = cls.demonstrations_version
    key = json.dumps(fields, sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return cache_root() / "tiny" / f"{task}-v{RECIPE_VERSION}-s{seed}-{digest}"


def _constructor_defaults(cls: type) -> dict[str, Any]:
    """The default value of every keyword parameter of `cls.__init__` that has one."""
    params = inspect.signature(cls.__init__).parameters.values()
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


SHIPPED_DIR = Path(__file__).with_name("bases")
"""bench/models/bases/<task>/: the shipped base checkpoints (package data)."""
SHIPPED_MANIFEST = "manifest.json"


def shipped_base(task: str, task_args: dict[str, Any] | None = None, seed: int = 0) -> Path | None:
    """The shipped base checkpoint of `task` when its recipe key is the current one for these
    arguments and seed (None otherwise: another recipe, arguments or seed, or none shipped)."""
    manifest = SHIPPED_DIR / task / SHIPPED_MANIFEST
    if not manifest.exists():
        return None
    key = json.loads(manifest.read_text()).get("key")
    return manifest.parent if key == base_checkpoint_path(task, task_args, seed).name else None


def existing_base(task: str, task_args: dict[str, Any] | None = None, seed: int = 0) -> Path | None:
    """The base checkpoint a run of `task` starts from when it exists: the shipped one (same
    recipe key), else the cached one; None when neither does (yet)."""
    shipped = shipped_base(task, task_args, seed)
    if shipped is not None:
        return shipped
    path = base_checkpoint_path(task, task_args, seed)
    return path if (path / "config.json").exists() else None


def ensure_base_checkpoint(
    task: str, task_args: dict[str, Any] | None = None, seed: int = 0, progress: bool = True
) -> Path:
    """The base checkpoint for `task`: the shipped one when its recipe key matches, else the
    cached one, pretraining it first if there is none (with a progress bar unless `progress`
    is False)."""
    existing = existing_base(task, task_args, seed)
    if existing is not None:
        return existing
    path = base_checkpoint_path(task, task_args, seed)
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
