"""`bench sweep`: tune algorithms with Optuna, every arm with the same number of trials and the
same budget, on a validation split; `bench sweep --show DIR` summarises a sweep.

Checked before anything runs: arms, objective, budget, the search space (`--space` names and
distributions), the storage. What the workers need from the runtime is resolved here, once,
and kept in sweep.json (`sweeps.sweep`): the run's default learning rates and each arm's search
space. The trials are the studies' queues (`sweeps.search`, `sweeps.queue`); `--workers`
processes here take them, or Ray tasks on a cluster with `--cluster ray` (`sweeps.scheduler`),
and running it again resumes the sweep.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from bench.commands import (
    add_field_options,
    checked_budget_and_shared,
    connect_cluster,
    field_options,
    launch_options,
    run_experiment,
    where_it_runs,
)
from bench.config import RunConfig
from bench.errors import UsageError
from results.files import read_json
from sweeps.launch import LaunchOptions
from sweeps.sweep import SweepSpec


def register(sub) -> None:
    """Add `bench sweep` to the subcommands."""
    p = sub.add_parser(
        "sweep", help="tune algorithms with Optuna (same trials and budget for each), or --show a sweep"
    )
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of `bench sweep`: one per field with a flag of the sweep's spec, the run config
    (`--mode`) and the launch options (`add_field_options`: help and defaults are the fields'
    own), and the command's own three."""
    p.add_argument("--algo", default=None, help="the algorithm to tune (or --algos for several)")
    p.add_argument("--preset", default=None, help="preset of --algo")
    add_field_options(p, SweepSpec)
    add_field_options(p, RunConfig, ("mode",))
    add_field_options(p, LaunchOptions)
    p.add_argument(
        "--show", default=None, metavar="SWEEP_DIR", help="summarise a sweep: best trials, importances, plots"
    )


def build_spec(args: argparse.Namespace) -> SweepSpec:
    """The sweep spec, its names, objective and settings checked (one-line errors)."""
    from benchmarks import registry as bench_registry
    from sweeps.spec import Arm, parse_arms, parse_seeds
    from sweeps.sweep import FINAL_REWARD, check_objective

    if bool(args.algo) == bool(args.arms):
        raise UsageError("give the algorithm to tune with --algo NAME, or several with --algos A,B")
    name = args.algo + (f":{args.preset}" if args.preset else "") if args.algo else ""
    arms = parse_arms(args.arms) if args.arms else [Arm(name, args.algo, args.preset)]
    budget, shared = checked_budget_and_shared(args, arms, "sweep")
    values = {**field_options(args, SweepSpec), "arms": tuple(arms), "budget": budget, "shared": shared}
    task = values.setdefault("task", "arith")
    own_val = bench_registry.task_validation_name(task, shared.get("task_args"))
    values.setdefault("objective", f"eval/{own_val}/avg_at_k" if own_val else FINAL_REWARD)
    check_objective(values["objective"], bench_registry.names() + ([own_val] if own_val else []))
    if args.seeds is not None:
        values["seeds"] = parse_seeds(args.seeds)
    values["space"] = _space_tables(args.space)
    spec = SweepSpec(**values)
    launch_options(args)
    for flag, value in (("--trials", spec.trials), ("--eval-k", spec.eval_k)):
        if value < 1:
            raise UsageError(f"{flag} must be >= 1, got {value}")
    if spec.pruner == "hyperband" and spec.objective != FINAL_REWARD and not spec.eval_every:
        raise UsageError(
            "--pruner hyperband on an evaluation objective needs its in-training curve: give --eval-every N"
        )
    return spec


def _space_tables(path: str | None) -> dict:
    """The `--space` file's tables (checked by parsing them)."""
    if path is None:
        return {}
    import tomllib

    from sweeps.spaces import load_space_file

    load_space_file(path)  # one-line errors for bad files and distributions
    return tomllib.loads(Path(path).read_text())["params"]


def resolve_spaces(spec: SweepSpec, defaults: dict) -> tuple[dict, dict[str, dict]]:
    """(every arm's search space, `sweeps.sweep.ArmSpace`; every arm's first trial, the paper's
    defaults), from its algorithm's effective config and the run's default rates. Every name in
    `--space` must be a config key of the arm, and the first trial must build a valid config."""
    import dataclasses

    from algorithms import registry
    from algorithms.fields import RunSettings
    from algorithms.renames import current_key
    from bench.config import build_config, build_run
    from bench.config_values import did_you_mean
    from sweeps.spaces import as_layer, paper_defaults, param_from_table, space_for
    from sweeps.sweep import ArmSpace

    spaces, firsts = {}, {}
    run_fields = sorted(f.name for f in dataclasses.fields(RunConfig))
    overrides = {name: param_from_table(name, table) for name, table in spec.space.items()}
    for arm in spec.arms:
        parts = build_run(*spec.config_layers(arm, spec.seeds[0], {}))
        algo_config = dataclasses.asdict(parts.algorithm.config)
        for given in spec.space:
            name = current_key(registry.get(arm.algo), given)  # an old field name: its current one
            section, dot, key = name.partition(".")
            valid = [f"algo.{k}" for k in algo_config] if dot else run_fields
            if (dot and (section != "algo" or key not in algo_config)) or (
                not dot and name not in run_fields
            ):
                raise UsageError(
                    f"--space: {name!r} is not a parameter of {arm.name}{did_you_mean(name, valid)}"
                )
        per_step = parts.config.trajectories_per_step
        run = {**defaults, "trajectories_per_step": per_step}
        inactive = parts.algorithm.inactive_fields(RunSettings(updates_per_batch=parts.config.minibatches))
        params, fixed = space_for(type(parts.algorithm), algo_config, run, overrides, inactive)
        spaces[arm.name] = ArmSpace(params, fixed, per_step)
        firsts[arm.name] = paper_defaults(params, algo_config, defaults)
        build_config(*spec.config_layers(arm, spec.seeds[0], as_layer({**fixed, **firsts[arm.name]})))
    return spaces, firsts


def run_defaults(spec: SweepSpec) -> dict[str, float]:
    """The learning rates a run of the sweep gets when none is set (the space's centres and
    the first trial's values): the run's own rule (`bench.train.setup.default_learning_rates`),
    the model's size counted before anything is loaded."""
    from bench.train.setup import default_learning_rates, model_parameters

    policy_lr, critic_lr = default_learning_rates(
        model_parameters(spec.shared.get("model", "tiny")), spec.task
    )
    return {"policy_lr": policy_lr, "critic_lr": critic_lr}


def run(args: argparse.Namespace) -> int:
    """Handler of `bench sweep`."""
    from sweeps.launcher import refuse_inside_launcher

    refuse_inside_launcher("sweep")  # first: under a launcher its trials would wait forever
    from sweeps.show import show
    from sweeps.spec import load_spec

    if args.show:
        load_spec(Path(args.show), SweepSpec)  # a one-line error for a directory that is not a sweep
        print(show(Path(args.show)))
        return 0
    spec = build_spec(args)
    launch = launch_options(args)
    out = Path(launch.out) if launch.out else Path("sweeps") / f"{spec.task}-{spec.fingerprint()[:8]}"
    saved_file = out / SweepSpec.SPEC_FILE
    saved = read_json(saved_file) if saved_file.exists() else {}
    defaults = saved.get("run_defaults") or run_defaults(spec)  # a resumed sweep keeps its rates
    spaces, firsts = resolve_spaces(spec, defaults)
    cluster = connect_cluster(
        launch, {f"arm {a.name}": spec.config_layers(a, spec.seeds[0], {}) for a in spec.arms}
    )
    _create(out, spec, launch, defaults, spaces, firsts)
    print(
        f"sweep: {out} ({len(spec.arms)} arm(s) x {spec.trials} trials, objective {spec.objective}, "
        f"{spec.updates_per_batch()} policy update(s) per batch, {where_it_runs(launch, cluster)})",
        flush=True,
    )
    code = run_experiment(out, launch, cluster)
    print(show(out))
    return code


def _create(
    out: Path, spec: SweepSpec, launch: LaunchOptions, defaults: dict, spaces: dict, firsts: dict
) -> None:
    """Write sweep.json (with the resolved rates and spaces; added to one an older version
    wrote) and fill every arm's study with its N trial slots, or check that `out` holds this sweep."""
    from sweeps.queue import RunQueue, open_storage
    from sweeps.search import fill_study
    from sweeps.spec import save_spec, write_spec_file

    storage = open_storage(launch.storage, out / "study.journal")  # an unreachable RDB fails here
    command = "bench sweep " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    resolved = {name: space.to_json() for name, space in spaces.items()}
    extra = {"storage": launch.storage, "command": command, "created": time.strftime("%Y-%m-%d %H:%M:%S")}
    saved = save_spec(out, spec, {**extra, "run_defaults": defaults})
    if "arm_spaces" not in saved:
        write_spec_file(out, SweepSpec.SPEC_FILE, {**saved, "arm_spaces": resolved})
    for arm in spec.arms:
        queue = RunQueue(storage, spec.study_name(arm), direction=spec.direction)
        fill_study(queue.study, spec.trials, firsts[arm.name])
