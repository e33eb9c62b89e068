"""`bench pretrain`: build the tiny model's base checkpoint for a task (`bench.models.pretrain`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.errors import UsageError
from bench.models.recipes import PRECISIONS, recipe_for


def register(sub) -> None:
    """Add `bench pretrain` to the subcommands."""
    p = sub.add_parser("pretrain", help="supervised warm-start of the tiny model on a task (base checkpoint)")
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of `bench pretrain`."""
    p.add_argument("--task", default="arith", help="task whose demonstrations to clone (default: arith)")
    p.add_argument("--seed", type=int, default=0, help="seed of model init and data order (default: 0)")
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="optimizer steps (default: the task's recipe, e.g. 1000 for arith; a non-default value "
        "needs --out, since the cache holds the default recipe)",
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
        "and loss in float32; faster on CPUs with bfloat16 instructions, but arith's bf16 base "
        "gained less from RL (REPRODUCE.md); a non-default value needs --out (default: fp32)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="task.KEY=VALUE",
        help="a task argument, as for bench run (e.g. --set task.dataset=PATH for --task math); repeatable",
    )
    p.add_argument("--out", default=None, help="write the checkpoint here instead of the cache")
    p.add_argument("--force", action="store_true", help="rebuild even if the cached checkpoint exists")


def run(args: argparse.Namespace) -> int:
    """Handler of `bench pretrain`."""
    from envs import registry as task_registry

    task_registry.check(args.task)
    task_args = _task_args(args.task, args.set)
    tiny = recipe_for(args.task)
    recipe = {
        "--steps": (args.steps, tiny.pretrain_steps),
        "--batch-size": (args.batch_size, tiny.pretrain_batch_size),
        "--precision": (args.precision, "fp32"),
    }
    for flag, (value, default) in recipe.items():
        if isinstance(value, int) and value < 1:
            raise UsageError(f"{flag} must be >= 1, got {value}")
        if value not in (None, default) and not args.out:
            raise UsageError(
                f"{flag} other than the {args.task} recipe's {default} needs --out DIR (the cache holds the default)"
            )
    from bench.models.cache import base_checkpoint_path

    out = Path(args.out) if args.out else base_checkpoint_path(args.task, task_args, args.seed)
    if (out / "config.json").exists() and not args.force:
        print(f"base checkpoint already exists: {out} (use --force to rebuild)")
        return 0
    from bench.models.pretrain import pretrain

    info = pretrain(
        args.task,
        task_args,
        seed=args.seed,
        out=out,
        steps=args.steps,
        batch_size=args.batch_size,
        precision=args.precision,
    )
    print(json.dumps({**info, "path": str(out)}, indent=2))
    return 0


def _task_args(task: str, items: list[str]) -> dict:
    """The `--set task.KEY=VALUE` options as the task's constructor arguments, checked by
    building the task once (a bad key or value is a one-line UsageError before any training)."""
    from bench.config_values import coerce_task_args, parse_set_options
    from envs import registry as task_registry

    layer = parse_set_options(items)
    other = sorted(k for k in layer if k != "task_args")
    if other:
        raise UsageError(f"bench pretrain --set takes only task.KEY=VALUE, got {other[0]!r}")
    task_args = coerce_task_args(task, layer.get("task_args", {}))
    try:
        task_registry.make(task, **task_args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return task_args
