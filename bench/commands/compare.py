"""`bench compare`: train arms x seeds at one matched budget, evaluate every run's checkpoint
the same way, and write the comparison report.

Everything is checked before anything runs (arms, presets, budget, benchmarks, the storage,
an --out holding another comparison). The runs are a queue in an Optuna storage
(`sweeps.queue`): `--workers` processes here take them one by one, and the same command on
another machine (same `--storage`, `--out` on a shared filesystem) adds workers there. Running
the command again resumes the comparison: finished runs are kept, interrupted ones continue
from their last checkpoint.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from bench.errors import UsageError

DEFAULT_WORKERS = 2
"""Runs side by side on one machine; each gets its share of the cores (`sweeps.launch`)."""


def register(sub) -> None:
    """Add `bench compare` to the subcommands."""
    p = sub.add_parser("compare", help="train algorithms x seeds at a matched budget, evaluate, report")
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of `bench compare`."""
    p.add_argument("--algos", default=None, metavar="ARMS",
                   help="comma-separated arms: an algorithm, ALGO:PRESET (e.g. ppo:vapo) or grpo+dis; or a "
                   "TOML file of [arms.NAME] tables (algo, preset, algo_args, set)")  # fmt: skip
    p.add_argument("--params-from-sweep", default=None, metavar="SWEEP_DIR[,DIR]",
                   help="arms = the sweeps' algorithms with their best trials' parameters, run on fresh seeds (after "
                   "the ones tuned on); several sweeps must share trials, budget, seeds and objective; the report "
                   "states the tuning budget")  # fmt: skip
    p.add_argument("--task", default="arith", help="task every arm trains on (default: arith)")
    p.add_argument("--seeds", default="3", metavar="N|S,S,...",
                   help="seeds: N means 0..N-1, or a comma list (default: 3)")  # fmt: skip
    p.add_argument("--budget", required=True, metavar="KIND=N",
                   help="the budget every run stops at: trajectories=N (trained on), tokens=N (generated) or "
                   "minutes=M (wall clock)")  # fmt: skip
    p.add_argument("--eval-bench", default=None, metavar="NAME[,NAME]",
                   help="benchmarks every run's selected checkpoint is evaluated on (default: the task's own "
                   "benchmark when there is one)")  # fmt: skip
    p.add_argument("--eval-every", type=int, default=0, metavar="N",
                   help="also evaluate during training every N steps (curves vs trajectories and time; default: 0 = no)")  # fmt: skip
    p.add_argument("--eval-k", type=int, default=4, metavar="K", help="samples per problem (default: 4)")
    p.add_argument(
        "--eval-limit", type=int, default=None, metavar="N", help="first N problems of each benchmark"
    )
    p.add_argument("--eval-seed", type=int, default=0, metavar="S",
                   help="evaluation seed, the same for every run so samples pair across arms (default: 0)")  # fmt: skip
    p.add_argument("--select", default="final", metavar="RULE",
                   help="which checkpoint is evaluated, fixed before the runs: 'final' (default) or "
                   "'best-on=BENCH' (the in-training best on BENCH, a benchmark that is not reported)")  # fmt: skip
    p.add_argument(
        "--mode", choices=("async", "sync"), default=None, help="training mode of every run (default: async)"
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a run config field for every arm (as bench run --set); repeatable")  # fmt: skip
    p.add_argument("--workers", type=int, default=DEFAULT_WORKERS, metavar="W",
                   help=f"worker processes on this machine, each on its share of the cores (default: {DEFAULT_WORKERS})")  # fmt: skip
    p.add_argument("--storage", default="", metavar="URL",
                   help="Optuna storage of the run queue: default a journal file in --out (one machine); "
                   "postgresql://user@host/db to add workers on other machines")  # fmt: skip
    p.add_argument("--out", default=None, metavar="DIR",
                   help="comparison directory (default: comparisons/<task>-<hash of the settings>, so the same "
                   "command resumes it)")  # fmt: skip
    p.add_argument("--retry-failed", action="store_true", help="run again the runs that failed (crashed)")
    p.add_argument("--lease-seconds", type=float, default=None, metavar="S",
                   help="how long a silent worker keeps its run before others take it over (default: 90)")  # fmt: skip
    p.add_argument("--no-report", action="store_true", help="do not write the report at the end")


def _seeds(text: str) -> tuple[int, ...]:
    try:
        values = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"--seeds {text!r}: expected N or a comma list of integers") from None
    if len(values) == 1 and "," not in text:
        if values[0] < 1:
            raise UsageError(f"--seeds must be >= 1, got {values[0]}")
        return tuple(range(values[0]))
    if not values or len(set(values)) != len(values):
        raise UsageError(f"--seeds {text!r}: expected distinct integers")
    return tuple(values)


def _fresh_seeds(seeds: tuple[int, ...], tuned: list[int], explicit: bool) -> tuple[int, ...]:
    """Seeds a tuned comparison may use: never one it was tuned on (N seeds start after them)."""
    if explicit:
        reused = sorted(set(seeds) & set(tuned))
        if reused:
            raise UsageError(
                f"--seeds {','.join(map(str, reused))}: the sweep tuned on these; compare on fresh seeds"
            )
        return seeds
    start = max(tuned) + 1
    return tuple(range(start, start + len(seeds)))


def build_spec(args: argparse.Namespace):
    """The comparison spec from the command line, every run's config validated (UsageError,
    RegistryError, GridError: one line, before anything is created)."""
    from algorithms import registry as algo_registry
    from bench.config import build_config
    from bench.config_values import parse_set_options
    from benchmarks import registry as bench_registry
    from sweeps.grid import ComparisonSpec, EvalPlan, parse_arms, parse_budget, parse_select

    tuning = None
    if args.params_from_sweep:
        if args.algos:
            raise UsageError("give either --algos or --params-from-sweep (its arms are the sweep's)")
        from sweeps.show import best_arms

        sweep_dirs = [Path(d.strip()) for d in args.params_from_sweep.split(",") if d.strip()]
        if not sweep_dirs:
            raise UsageError("--params-from-sweep: expected SWEEP_DIR or a comma list of sweep directories")
        arms, tuning = best_arms(sweep_dirs)
        if tuning["task"] != args.task:
            raise UsageError(
                f"--params-from-sweep: the sweep tuned on {tuning['task']}; give --task {tuning['task']}"
            )
    elif not args.algos:
        raise UsageError("--algos is required (or --params-from-sweep SWEEP_DIR)")
    else:
        arms = parse_arms(args.algos)
    for arm in arms:  # names first: a typo is answered before any algorithm (or torch) loads
        algo_registry.check(arm.algo)
    budget = parse_budget(args.budget)
    shared = parse_set_options(args.set)
    if args.eval_bench is None:
        own = bench_registry.task_benchmark_name(args.task, shared.get("task_args"))
        benches = (own,) if own else ()
    else:
        benches = tuple(dict.fromkeys(b.strip() for b in args.eval_bench.split(",") if b.strip()))
    for name in benches:
        bench_registry.check(name)
    for flag, value, low in (("--eval-every", args.eval_every, 0), ("--eval-k", args.eval_k, 1),
                             ("--workers", args.workers, 1)):  # fmt: skip
        if value < low:
            raise UsageError(f"{flag} must be >= {low}, got {value}")
    if args.eval_limit is not None and args.eval_limit < 1:
        raise UsageError(f"--eval-limit must be >= 1, got {args.eval_limit}")
    select = parse_select(args.select, benches, args.eval_every)
    if select:
        bench_registry.check(select.partition("=")[2])
    if args.mode:
        shared["mode"] = args.mode
    for key in ("algo", "algo_preset", "task", "seed", "steps"):
        if key in shared:
            raise UsageError(
                f"--set {key}: set by bench compare itself (use --algos, --task, --seeds, --budget)"
            )
    plan = EvalPlan(benches, args.eval_every, args.eval_k, args.eval_limit, args.eval_seed, select)
    seeds = _seeds(args.seeds)
    if tuning is not None:
        seeds = _fresh_seeds(seeds, tuning["seeds"], explicit="," in args.seeds)
    spec = ComparisonSpec(args.task, tuple(arms), seeds, budget, plan, shared, tuning)
    for arm in spec.arms:  # every run's config, as its worker will build it
        build_config(*spec.config_layers(arm, spec.seeds[0]))
    return spec


def run(args: argparse.Namespace) -> int:
    """Handler of `bench compare`."""
    from sweeps.grid import save_spec
    from sweeps.launch import run_workers
    from sweeps.queue import LEASE_S, RunQueue, open_storage

    spec = build_spec(args)
    out = Path(args.out) if args.out else Path("comparisons") / f"{spec.task}-{spec.fingerprint()[:8]}"
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: not a directory")
    storage = open_storage(args.storage, out / "study.journal")  # an unreachable RDB fails here
    study = f"compare-{spec.fingerprint()}"
    command = "bench compare " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    lease = args.lease_seconds or LEASE_S
    save_spec(out, spec, {"storage": args.storage, "study": study, "command": command,
                          "created": time.strftime("%Y-%m-%d %H:%M:%S"), "lease_s": lease})  # fmt: skip
    RunQueue(storage, study, lease_s=lease).ensure(spec.run_names(), retry_failed=args.retry_failed)
    n = len(spec.run_names())
    print(f"comparison: {out} ({len(spec.arms)} arms x {len(spec.seeds)} seeds = {n} runs, "
          f"budget {spec.budget[0]}={spec.budget[1]}, {args.workers} workers here)", flush=True)  # fmt: skip
    codes = run_workers(out, args.workers)
    status = _finish(out, args.no_report)
    for code in (c for c in codes if c != 0):
        print(
            f"bench: a worker exited with code {code}; rerun the same command to resume {out}",
            file=sys.stderr,
        )
    return 1 if any(codes) else status


def _finish(out: Path, no_report: bool) -> int:
    """Print the comparison table (and write the report); 1 when a run failed."""
    from results.comparison import load

    comparison = load([out])
    if not no_report:
        from results.report import write_report

        paths = write_report([out], out / "report")
        comparison = paths.comparison
        print(paths.table_text)
        print(f"report: {paths.index_html}")
    failed = comparison.runs[comparison.runs["state"] == "failed"]
    for _, row in failed.iterrows():
        print(f"failed: {row['run']}: {row['detail']}", file=sys.stderr)
    return 1 if len(failed) else 0
