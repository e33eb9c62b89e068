"""A worker of a comparison or a sweep: take the next run from the queue, play it, record its
result; repeat until no run is left. `bench compare` and `bench sweep` start `--workers` of
them on this machine (the local backend; on a Ray cluster `sweeps.ray_cluster` plays the runs).

    python -m sweeps.worker DIR [--cores 0,1]      # DIR: a comparison or a sweep directory

The loop is one for both; what a run *is* comes from the experiment (`Experiment`): a
comparison's (arm, seed) run (`sweeps.comparison_runs`) or a sweep's trial (`sweeps.trials`).
The scheduling around it, claims and takeovers, is the queue's (`sweeps.queue`); the Ray
backend (`sweeps.ray_cluster`) drives the same `Experiment` from one driver (`sweeps.scheduler`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Protocol

from results.files import DamagedFileError, fault_message
from sweeps.errors import ExperimentError
from sweeps.queue import Claim, RunQueue


class Experiment(Protocol):
    """The runs of one comparison or sweep, as a worker plays them."""

    queues: list[RunQueue]
    """the studies whose runs this experiment holds (one per sweep arm; one for a comparison)"""

    def play(self, queue: RunQueue, claim: Claim) -> dict[str, Any]:
        """Run the claimed run to its end (train, evaluate, ...); its status record, whose
        `state` says how it went (`busy`: another live process already does it)."""
        ...

    def record(self, queue: RunQueue, claim: Claim, result: dict[str, Any]) -> None:
        """Tell the study how the claimed run ended (a value, failed, pruned, a duplicate)."""
        ...

    # what a cluster backend (`sweeps.ray_cluster`) needs besides
    where: str
    """the node and GPUs the runs execute on, recorded in their status ("" on the local backend)"""

    def run_layers(self, queue: RunQueue, claim: Claim) -> list[dict[str, Any]]:
        """The config layers of the claimed run (its placement says how many GPUs it asks for)."""
        ...

    def mark_queued(self, queue: RunQueue, claim: Claim, asks: str) -> None:
        """Record that a cluster holds the claim until a node has what it `asks`."""
        ...

    def fail_unplayed(self, queue: RunQueue, claim: Claim, reason: str) -> None:
        """Record that the claim could not be played at all (its cluster task was lost for good)."""
        ...


def work(experiment: Experiment, poll_s: float = 2.0) -> int:
    """The worker loop (module docstring); returns 0 when no run is left to do."""
    while True:
        for queue in experiment.queues:
            claim = queue.claim()
            if claim is None:
                continue
            experiment.record(queue, claim, experiment.play(queue, claim))
            break
        else:
            if all(q.pending() == 0 for q in experiment.queues):
                return 0
            refuse_foreign_holds(experiment.queues, only_if_all_pending=True)
            time.sleep(poll_s)  # runs held by live workers: wait, to take over any that dies


def refuse_foreign_holds(queues: list[RunQueue], only_if_all_pending: bool = False) -> None:
    """An ExperimentError when runs of `queues` are held by workers on another machine, which the
    local backend cannot watch (`RunQueue.foreign_holds`); with `only_if_all_pending`, only when
    nothing else is left for this machine to wait on."""
    held: dict[str, list[str]] = {}
    for queue in queues:
        for host, runs in queue.foreign_holds().items():
            held.setdefault(host, []).extend(runs)
    n_held = sum(len(runs) for runs in held.values())
    if not held or (only_if_all_pending and n_held < sum(q.pending() for q in queues)):
        return
    hosts = "; ".join(
        f"{', '.join(sorted(runs)[:3])}{' ...' if len(runs) > 3 else ''} on {host}"
        for host, runs in held.items()
    )
    raise ExperimentError(
        f"{n_held} run(s) are held by workers of another machine ({hosts}); the local backend runs on "
        "one machine and cannot see them: run this command on that machine, or place the runs on a "
        "Ray cluster with --cluster ray"
    )


def open_experiment(out: Path, cores: list[int] | None) -> Experiment:
    """The experiment of a comparison or sweep directory."""
    from sweeps.comparison import ComparisonSpec
    from sweeps.sweep import SweepSpec

    if (out / ComparisonSpec.SPEC_FILE).exists():
        from sweeps.comparison_runs import ComparisonRuns

        return ComparisonRuns(out, cores)
    if (out / SweepSpec.SPEC_FILE).exists():
        from sweeps.trials import SweepTrials

        return SweepTrials(out, cores)
    raise ExperimentError(
        f"{out} is neither a comparison ({ComparisonSpec.SPEC_FILE}) nor a sweep ({SweepSpec.SPEC_FILE}) directory"
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m sweeps.worker`."""
    p = argparse.ArgumentParser(prog="python -m sweeps.worker", description=__doc__.splitlines()[0])
    p.add_argument("dir", type=Path, help="a comparison or a sweep directory")
    p.add_argument(
        "--cores", default=None, help="comma-separated CPU cores for this worker's runs (default: all)"
    )
    args = p.parse_args(argv)
    cores = [int(c) for c in args.cores.split(",")] if args.cores else None
    try:
        return work(open_experiment(args.dir, cores))
    except (ExperimentError, DamagedFileError) as exc:  # e.g. a damaged journal or spec file
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full or read-only disk: one line, as `bench` prints it
        fault = fault_message(exc)
        if fault is None:
            raise
        print(f"bench: error: {fault}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
