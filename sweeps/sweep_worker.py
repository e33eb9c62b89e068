"""A sweep worker: claim the next trial of any of the sweep's studies, run it
(`sweeps.trials`), tell Optuna its outcome; repeat until every study's N trials are done.

    python -m sweeps.sweep_worker SWEEP_DIR [--cores 0,1]

Outcomes: COMPLETE (value = the objective over the trial's seeds; a seed whose run stopped
itself, e.g. diverged, is evaluated and noted in `detail`), PRUNED, FAIL (the reason in the
trial's `fail_reason` and in `status/<arm>/<slot>.json`). A trial of a dead worker is taken over
by the queue's lease (`sweeps.queue`) and resumes its runs.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

from results.rundir import write_json_atomic
from sweeps.queue import LEASE_S, RunQueue, open_storage
from sweeps.spaces import param_from_table, space_for
from sweeps.study import FINAL_REWARD, SweepSpec, load_spec, make_pruner, make_sampler
from sweeps.trials import REWARD_WINDOW, TrialRun, trial_values


class ArmSpace(NamedTuple):
    """What a sweep searches for one arm, and the arm's settings it depends on."""

    params: list
    fixed: dict[str, Any]
    algo_config: dict[str, Any]  # the effective algorithm config
    trajectories_per_step: int


def arm_space(spec: SweepSpec, arm, run_defaults: dict[str, Any]) -> ArmSpace:
    """One arm's search space: its algorithm's space, given the run's default rates and
    trajectories per step (group sizes must divide it), with the sweep's `--space` overrides."""
    import dataclasses

    from bench.config import build_config, make_algorithm

    config = build_config(*spec.config_layers(arm, spec.seeds[0], {}))
    algo = make_algorithm(config)
    algo_config = dataclasses.asdict(algo.config)
    run = {**run_defaults, "trajectories_per_step": config.trajectories_per_step}
    overrides = {name: param_from_table(name, table) for name, table in spec.space.items()}
    params, fixed = space_for(type(algo), algo_config, run, overrides)
    return ArmSpace(params, fixed, algo_config, config.trajectories_per_step)


def open_queues(out: Path, spec: SweepSpec, data: dict[str, Any]) -> list[tuple[Any, RunQueue, list, dict]]:
    """(arm, its study's queue, searched params, fixed values) for every arm."""
    storage = open_storage(data.get("storage") or "", out / "study.journal")
    queues = []
    for arm in spec.arms:
        space = arm_space(spec, arm, data.get("run_defaults", {}))
        n_reports = expected_reports(spec, space.trajectories_per_step)
        queue = RunQueue(
            storage,
            spec.study_name(arm),
            lease_s=float(data.get("lease_s", LEASE_S)),
            direction=spec.direction,
            sampler=make_sampler(spec.sampler, space.params),
            pruner=make_pruner(spec.pruner, n_reports),
        )
        queues.append((arm, queue, space.params, space.fixed))
    return queues


def expected_reports(spec: SweepSpec, trajectories_per_step: int) -> int | None:
    """In-training reports of a full trial (Hyperband's max resource): per seed, one per
    in-training evaluation (an eval objective) or per REWARD_WINDOW steps (reward/final), when
    a trajectory budget fixes the steps; None (unknown until a trial finishes) otherwise."""
    kind, amount = spec.budget
    every = REWARD_WINDOW if spec.objective == FINAL_REWARD else spec.eval_every
    if kind != "trajectories" or not every:
        return None
    steps = math.ceil(amount / trajectories_per_step)
    return max(1, steps // every) * len(spec.seeds)


def work(out: Path, cores: list[int] | None = None, poll_s: float = 2.0) -> int:
    """The worker loop (module docstring); 0 when no trial is left."""
    spec, data = load_spec(out)
    queues = open_queues(out, spec, data)
    while True:
        for arm, queue, params, fixed in queues:
            claim = queue.claim()
            if claim is not None:
                _run_one(out, spec, arm, queue, claim, params, fixed, cores)
                break
        else:
            if all(q.pending() == 0 for _, q, _, _ in queues):
                return 0
            time.sleep(poll_s)


def _run_one(out, spec, arm, queue, claim, params, fixed, cores) -> None:
    from optuna.trial import TrialState

    status_path = out / "status" / arm.slug / f"{claim.run}.json"
    status_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()  # the trial's wall time runs from here to its result in the storage
    stop = queue.keep_alive(claim)
    try:
        trial, values = trial_values(queue, claim, params, fixed)
        write_json_atomic(
            status_path,
            {
                "trial": claim.number,
                "state": "running",
                "params": values,
                "worker": queue.worker,
                "started": started,
            },
        )
        try:
            result = TrialRun(out, spec, arm, trial, claim, values, cores).run()
        except Exception as exc:  # e.g. sampled parameters no config accepts: the trial fails, not the worker
            result = {"state": "failed", "detail": f"{type(exc).__name__}: {exc}"}
    finally:
        stop.set()
    result.update(trial=claim.number, params=values, worker=queue.worker, started=started, ended=time.time())
    write_json_atomic(status_path, result)
    try:
        if result["state"] == "complete":
            trial.set_user_attr("detail", result["detail"])
            queue.study.tell(trial, result["value"])
        elif result["state"] == "busy":  # another worker's process trains this trial's run
            queue.drop_duplicate(claim, result["detail"])
        elif result["state"] == "pruned":
            trial.set_user_attr("detail", result["detail"])
            queue.study.tell(trial, state=TrialState.PRUNED)
        else:
            trial.set_user_attr("fail_reason", result["detail"])
            queue.study.tell(trial, state=TrialState.FAIL)
        write_json_atomic(status_path, {**result, "recorded": time.time()})
    except Exception as exc:  # taken over meanwhile: the runs' directories keep what was done
        print(
            f"sweep worker: trial {claim.number} of {arm.name} was finished elsewhere ({exc})",
            file=sys.stderr,
        )


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m sweeps.sweep_worker`."""
    p = argparse.ArgumentParser(prog="python -m sweeps.sweep_worker", description=__doc__.splitlines()[0])
    p.add_argument("sweep_dir", type=Path)
    p.add_argument(
        "--cores", default=None, help="comma-separated CPU cores for this worker's runs (default: all)"
    )
    args = p.parse_args(argv)
    return work(args.sweep_dir, [int(c) for c in args.cores.split(",")] if args.cores else None)


if __name__ == "__main__":
    sys.exit(main())
