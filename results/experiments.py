"""The directory contract of comparisons (and, for what they share, sweeps), read by
`results.comparison` and written by `sweeps/`: the spec file, `runs/<arm>-s<seed>/`,
`status/<run>.json` (each run's state as its worker recorded it, `RunState`) and the final
evaluation of the selected checkpoint under `runs/<run>/evals/final/`. Standard library only:
the comparison and sweep workers use it without pandas.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from results.files import read_json
from results.rundir import RunDir

STATUS_DIR = "status"
SPEC_FILE = "comparison.json"
RUNS_DIR = "runs"  # <comparison>/runs/<arm slug>-s<seed>/ (sweeps.comparison_runs writes them)
SWEEP_SPEC_FILE = "sweep.json"  # sweeps.sweep.SPEC_FILE; runs: <sweep>/<arm slug>/<slot>-s<seed>/
FINAL_EVAL_DIR = "final"  # runs/<run>/evals/final/<bench>.jsonl: the selected checkpoint's evaluation


class RunState(StrEnum):
    """A run of a comparison as its worker records it (status/<run>.json `state`)."""

    PENDING = "pending"
    """no worker has taken it yet (no status file)"""
    QUEUED = "queued"
    """claimed on a cluster, waiting for a node with the CPUs and GPUs it asks for"""
    RUNNING = "running"
    FINISHED = "finished"
    """trained to its budget and evaluated"""
    STOPPED = "stopped"
    """it ended itself (results.rundir.RunOutcome non-finite or starved): a result, reported"""
    FAILED = "failed"
    """a crash, a kill, or an evaluation that failed (`detail` says which)"""
    BUSY = "busy"
    """another live process trains it: a worker's duplicate claim, never recorded as its state"""


def arm_slug(name: str) -> str:
    """An arm's name as a directory name (`ppo:vapo` -> `ppo_vapo`); a run is `<slug>-s<seed>`."""
    return re.sub(r"[^A-Za-z0-9+._-]", "_", name)


def seed_run_name(prefix: str, seed: int | str) -> str:
    """A seed's run directory name, `<prefix>-s<seed>`: a comparison's `<arm slug>-s<seed>`
    under `runs/`, a sweep trial's `<slot>-s<seed>` under `<arm slug>/` (`seed="*"`: a glob)."""
    return f"{prefix}-s{seed}"


def trial_slot(slot: int) -> str:
    """A sweep's trial slot name (`trial-000`): its Optuna `run` attribute, status file stem and
    run directory prefix."""
    return f"trial-{slot:03d}"


def read_status(out: Path, run: str) -> dict[str, Any] | None:
    """The status record a worker wrote for `run` of the comparison in `out` (None: none yet)."""
    path = Path(out) / STATUS_DIR / f"{run}.json"
    return read_json(path) if path.exists() else None


def select_checkpoint(run_dir: Path, select: str | None) -> tuple[Path | None, str]:
    """(checkpoint to evaluate, the rule that chose it) by the comparison's selection rule:
    None/"final" -> the newest intact checkpoint; "best-on=BENCH" -> the checkpoint of the step
    whose in-training evaluation on BENCH scored highest (the earliest such step on ties)."""
    run = RunDir(run_dir)
    if select in (None, "final"):
        checkpoint, _ = run.latest_intact_checkpoint()
        if checkpoint is None:
            return None, "no intact checkpoint to evaluate"
        return checkpoint, f"final checkpoint ({checkpoint.name})"
    bench = select.partition("=")[2]
    key = f"eval/{bench}/avg_at_k"
    scored = [
        (r[key], -r["step"]) for r in run.read_metrics() if r.get(key) is not None and r.get("step", 0) > 0
    ]
    if not scored:
        return None, f"no in-training evaluation on {bench} to select by"
    score, neg_step = max(scored)
    checkpoint = run.checkpoint_dir(-neg_step)
    if not checkpoint.is_dir():
        return None, f"the best step on {bench} ({-neg_step}) has no checkpoint"
    return checkpoint, f"best on {bench} (step {-neg_step}, avg@k {score:.4f})"


@dataclass(frozen=True)
class RunPlace:
    """Where a run directory sits: its experiment (a comparison or a sweep) and its arm and seed
    there; trackers group runs by it (W&B group and job type, TensorBoard's log directory, an
    MLflow experiment)."""

    experiment: Path | None
    """the comparison or sweep directory holding the run (None: a run on its own)"""
    group: str | None
    """the experiment's name (its directory's)"""
    arm: str
    seed: int | None
    name: str
    """the run's name in its group: `<arm>-s<seed>` (a sweep's: `<arm>-<trial slot>-s<seed>`)"""
    member: str
    """the run within its arm: `s<seed>` (a sweep's: `<trial slot>-s<seed>`)"""


def run_place(run_dir: Path, config: dict[str, Any]) -> RunPlace:
    """The `RunPlace` of a run directory from the layout of comparisons (`<comparison>/runs/<arm
    slug>-s<seed>/`) and sweeps (`<sweep>/<arm slug>/<trial slot>-s<seed>/`); anything else is a
    run on its own, its arm `algo[:preset]`."""
    run_dir = Path(run_dir).resolve()
    seed = config.get("seed")
    experiment = run_dir.parent.parent
    if run_dir.parent.name == RUNS_DIR and (experiment / SPEC_FILE).exists():  # a comparison's
        slug, member = run_dir.name.rpartition("-s")[0], f"s{seed}"
        spec = read_json(experiment / SPEC_FILE)
    elif (experiment / SWEEP_SPEC_FILE).exists():  # a sweep's
        slug, member = run_dir.parent.name, run_dir.name
        spec = read_json(experiment / SWEEP_SPEC_FILE)
    else:
        preset = config.get("algo_preset")
        arm = str(config.get("algo", "run")) + (f":{preset}" if preset else "")
        return RunPlace(None, None, arm, seed, run_dir.name, run_dir.name)
    arm = next((a["name"] for a in spec.get("arms", []) if arm_slug(a["name"]) == slug), slug)
    return RunPlace(experiment, experiment.name, arm, seed, f"{arm}-{member}", member)
