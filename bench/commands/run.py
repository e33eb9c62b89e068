"""`bench run`: parse options into a RunConfig, start or resume the run, train."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from bench.commands import add_field_options, add_plugin_option, field_options, load_plugins
from bench.config import RunConfig, RunParts, build_run
from bench.config_values import load_config_file, parse_set_options
from bench.errors import UsageError
from bench.launcher import is_launched


def register(sub) -> None:
    """Add `bench run` to the subcommands."""
    p = sub.add_parser("run", help="train an algorithm on a task; writes a run directory")
    add_arguments(p)
    add_plugin_option(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of `bench run`: one flag per run config field that has one (`add_field_options`,
    so help and defaults are the field's own), `--set` for every other field, and the run dir."""
    fields = "\n".join(f"  {f.name:<22} {f.metadata.get('help', '')}" for f in dataclasses.fields(RunConfig))
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = f"config fields (set with --set FIELD=VALUE or in --config FILE.toml|FILE.yaml):\n{fields}"
    add_field_options(p, RunConfig)
    p.add_argument("--out", help="run directory to create (default: runs/<algo>-<task>-s<seed>-<time>)")
    p.add_argument(
        "--config",
        metavar="FILE.toml|FILE.yaml|FILE.json",
        help="config fields from a TOML file ([algo] and [task] tables for algorithm fields and task "
        "arguments), a YAML one (algo: and task: mappings) or a JSON one (e.g. another run's config.json, to repeat its settings; or a list of "
        "layers, lowest first, as comparison and sweep workers write)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any config field, e.g. --set trajectories_per_step=64 --set algo.dis_eps_high=4.0 "
        "--set task.demo_error_rate=0.2; repeatable; wins over --config and flags",
    )
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue RUN_DIR from its newest intact checkpoint (config from RUN_DIR; --steps, "
        "--checkpoint-every, --eval-every and --set max_minutes/keep_checkpoints may extend it, any other "
        "changed setting is refused)",
    )
    p.add_argument(
        "--cluster",
        choices=("local", "ray"),
        default="local",
        help="where the run's learner ranks and rollout servers go: this node (local, default) or a Ray "
        "cluster's nodes (ray: one placement group, the learner resumed when its actor is lost; "
        "docs/cluster.md); RAY_ADDRESS alone does not choose it, so a comparison's runs never re-place",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDR",
        default="",
        help="with --cluster ray: the head's HOST:PORT (default: RAY_ADDRESS, else a cluster started here)",
    )
    p.add_argument(
        "--learner-nodes",
        type=int,
        default=1,
        metavar="N",
        help="with --cluster ray: spread the learner ranks over N nodes, learner_ranks / N on each (default 1)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar (e.g. in logs)")
    p.add_argument(
        "--json",
        action="store_true",
        help="end with one JSON line (run_dir, steps, wall_s, last reward) instead of the summary table",
    )


def override_layers(args: argparse.Namespace) -> list[dict]:
    """The config layers the command line gives, lowest first: --config, flags, --set."""
    file_layers = load_config_file(args.config) if args.config else []
    return [*file_layers, field_options(args, RunConfig), parse_set_options(args.set)]


def parts_from_args(args: argparse.Namespace) -> RunParts:
    """The run of a new run (config, algorithm, task): field defaults < --config < flags < --set."""
    return build_run(*override_layers(args))


def _placed_resume(args: argparse.Namespace) -> Any:
    """The config a resume of `args.resume` places its processes by (`bench.placement`): the
    run's config.json under this command line's overrides, without the URLs of the servers the
    run had (a placing resume starts new ones)."""
    from bench.config import build_config
    from bench.train.start import load_recorded_plugin
    from results.rundir import RunDir

    run = RunDir(args.resume)
    if not (run.path / "config.json").exists():
        raise UsageError(f"--resume {run.path}: not a run directory (no config.json)")
    saved = run.read_config()
    load_recorded_plugin(run, saved)
    if not saved.get("rollout_servers"):
        return build_config(saved, *override_layers(args))
    return build_config(saved, *override_layers(args), {"rollout_urls": ""})


def _env_workers_need_ray(config: Any) -> None:
    """env_workers are Ray actors: a run not placed on Ray is refused before anything starts
    (a rank that the Ray placer launched has them; `on_env_workers` checks it there)."""
    from bench.rollout.remote_env import refuse_off_ray

    if not is_launched():
        refuse_off_ray(config.env_workers)


def _run_on_ray(args: argparse.Namespace) -> int:
    """`bench run --cluster ray` (`bench.ray_placement`): every part checked to fit on a node of
    the cluster (one line, exit 2) before anything is placed."""
    from bench.ray_placement import check_learner_nodes, place_on_ray
    from bench.train.start import check_out_dir, default_run_dir
    from sweeps.ray_cluster import Asks, RayCluster

    if args.resume and args.out:
        raise UsageError("--resume continues the run in its own directory; drop --out")
    config = _placed_resume(args) if args.resume else parts_from_args(args).config
    out = Path(args.resume) if args.resume else check_out_dir(args.out or default_run_dir(config))
    check_learner_nodes(config.learner_ranks, args.learner_nodes)
    cluster = RayCluster.connect(args.ray_address, log_to_driver=True)
    gpus = cluster.has_gpus()
    learner = Asks(1, config.learner_ranks // args.learner_nodes if gpus else 0)
    server = Asks(1, config.rollout_tp if gpus else 0)
    cluster.check_fits(
        {
            "the learner": learner,
            **({"a rollout server": server} if config.rollout_servers else {}),
            **({"an env worker": Asks(1, 0)} if config.env_workers else {}),
        }
    )
    print(cluster.describe(), file=sys.stderr, flush=True)
    fresh = not args.resume
    return place_on_ray(cluster.ray, args.argv, config, out, fresh, gpus, args.learner_nodes)


def run(args: argparse.Namespace) -> int:
    """Handler of `bench run`."""
    from bench.placement import launch, places_processes
    from bench.train.distributed import current_dist
    from bench.train.start import (
        check_out_dir,
        default_run_dir,
        discard_if_never_trained,
        resume_run,
        start_run,
    )
    from results.rundir import stop_with_launcher
    from sweeps.launch import visible_gpus

    load_plugins(args)
    if is_launched():
        stop_with_launcher()  # a rank outlives no launcher of bench's (results.rundir)
    if args.cluster == "ray" and not is_launched():  # a launched rank trains; its placer chose the nodes
        return _run_on_ray(args)
    if args.learner_nodes != 1 and not is_launched():
        raise UsageError(
            "--learner-nodes places learner ranks on several nodes of a Ray cluster; add --cluster ray"
        )
    if args.resume:
        if args.out:
            raise UsageError("--resume continues the run in its own directory; drop --out")
        placed = _placed_resume(args)
        _env_workers_need_ray(placed)
        if places_processes(placed):
            return launch(args.argv, placed, None, visible_gpus())
        run_dir, parts, checkpoint = resume_run(args.resume, *override_layers(args))
    else:
        parts = parts_from_args(args)
        _env_workers_need_ray(parts.config)
        if places_processes(parts.config):  # ranks and servers of its own: this process only places them
            out = check_out_dir(args.out or default_run_dir(parts.config))
            return launch(args.argv, parts.config, out, visible_gpus())
        run_dir, checkpoint = start_run(parts, args.out, progress=not args.no_progress), None
    from bench.train.loop import train

    config = parts.config
    try:
        summary = train(parts, run_dir, resume=checkpoint, progress=not args.no_progress)
    except BaseException:
        # a start that failed before its first step leaves nothing that would block its --out
        if not args.resume and current_dist().is_main and discard_if_never_trained(run_dir):
            print(f"bench: removed {run_dir.path}: the run failed before its first step", file=sys.stderr)
        raise
    if not current_dist().is_main:
        return 0
    final = summary.get("final", {})
    if args.json:
        print(
            json.dumps(
                {
                    "run_dir": str(Path(run_dir.path)),
                    "steps": summary["steps"],
                    "wall_s": round(summary["wall_s"], 1),
                    "reward/mean(last step)": final.get("reward/mean"),
                }
            )
        )
    else:
        _print_end_of_run(config, run_dir, summary)
    return 0


def _print_end_of_run(config: RunConfig, run_dir, summary: dict) -> None:
    """The end-of-run table and the next commands (`results.run_end`)."""
    from benchmarks import registry as bench_registry
    from results.run_end import format_end_of_run

    benches = [b.strip() for b in config.eval_bench.split(",") if b.strip()]
    own = bench_registry.task_benchmark_name(config.task, config.task_args)
    if not benches and own:
        benches = [own]
    print(format_end_of_run(str(run_dir.path), summary, run_dir.read_metrics(), config.to_dict(), benches))
