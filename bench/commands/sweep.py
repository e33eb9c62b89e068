"""`bench sweep`: tune algorithms with Optuna, every arm with the same number of trials and the
same budget, on a validation split; `bench sweep --show DIR` summarises a sweep.

Checked before anything runs: arms, objective, budget, the search space (`--space` names and
distributions), the storage. The trials are the studies' queues (`sweeps.study`,
`sweeps.queue`); `--workers` processes here take them, the same command on another machine
(same `--storage`, shared `--out`) adds workers, and running it again resumes the sweep.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from bench.errors import UsageError

DEFAULT_WORKERS = 2


def register(sub) -> None:
    """Add `bench sweep` to the subcommands."""
    p = sub.add_parser(
        "sweep", help="tune algorithms with Optuna (same trials and budget for each), or --show a sweep"
    )
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of `bench sweep`."""
    p.add_argument("--algo", default=None, help="the algorithm to tune (or --algos for several)")
    p.add_argument("--algos", default=None, metavar="ARMS", help="several arms, as bench compare --algos: each gets "
                   "its own study with the same trials, budget and seeds")  # fmt: skip
    p.add_argument("--preset", default=None, help="preset of --algo")
    p.add_argument("--task", default="arith", help="task (default: arith)")
    p.add_argument("--trials", type=int, default=20, metavar="N", help="trials per arm (default: 20)")
    p.add_argument("--objective", default=None, metavar="KEY", help="eval/<bench>/avg_at_k or reward/final (default: "
                   "eval/<task>-val/avg_at_k where the task has a validation split, else reward/final)")  # fmt: skip
    p.add_argument("--direction", choices=("maximize", "minimize"), default="maximize")
    p.add_argument(
        "--budget",
        default=None,
        metavar="KIND=N",
        help="each run's budget: trajectories=N, tokens=N or minutes=M",
    )
    p.add_argument(
        "--seeds",
        type=int,
        default=1,
        metavar="K",
        help="runs per trial (seeds 0..K-1); the value is their mean",
    )
    p.add_argument("--eval-every", type=int, default=0, metavar="N", help="in-training evaluation every N steps "
                   "(the curve the hyperband pruner sees; default: 0)")  # fmt: skip
    p.add_argument(
        "--eval-k", type=int, default=2, metavar="K", help="samples per problem of the objective's evaluation"
    )
    p.add_argument(
        "--eval-limit",
        type=int,
        default=None,
        metavar="N",
        help="first N problems of the objective's benchmark",
    )
    p.add_argument("--pruner", choices=("wilcoxon", "hyperband", "none"), default="wilcoxon",
                   help="wilcoxon: after each seed's evaluation, per problem, against the best trial; hyperband: on "
                   "the in-training curve; none (default: wilcoxon)")  # fmt: skip
    p.add_argument("--sampler", choices=("tpe", "random", "grid"), default="tpe", help="(default: tpe)")
    p.add_argument(
        "--space", default=None, metavar="FILE.toml", help="search-space overrides ([params.NAME] tables)"
    )
    p.add_argument("--mode", choices=("async", "sync"), default=None, help="training mode of every run")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a run field for every trial"
    )
    p.add_argument(
        "--workers", type=int, default=DEFAULT_WORKERS, metavar="W", help="worker processes here (default: 2)"
    )
    p.add_argument("--storage", default="", metavar="URL", help="Optuna storage: default a journal file in --out; "
                   "postgresql://user@host/db for workers on several machines")  # fmt: skip
    p.add_argument(
        "--out", default=None, metavar="DIR", help="sweep directory (default: sweeps/<task>-<hash>)"
    )
    p.add_argument(
        "--lease-seconds", type=float, default=None, metavar="S", help="silence before a trial is taken over"
    )
    p.add_argument(
        "--show", default=None, metavar="SWEEP_DIR", help="summarise a sweep: best trials, importances, plots"
    )


def run_defaults(model: str, task: str) -> dict[str, float]:
    """The learning rates a run of `model` gets when none is set (the space's centres and the
    first trial's values), by the same size rule as a run (`bench.train.setup`): the small-model
    tier (the task's own policy rate where it has one) or the paper's. A local model's size is
    counted on the meta device (no weights loaded); a hub id counts as large."""
    from bench.models.recipes import recipe_for
    from bench.train.setup import PAPER_LRS, SMALL_LRS, SMALL_MODEL_PARAMS

    small = model == "tiny" or _parameters(model) < SMALL_MODEL_PARAMS
    tier = SMALL_LRS if small else PAPER_LRS
    policy = (recipe_for(task).policy_lr if small else None) or tier["policy"]
    return {"policy_lr": policy, "critic_lr": tier["critic"]}


def _parameters(model: str) -> float:
    """Parameter count of a local transformers directory (inf when it is not one)."""
    path = Path(model).expanduser()
    if not (path / "config.json").exists():
        return float("inf")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        net = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path))
    return sum(p.numel() for p in net.parameters())


def build_spec(args: argparse.Namespace):
    """The sweep spec, every arm's space and first trial validated (one-line errors)."""
    from algorithms import registry as algo_registry
    from bench.config_values import parse_set_options
    from benchmarks import registry as bench_registry
    from sweeps.grid import Arm, parse_arms, parse_budget
    from sweeps.study import SweepError, SweepSpec, check_objective

    if bool(args.algo) == bool(args.algos):
        raise UsageError("give the algorithm to tune with --algo NAME, or several with --algos A,B")
    arms = parse_arms(args.algos) if args.algos else [Arm(args.algo + (f":{args.preset}" if args.preset else ""),
                                                          args.algo, args.preset)]  # fmt: skip
    for arm in arms:
        algo_registry.check(arm.algo)
    if args.budget is None:
        raise UsageError("--budget is required: trajectories=N, tokens=N or minutes=M")
    budget = parse_budget(args.budget)
    objective = args.objective or (f"eval/{args.task}-val/avg_at_k" if f"{args.task}-val" in bench_registry.names()
                                   else "reward/final")  # fmt: skip
    check_objective(objective, bench_registry.names())
    for flag, value in (
        ("--trials", args.trials),
        ("--seeds", args.seeds),
        ("--workers", args.workers),
        ("--eval-k", args.eval_k),
    ):
        if value < 1:
            raise UsageError(f"{flag} must be >= 1, got {value}")
    if args.pruner == "hyperband" and objective != "reward/final" and not args.eval_every:
        raise SweepError(
            "--pruner hyperband on an evaluation objective needs its in-training curve: give --eval-every N"
        )
    shared = parse_set_options(args.set)
    if args.mode:
        shared["mode"] = args.mode
    for key in ("algo", "algo_preset", "task", "seed", "steps"):
        if key in shared:
            raise UsageError(f"--set {key}: set by bench sweep itself")
    space = _space_tables(args.space)
    return SweepSpec(args.task, tuple(arms), args.trials, objective, args.direction, budget, tuple(range(args.seeds)),
                     eval_k=args.eval_k, eval_limit=args.eval_limit, eval_every=args.eval_every, pruner=args.pruner,
                     sampler=args.sampler, shared=shared, space=space)  # fmt: skip


def _space_tables(path: str | None) -> dict:
    """The `--space` file's tables (checked by parsing them)."""
    if path is None:
        return {}
    import tomllib

    from sweeps.spaces import load_space_file

    load_space_file(path)  # one-line errors for bad files and distributions
    return tomllib.loads(Path(path).read_text())["params"]


def _check_spaces(spec, defaults: dict) -> dict[str, dict]:
    """Every arm's space names valid config keys and its first trial (the paper's defaults)
    builds a valid config; the first trials' values per arm."""
    import dataclasses

    from algorithms import registry
    from algorithms.renames import current_key
    from bench.config import RunConfig, build_config, did_you_mean
    from sweeps.spaces import as_layer, paper_defaults
    from sweeps.study import SweepError
    from sweeps.sweep_worker import arm_space

    firsts = {}
    run_fields = {f.name for f in dataclasses.fields(RunConfig)}
    for arm in spec.arms:
        params, fixed, algo_config, _ = arm_space(spec, arm, defaults)
        for given in spec.space:
            name = current_key(registry.get(arm.algo), given)  # an old field name: its current one
            section, dot, key = name.partition(".")
            valid = [f"algo.{k}" for k in algo_config] if dot else sorted(run_fields)
            if (dot and (section != "algo" or key not in algo_config)) or (
                not dot and name not in run_fields
            ):
                raise SweepError(
                    f"--space: {name!r} is not a parameter of {arm.name}{did_you_mean(name, valid)}"
                )
        firsts[arm.name] = paper_defaults(params, algo_config, defaults)
        build_config(*spec.config_layers(arm, 0, as_layer({**fixed, **firsts[arm.name]})))
    return firsts


def run(args: argparse.Namespace) -> int:
    """Handler of `bench sweep`."""
    if args.show:
        from sweeps.show import show
        from sweeps.study import load_spec

        load_spec(Path(args.show))  # a one-line error for a directory that is not a sweep
        print(show(Path(args.show)))
        return 0
    from sweeps.launch import run_workers
    from sweeps.queue import LEASE_S, RunQueue, open_storage
    from sweeps.show import show
    from sweeps.study import fill_study, save_spec

    spec = build_spec(args)
    defaults = run_defaults(spec.shared.get("model", "tiny"), spec.task)
    firsts = _check_spaces(spec, defaults)
    out = Path(args.out) if args.out else Path("sweeps") / f"{spec.task}-{spec.fingerprint()[:8]}"
    storage = open_storage(args.storage, out / "study.journal")
    command = "bench sweep " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    lease = args.lease_seconds or LEASE_S
    save_spec(out, spec, {"storage": args.storage, "command": command, "created": time.strftime("%Y-%m-%d %H:%M:%S"),
                          "lease_s": lease, "run_defaults": defaults})  # fmt: skip
    for arm in spec.arms:
        fill_study(RunQueue(storage, spec.study_name(arm), lease_s=lease, direction=spec.direction).study,
                   spec.trials, firsts[arm.name])  # fmt: skip
    print(f"sweep: {out} ({len(spec.arms)} arm(s) x {spec.trials} trials, objective {spec.objective}, "
          f"{args.workers} workers here)", flush=True)  # fmt: skip
    codes = run_workers(out, args.workers, module="sweeps.sweep_worker")
    print(show(out))
    return _workers_ok(codes, out)


def _workers_ok(codes: list[int], out: Path) -> int:
    """0, or 1 with a line per worker that crashed (its traceback is on stderr above)."""
    bad = [c for c in codes if c != 0]
    for code in bad:
        print(
            f"bench: a worker exited with code {code}; rerun the same command to resume {out}",
            file=sys.stderr,
        )
    return 1 if bad else 0
