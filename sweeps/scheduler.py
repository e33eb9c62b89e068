"""One scheduler idea, two backends: the runs of a comparison or a sweep are a queue in an Optuna
study (`sweeps.queue`: claims, takeovers of gone holders, exactly once), and each claimed run is played
and recorded by its experiment (`sweeps.worker.Experiment`). What differs is who holds a claim
and where its run executes:

* `local` (the default without a cluster): `--workers` processes on this machine each claim a
  run, play it on their share of the cores and GPUs, and claim the next (`sweeps.launch`).
  Nothing else to install or start; measured beside Ray on 2 cores in docs/cluster.md.
* `ray` (`--cluster ray`, or the default where `RAY_ADDRESS` is set, as `ray job submit` sets
  it): one driver claims every waiting run and hands each to a Ray task that asks for the
  run's GPUs and CPUs; Ray queues it until one node has them and places it there
  (`sweeps.ray_cluster`). The driver holds the claims; the task plays and records the run.

A run asks for the GPUs its config places (`gpus_asked`): its learner ranks plus its rollout
servers times their tensor-parallel size, all on one node.
"""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Any


class ClusterBackend(StrEnum):
    """Where a comparison's or sweep's runs execute (`--cluster`)."""

    LOCAL = "local"
    """worker processes on this machine"""
    RAY = "ray"
    """Ray tasks on the nodes of a Ray cluster"""


def default_backend(environ: Any = None) -> ClusterBackend:
    """`ray` where RAY_ADDRESS is set (a `ray job submit` entrypoint, or a user who exported it),
    else `local`."""
    environ = os.environ if environ is None else environ
    return ClusterBackend.RAY if environ.get("RAY_ADDRESS") else ClusterBackend.LOCAL


PLACEMENT_DEFAULTS = {"learner_ranks": 1, "rollout_servers": 0, "rollout_tp": 1}
"""The run fields that say how many GPUs a run places, with `bench.config.RunConfig`'s
defaults (a test holds them equal: this package reads config layers, never `bench`)."""


def placement_of(layers: list[dict[str, Any]]) -> dict[str, int]:
    """`learner_ranks`, `rollout_servers` and `rollout_tp` of a run from its config layers
    (lowest first, as `bench.config.build_run` merges them)."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update({k: v for k, v in layer.items() if k in PLACEMENT_DEFAULTS})
    return {k: int(merged.get(k, default)) for k, default in PLACEMENT_DEFAULTS.items()}


def gpus_asked(layers: list[dict[str, Any]]) -> int:
    """GPUs a run with these config layers occupies on a GPU node: one per learner rank (its
    colocated engine shares the first) plus `rollout_tp` per rollout server."""
    p = placement_of(layers)
    return p["learner_ranks"] + p["rollout_servers"] * p["rollout_tp"]
