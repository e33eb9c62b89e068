"""`bench compare`: train arms x seeds at one matched budget, evaluate every run's checkpoint
the same way, and write the comparison report.

Everything is checked before anything runs (arms, presets, budget, benchmarks, the storage,
an --out holding another comparison). The runs are a queue in an Optuna storage
(`sweeps.queue`): `--workers` processes here take them one by one, or with `--cluster ray`
each run is a Ray task placed on a node with its CPUs and GPUs (`sweeps.scheduler`). Running
the command again resumes the comparison: finished runs are kept, interrupted ones continue
from their last checkpoint; with more seeds (every earlier one kept: `--seeds 5` after
`--seeds 3`) it extends the comparison, recorded in its spec file's `extended`. A run the
study records as finished whose directory holds no finished run (deleted, lost with a machine,
not copied) is trained again (`run_dir_lost`, `sweeps.queue.RunQueue.redo`), saying so: the study
alone would have reported it done and the report left it out.
"""

from __future__ import annotations

import argparse
import dataclasses
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
from sweeps.comparison import ComparisonSpec, EvalPlan
from sweeps.launch import LaunchOptions


def register(sub) -> None:
    """Add `bench compare` to the subcommands."""
    p = sub.add_parser("compare", help="train algorithms x seeds at a matched budget, evaluate, report")
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of `bench compare`: one per field with a flag of the comparison's spec, its
    evaluation plan, the run config (`--mode`) and the launch options (`add_field_options`:
    help and defaults are the fields' own), and the command's own two."""
    add_field_options(p, ComparisonSpec)
    add_field_options(p, EvalPlan)
    add_field_options(p, RunConfig, ("mode",))
    add_field_options(p, LaunchOptions)
    p.add_argument("--retry-failed", action="store_true", help="run again the runs that failed (crashed)")
    p.add_argument("--no-report", action="store_true", help="do not write the report at the end")


def _arms_and_tuning(args: argparse.Namespace) -> tuple[list, dict | None]:
    """The arms of `--algos`, or of `--params-from-sweep` with the tuning it states."""
    from sweeps.spec import parse_arms

    if not args.tuning:
        if not args.arms:
            raise UsageError("--algos is required (or --params-from-sweep SWEEP_DIR)")
        return parse_arms(args.arms), None
    if args.arms:
        raise UsageError("give either --algos or --params-from-sweep (its arms are the sweep's)")
    from sweeps.show import best_arms

    sweep_dirs = [Path(d.strip()) for d in args.tuning.split(",") if d.strip()]
    if not sweep_dirs:
        raise UsageError("--params-from-sweep: expected SWEEP_DIR or a comma list of sweep directories")
    arms, tuning = best_arms(sweep_dirs)
    task = args.task or "arith"
    if tuning["task"] != task:
        raise UsageError(
            f"--params-from-sweep: the sweep tuned on {tuning['task']}; give --task {tuning['task']}"
        )
    return arms, tuning


def _eval_plan(args: argparse.Namespace, task: str, shared: dict) -> EvalPlan:
    """The evaluation plan of the command line, every benchmark checked."""
    from benchmarks import registry as bench_registry
    from sweeps.comparison import parse_select

    values = field_options(args, EvalPlan)
    if "benchmarks" in values:
        benches = tuple(dict.fromkeys(b.strip() for b in values["benchmarks"].split(",") if b.strip()))
    else:
        own = bench_registry.task_benchmark_name(task, shared.get("task_args"))
        benches = (own,) if own else ()
    for name in benches:
        bench_registry.check(name)
        bench_registry.check_own_data(name, task, shared.get("task_args"))
    plan = EvalPlan(**{**values, "benchmarks": benches})
    for flag, value, low in (("--eval-every", plan.every, 0), ("--eval-k", plan.k, 1)):
        if value < low:
            raise UsageError(f"{flag} must be >= {low}, got {value}")
    if plan.limit is not None and plan.limit < 1:
        raise UsageError(f"--eval-limit must be >= 1, got {plan.limit}")
    select = parse_select(plan.select, benches, plan.every)
    if select:
        selected = select.partition("=")[2]
        bench_registry.check(selected)
        bench_registry.check_own_data(selected, task, shared.get("task_args"))
    return EvalPlan(**{**values, "benchmarks": benches, "select": select})


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


def build_spec(args: argparse.Namespace) -> ComparisonSpec:
    """The comparison spec from the command line, every run's config validated (one line,
    before anything is created)."""
    from bench.config import build_config
    from sweeps.spec import parse_seeds

    arms, tuning = _arms_and_tuning(args)
    budget, shared = checked_budget_and_shared(args, arms, "compare")
    task = args.task or "arith"
    values = {"task": task, "arms": tuple(arms), "budget": budget, "shared": shared, "tuning": tuning}
    values["eval"] = _eval_plan(args, task, shared)
    launch_options(args)
    if args.seeds is not None:
        values["seeds"] = parse_seeds(args.seeds)
    spec = ComparisonSpec(**values)
    if tuning is not None:
        explicit = args.seeds is not None and "," in args.seeds
        spec = dataclasses.replace(spec, seeds=_fresh_seeds(spec.seeds, tuning["seeds"], explicit))
    for arm in spec.arms:  # every run's config, as its `bench run` child will build it
        build_config(*spec.config_layers(arm, spec.seeds[0]))
    return spec


def run(args: argparse.Namespace) -> int:
    """Handler of `bench compare`."""
    from sweeps.launcher import refuse_inside_launcher

    refuse_inside_launcher("compare")  # first: under a launcher its runs would wait forever
    from sweeps.queue import RunQueue, open_storage
    from sweeps.spec import save_spec

    spec = build_spec(args)
    launch = launch_options(args)
    out = Path(launch.out) if launch.out else Path("comparisons") / f"{spec.task}-{spec.fingerprint()[:8]}"
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: not a directory")
    cluster = connect_cluster(
        launch, {f"arm {a.name}": spec.config_layers(a, spec.seeds[0]) for a in spec.arms}
    )
    storage = open_storage(launch.storage, out / "study.journal")  # an unreachable RDB fails here
    command = "bench compare " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    created = time.strftime("%Y-%m-%d %H:%M:%S")
    extra = {"storage": launch.storage, "study": f"compare-{spec.fingerprint()}", "command": command}
    before = read_json(out / spec.SPEC_FILE).get("seeds", []) if (out / spec.SPEC_FILE).exists() else None
    saved = save_spec(out, spec, {**extra, "created": created})
    if before is not None and before != saved["seeds"]:  # the same comparison, more seeds
        added = ", ".join(str(s) for s in saved["seeds"] if s not in before)
        print(f"comparison: {out} extended by seed(s) {added}; its finished runs are kept", flush=True)
    queue = RunQueue(storage, saved["study"])
    queue.ensure(spec.run_names(), retry_failed=args.retry_failed)
    for run in queue.redo(spec.run_names(), lambda run: run_dir_lost(out, run)):
        print(
            f"comparison: {run} had finished, but its run directory holds no finished run: trained again",
            flush=True,
        )
    n = len(spec.run_names())
    print(
        f"comparison: {out} ({len(spec.arms)} arms x {len(spec.seeds)} seeds = {n} runs, "
        f"budget {spec.budget.kind}={spec.budget.amount}, {spec.updates_per_batch()} policy update(s) per "
        f"batch, {where_it_runs(launch, cluster)})",
        flush=True,
    )
    code = run_experiment(out, launch, cluster)
    status = _finish(out, args.no_report)
    return code or status


def run_dir_lost(out: Path, run: str) -> bool:
    """Whether the directory of `run` under `out` holds no finished run: deleted, or never copied
    with the comparison (asked only of runs the study records as done: `RunQueue.redo`)."""
    from results.rundir import RunDir, RunOutcome
    from sweeps.comparison_runs import RUNS_DIR

    end = RunDir(out / RUNS_DIR / run).read_outcome()
    return end is None or end.outcome is not RunOutcome.FINISHED


def _finish(out: Path, no_report: bool) -> int:
    """Print the comparison table (and write the report); 1 when a run failed."""
    from results.comparison import load

    comparison = load([out])
    if not no_report:
        from bench.trackers.final import log_report
        from results.report import write_report

        paths = write_report([out], out / "report")
        comparison = paths.comparison
        print(paths.table_text)
        print(f"report: {paths.index_html}")
        log_report(paths)
    failed = comparison.runs[comparison.runs["state"] == "failed"]
    for _, row in failed.iterrows():
        print(f"failed: {row['run']}: {row['detail']}", file=sys.stderr)
    return 1 if len(failed) else 0
