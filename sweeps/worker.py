"""A comparison worker: take the next run from the queue, train it, evaluate its checkpoint,
record the outcome; repeat until no run is left. `bench compare` starts `--workers` of them;
starting the same command on other machines (same `--storage` and a shared `--out`) adds more.

    python -m sweeps.worker COMPARISON_DIR [--cores 0,1]

Each run is its own `bench run` process (a crashed run cannot take the worker down), started
fresh or with `--resume` (a run a dead worker left behind continues from its last intact
checkpoint), pinned to the worker's cores and killed if the worker dies (parent-death
signal), so a taken-over run is never trained twice at once. Its checkpoint is then
evaluated by a `bench eval` process, the same code as a user's `bench eval`, with the
comparison's evaluation seed, into `runs/<run>/evals/final/`.

Outcomes, written to `status/<run>.json` for reports (and to the study for the scheduler):
`finished` (the budget was spent), `stopped` (the run ended itself: diverged, non-finite
losses, starved rollouts; kept, evaluated if it has a checkpoint, and reported as such) or
`failed` (a crash, an evaluation that failed; the reason is the last line of its log).
Logs: `logs/<run>.run.log` and `logs/<run>.eval.log`, appended across attempts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from results.comparison import STATUS_DIR, read_status, select_checkpoint
from results.rundir import RunDir, write_json_atomic
from sweeps.grid import ComparisonSpec, EvalPlan, load_spec
from sweeps.processes import last_line, outcome, run_bench
from sweeps.queue import LEASE_S, Claim, RunQueue, open_storage

RUNS_DIR, LOGS_DIR, CONFIGS_DIR = "runs", "logs", "configs"


def train_run(out: Path, spec: ComparisonSpec, name: str, cores: list[int] | None) -> tuple[str, str]:
    """Train (or resume) one run to its budget: ("finished" | "stopped" | "failed", detail)."""
    run = RunDir(out / RUNS_DIR / name)
    summary = run.path / "summary.json"
    if summary.exists() and json.loads(summary.read_text()).get("stopped_by") is not None:
        return "finished", "already trained"
    if (run.path / "config.json").exists():
        args = ["run", "--resume", str(run.path)]
    else:
        from bench.config import build_config

        arm, seed = spec.arm_and_seed(name)
        config_file = out / CONFIGS_DIR / f"{name}.json"
        config_file.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(config_file, build_config(*spec.config_layers(arm, seed)).to_dict())
        args = ["run", "--config", str(config_file), "--out", str(run.path)]
    log = out / LOGS_DIR / f"{name}.run.log"
    state, detail = outcome(run_bench([*args, "--no-progress"], log, cores), log)
    if state == "finished":
        detail = json.loads(summary.read_text()).get("stopped_by", "")
    return state, detail


def evaluate_run(out: Path, spec: ComparisonSpec, name: str, cores: list[int] | None) -> tuple[bool, str]:
    """Evaluate the run's selected checkpoint on the reported benchmarks: (ok, detail)."""
    if not spec.eval.benchmarks:
        return True, "no benchmarks to evaluate"
    log = out / LOGS_DIR / f"{name}.eval.log"
    return evaluate_checkpoint(out / RUNS_DIR / name, spec.eval, log, cores)


def evaluate_checkpoint(
    run_dir: Path, plan: EvalPlan, log: Path, cores: list[int] | None
) -> tuple[bool, str]:
    """Evaluate `run_dir`'s checkpoint chosen by `plan.select` on `plan.benchmarks` with `bench
    eval` into `run_dir/evals/final/` (resumable, like any `bench eval`): (ok, detail)."""
    checkpoint, why = select_checkpoint(run_dir, plan.select)
    if checkpoint is None:
        return False, why
    args = [
        "eval",
        "--model",
        str(checkpoint),
        "--bench",
        ",".join(plan.benchmarks),
        "--k",
        str(plan.k),
        "--seed",
        str(plan.seed),
        "--out",
        str(run_dir / "evals" / "final"),
        "--no-progress",
    ]
    if plan.limit is not None:
        args += ["--limit", str(plan.limit)]
    code = run_bench(args, log, cores)
    if code != 0:
        return False, f"bench eval exited with {code}: {last_line(log)}"
    write_json_atomic(
        run_dir / "evals" / "final" / "selected.json", {"checkpoint": str(checkpoint), "rule": why}
    )
    return True, why


def play(
    out: Path, spec: ComparisonSpec, claim: Claim, worker: str, cores: list[int] | None
) -> dict[str, Any]:
    """Train and evaluate the claimed run; its status record (also written to status/)."""
    previous = read_status(out, claim.run) or {}
    status = {
        "run": claim.run,
        "trial": claim.number,
        "worker": worker,
        "state": "running",
        "attempts": previous.get("attempts", 0) + 1,
        "started": time.time(),
    }
    _write_status(out, status)
    state, detail = train_run(out, spec, claim.run, cores)
    if state == "busy":  # another worker's process is training it: its status stays theirs
        if previous:
            _write_status(out, previous)
        return {**status, "state": "busy", "detail": detail}
    status.update(state=state, detail=detail)
    if state in ("finished", "stopped"):
        ok, why = evaluate_run(out, spec, claim.run, cores)
        if not ok and state == "finished":
            status.update(state="failed", detail=why)
        status["evaluation"] = why
    status["ended"] = time.time()
    _write_status(out, status)
    return status


def _write_status(out: Path, status: dict[str, Any]) -> None:
    path = out / STATUS_DIR / f"{status['run']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, status)


def work(out: Path, cores: list[int] | None = None, poll_s: float = 2.0) -> int:
    """The worker loop (module docstring); returns 0 when no run is left to do."""
    spec, data = load_spec(out)
    storage = open_storage(data.get("storage") or "", out / "study.journal")
    queue = RunQueue(storage, data["study"], lease_s=float(data.get("lease_s", LEASE_S)))
    while True:
        claim = queue.claim()
        if claim is None:
            if queue.pending() == 0:
                return 0
            time.sleep(poll_s)  # runs held by live workers: wait, to take over any that dies
            continue
        stop = queue.keep_alive(claim)
        try:
            status = play(out, spec, claim, queue.worker, cores)
        finally:
            stop.set()
        if status["state"] == "busy":
            queue.drop_duplicate(claim, status["detail"])
        elif status["state"] == "failed":
            queue.fail(claim, status["detail"])
        else:
            attrs = {k: status.get(k, "") for k in ("state", "detail", "evaluation")}
            queue.finish(claim, _value(out, spec, claim.run), attrs)


def _value(out: Path, spec: ComparisonSpec, name: str) -> float:
    """The trial's value: the mean score on the first reported benchmark (NaN without one)."""
    if not spec.eval.benchmarks:
        return float("nan")
    path = out / RUNS_DIR / name / "evals" / "final" / f"{spec.eval.benchmarks[0]}.summary.json"
    return float(json.loads(path.read_text())["avg_at_k"]) if path.exists() else float("nan")


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m sweeps.worker`."""
    p = argparse.ArgumentParser(prog="python -m sweeps.worker", description=__doc__.splitlines()[0])
    p.add_argument("comparison_dir", type=Path)
    p.add_argument(
        "--cores", default=None, help="comma-separated CPU cores for this worker's runs (default: all)"
    )
    args = p.parse_args(argv)
    cores = [int(c) for c in args.cores.split(",")] if args.cores else None
    return work(args.comparison_dir, cores)


if __name__ == "__main__":
    sys.exit(main())
