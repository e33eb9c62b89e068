"""A comparison's runs as a worker plays them (`sweeps.worker`): train the claimed (arm, seed)
run to the budget (`sweeps.runs.train_or_resume`: a fresh `bench run`, or `--resume` of a run a
dead worker left behind, which continues from its last intact checkpoint), then evaluate its
selected checkpoint with `bench eval`, the same code as a user's, with the comparison's
evaluation seed, into `runs/<run>/evals/final/`.

Outcomes, written to `status/<run>.json` for reports (`results.experiments.RunState`) and to
the study for the scheduler: `finished` (the budget was spent), `stopped` (the run ended
itself: non-finite losses, starved rollouts; kept, evaluated if it has a checkpoint, and
reported as such) or `failed` (a crash, a kill, an evaluation that failed). Logs:
`logs/<run>.run.log` and `logs/<run>.eval.log`, appended across attempts.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from results.experiments import STATUS_DIR, RunState, read_status
from results.files import read_json, write_json_atomic
from sweeps.comparison import ComparisonSpec
from sweeps.queue import Claim, RunQueue, open_storage
from sweeps.runs import evaluate_checkpoint, train_or_resume
from sweeps.spec import load_spec

RUNS_DIR, LOGS_DIR, CONFIGS_DIR = "runs", "logs", "configs"


class ComparisonRuns:
    """The experiment of a comparison directory (`sweeps.worker.Experiment`)."""

    def __init__(self, out: Path, cores: list[int] | None) -> None:
        self.out, self.cores = out, cores
        self.where = ""  # the node and GPUs its runs execute on, when a cluster placed them (status `where`)
        self.spec, data = load_spec(out, ComparisonSpec)
        storage = open_storage(data.get("storage") or "", out / "study.journal")
        self.queues = [RunQueue(storage, data["study"])]

    def play(self, queue: RunQueue, claim: Claim) -> dict[str, Any]:
        """Train and evaluate the claimed run; its status record (also written to status/)."""
        out, name = self.out, claim.run
        previous = read_status(out, name) or {}
        status = {
            "run": name,
            "trial": claim.number,
            "worker": queue.worker,
            "state": RunState.RUNNING,
            "attempts": previous.get("attempts", 0) + 1,
            "started": time.time(),
            **({"where": self.where} if self.where else {}),
        }
        _write_status(out, status)
        layers = self.run_layers(queue, claim)
        config_file, log = out / CONFIGS_DIR / f"{name}.json", out / LOGS_DIR / f"{name}.run.log"
        result = train_or_resume(out / RUNS_DIR / name, layers, config_file, log, self.cores)
        if result.state is RunState.BUSY:  # another worker's process is training it: its status stays theirs
            if previous:
                _write_status(out, previous)
            return {**status, "state": RunState.BUSY, "detail": result.detail}
        status.update(state=result.state, detail=result.detail)
        if result.state in (RunState.FINISHED, RunState.STOPPED):
            ok, why = self.evaluate(name)
            if not ok and result.state is RunState.FINISHED:
                status.update(state=RunState.FAILED, detail=why)
            status["evaluation"] = why
        status["ended"] = time.time()
        _write_status(out, status)
        return status

    def run_layers(self, queue: RunQueue, claim: Claim) -> list[dict[str, Any]]:
        """The config layers of the claimed run (what it asks of a cluster: `sweeps.scheduler`).
        A run this worker's spec does not know is a seed that a later command added
        (`ExperimentSpec.seeds_added_to`): the spec file is read again."""
        if claim.run not in self.spec.run_names():
            self.spec, _ = load_spec(self.out, ComparisonSpec)
        return self.spec.config_layers(*self.spec.arm_and_seed(claim.run))

    def mark_queued(self, queue: RunQueue, claim: Claim, asks: str) -> None:
        """Record that a cluster holds the claimed run until a node has what it `asks`."""
        previous = read_status(self.out, claim.run) or {}
        queued = {"run": claim.run, "trial": claim.number, "worker": queue.worker, "state": RunState.QUEUED}
        _write_status(
            self.out, {**queued, "asks": asks, "queued": time.time(), "attempts": previous.get("attempts", 0)}
        )

    def fail_unplayed(self, queue: RunQueue, claim: Claim, reason: str) -> None:
        """The claimed run could not be played (its cluster task was lost for good): failed."""
        previous = read_status(self.out, claim.run) or {}
        _write_status(
            self.out,
            {**previous, "run": claim.run, "state": RunState.FAILED, "detail": reason, "ended": time.time()},
        )
        queue.fail(claim, reason)

    def evaluate(self, name: str) -> tuple[bool, str]:
        """Evaluate the run's selected checkpoint on the reported benchmarks: (ok, detail)."""
        if not self.spec.eval.benchmarks:
            return True, "no benchmarks to evaluate"
        log = self.out / LOGS_DIR / f"{name}.eval.log"
        return evaluate_checkpoint(self.out / RUNS_DIR / name, self.spec.eval, log, self.cores)

    def record(self, queue: RunQueue, claim: Claim, status: dict[str, Any]) -> None:
        """A duplicate is dropped, a failure failed, anything else finished with its value."""
        if status["state"] == RunState.BUSY:
            queue.drop_duplicate(claim, status["detail"])
        elif status["state"] == RunState.FAILED:
            queue.fail(claim, status["detail"])
        else:
            attrs = {k: status.get(k, "") for k in ("state", "detail", "evaluation")}
            queue.finish(claim, self.value(claim.run), attrs)

    def value(self, name: str) -> float:
        """The trial's value: the mean score on the first reported benchmark (NaN without one)."""
        if not self.spec.eval.benchmarks:
            return float("nan")
        bench = self.spec.eval.benchmarks[0]
        path = self.out / RUNS_DIR / name / "evals" / "final" / f"{bench}.summary.json"
        return float(read_json(path)["avg_at_k"]) if path.exists() else float("nan")


def _write_status(out: Path, status: dict[str, Any]) -> None:
    path = out / STATUS_DIR / f"{status['run']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, status)
