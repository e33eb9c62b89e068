"""A sweep's trials as a worker plays them (`sweeps.worker`): a claimed trial's parameters from
the sampler, a run per seed, the objective, pruning; then Optuna is told the outcome.

Each seed's run is an ordinary `bench run` process (`sweeps.runs.train_or_resume`; its
directory `<arm>/<slot>-s<seed>/`, its parameters in config.json, the Optuna study and trial
number added to summary.json), resumed with `--resume` when a retried trial finds it. While it
trains, the worker reads its metrics.jsonl and reports the in-training curve to Optuna
(hyperband: the objective's in-training evaluation, or the mean training reward of the last
10 steps for `reward/final`); after it, the objective: `bench eval` of the final checkpoint on
the objective's benchmark (whose per-problem scores the Wilcoxon pruner sees, step = seed
index x problems + problem index, the same ids in every trial) or the final training reward. A
pruned trial's run is killed (its directory stays); a trial's value is the mean over its seeds.

Outcomes (`TrialStatus`, in `status/<arm>/<slot>.json`): COMPLETE (a seed whose run stopped
itself, e.g. non-finite losses, is evaluated and noted in `detail`), PRUNED, FAIL (the reason
in the trial's `fail_reason`). A trial whose worker is gone is taken over by the queue (`sweeps.queue`)
and resumes its runs.
"""

from __future__ import annotations

import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import Any

from benchmarks.scoring import problem_scores
from results.evals import read_records
from results.experiments import STATUS_DIR, RunState, seed_run_name
from results.files import write_json_atomic
from results.rundir import RunDir
from sweeps.comparison import EvalPlan
from sweeps.queue import Claim, RunQueue, open_storage
from sweeps.runs import add_to_summary, evaluate_checkpoint, train_or_resume
from sweeps.search import REWARD_WINDOW, expected_reports, make_pruner, make_sampler, trial_values
from sweeps.spaces import as_layer
from sweeps.spec import Arm, load_spec
from sweeps.sweep import FINAL_REWARD, SweepSpec, arm_spaces


class TrialStatus(StrEnum):
    """A trial as its worker records it (status/<arm>/<slot>.json `state`)."""

    RUNNING = "running"
    COMPLETE = "complete"
    PRUNED = "pruned"
    FAILED = "failed"
    BUSY = "busy"
    """another live process trains one of its runs: a duplicate claim, dropped"""
    QUEUED = "queued"
    """claimed on a cluster, waiting for a node with the CPUs and GPUs it asks for"""


class Pruned(Exception):
    """The pruner stopped the trial."""


class SweepTrials:
    """The experiment of a sweep directory (`sweeps.worker.Experiment`): one queue per arm."""

    def __init__(self, out: Path, cores: list[int] | None) -> None:
        self.out, self.cores = out, cores
        self.where = ""  # the node and GPUs its runs execute on, when a cluster placed them (status `where`)
        self.spec, data = load_spec(out, SweepSpec)
        storage = open_storage(data.get("storage") or "", out / "study.journal")
        spaces = arm_spaces(data, self.spec)
        self.queues, self.arms = [], {}
        self.playing: dict[int, tuple[Any, Path]] = {}  # claimed trial id -> (its Optuna trial, status file)
        for arm in self.spec.arms:
            space = spaces[arm.name]
            queue = RunQueue(
                storage,
                self.spec.study_name(arm),
                direction=self.spec.direction,
                sampler=make_sampler(self.spec.sampler, space.params),
                pruner=make_pruner(
                    self.spec.pruner, expected_reports(self.spec, space.trajectories_per_step)
                ),
            )
            self.queues.append(queue)
            self.arms[queue.study.study_name] = (arm, space)

    def play(self, queue: RunQueue, claim: Claim) -> dict[str, Any]:
        """Sample the trial's parameters and run it (module docstring); its status record."""
        arm, space = self.arms[queue.study.study_name]
        status_path = self._status_path(queue, claim)
        status_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.time()  # the trial's wall time runs from here to its result in the storage
        trial, values = trial_values(queue, claim, space.params, space.fixed)
        running = {
            "trial": claim.number,
            "state": TrialStatus.RUNNING,
            "params": values,
            "worker": queue.worker,
            **({"where": self.where} if self.where else {}),
        }
        write_json_atomic(status_path, {**running, "started": started})
        try:
            result = TrialRun(self.out, self.spec, arm, trial, claim, values, self.cores).run()
        except Exception as exc:  # e.g. sampled parameters no config accepts: the trial fails, not the worker
            result = {"state": TrialStatus.FAILED, "detail": f"{type(exc).__name__}: {exc}"}
        result.update(
            trial=claim.number, params=values, worker=queue.worker, started=started, ended=time.time()
        )
        if self.where:
            result["where"] = self.where
        write_json_atomic(status_path, result)
        self.playing[claim.trial_id] = (trial, status_path)
        return result

    def _status_path(self, queue: RunQueue, claim: Claim) -> Path:
        arm, _ = self.arms[queue.study.study_name]
        return self.out / STATUS_DIR / arm.slug / f"{claim.run}.json"

    def run_layers(self, queue: RunQueue, claim: Claim) -> list[dict[str, Any]]:
        """The config layers of the trial's first seed's run, without its sampled parameters
        (what it asks of a cluster: `sweeps.scheduler`; a search space never holds placement)."""
        arm, _ = self.arms[queue.study.study_name]
        return self.spec.config_layers(arm, self.spec.seeds[0], {})

    def mark_queued(self, queue: RunQueue, claim: Claim, asks: str) -> None:
        """Record that a cluster holds the claimed trial until a node has what it `asks`."""
        path = self._status_path(queue, claim)
        path.parent.mkdir(parents=True, exist_ok=True)
        queued = {"trial": claim.number, "state": TrialStatus.QUEUED, "worker": queue.worker}
        write_json_atomic(path, {**queued, "asks": asks, "queued": time.time()})

    def fail_unplayed(self, queue: RunQueue, claim: Claim, reason: str) -> None:
        """The claimed trial could not be played (its cluster task was lost for good): failed."""
        write_json_atomic(
            self._status_path(queue, claim),
            {"trial": claim.number, "state": TrialStatus.FAILED, "detail": reason, "ended": time.time()},
        )
        queue.fail(claim, reason)

    def record(self, queue: RunQueue, claim: Claim, result: dict[str, Any]) -> None:
        """Tell Optuna: the value, pruned, failed (with the reason), or drop a duplicate."""
        from optuna.trial import TrialState

        trial, status_path = self.playing.pop(claim.trial_id)
        try:
            if result["state"] == TrialStatus.COMPLETE:
                trial.set_user_attr("detail", result["detail"])
                queue.study.tell(trial, result["value"])
            elif result["state"] == TrialStatus.BUSY:
                queue.drop_duplicate(claim, result["detail"])
            elif result["state"] == TrialStatus.PRUNED:
                trial.set_user_attr("detail", result["detail"])
                queue.study.tell(trial, state=TrialState.PRUNED)
            else:
                trial.set_user_attr("fail_reason", result["detail"])
                queue.study.tell(trial, state=TrialState.FAIL)
            write_json_atomic(status_path, {**result, "recorded": time.time()})
        except Exception as exc:  # taken over meanwhile: the runs' directories keep what was done
            arm, _ = self.arms[queue.study.study_name]
            print(
                f"sweep worker: trial {claim.number} of {arm.name} was finished elsewhere ({exc})",
                file=sys.stderr,
            )


class TrialRun:
    """Runs one claimed trial of `spec` for `arm` (module docstring)."""

    def __init__(
        self, out: Path, spec: SweepSpec, arm: Arm, trial: Any, claim: Claim, values: dict, cores
    ) -> None:
        self.out, self.spec, self.arm, self.trial, self.claim = out, spec, arm, trial, claim
        self.values, self.cores = values, cores
        self.reports = 0  # in-training reports so far (the hyperband step)
        self.wilcoxon = spec.pruner == "wilcoxon"

    def run(self) -> dict[str, Any]:
        """{"state": complete | pruned | failed | busy, "value", "detail", "seeds"}."""
        scores, stopped = [], []
        for index, seed in enumerate(self.spec.seeds):
            run_dir = self.out / self.arm.slug / seed_run_name(self.claim.run, seed)
            try:
                result = self._train(run_dir, seed)
                if result.state in (RunState.FAILED, RunState.BUSY):
                    state = TrialStatus.BUSY if result.state is RunState.BUSY else TrialStatus.FAILED
                    return {"state": state, "detail": result.detail}
                if result.state is RunState.STOPPED:
                    stopped.append(f"seed {seed}: {result.detail}")
                score, per_problem = self._objective(run_dir)
                if per_problem is not None and self.wilcoxon:
                    self._report_problems(index, per_problem)
            except Pruned as why:
                return {"state": TrialStatus.PRUNED, "detail": str(why)}
            except RuntimeError as exc:  # the evaluation failed
                return {"state": TrialStatus.FAILED, "detail": str(exc)}
            scores.append(score)
        return {
            "state": TrialStatus.COMPLETE,
            "value": sum(scores) / len(scores),
            "seeds": scores,
            "detail": "; ".join(stopped) or "trained to the budget",
        }

    def _train(self, run_dir: Path, seed: int):
        """Train one seed's run (or resume it), reporting its curve (`train_or_resume`)."""
        layers = self.spec.config_layers(self.arm, seed, as_layer(self.values))
        config_file = run_dir.with_name(run_dir.name + ".config.json")
        log = self.out / "logs" / self.arm.slug / f"{run_dir.name}.run.log"
        seen = [0]

        def watch() -> None:
            seen[0] = self._report_curve(RunDir(run_dir), seen[0])

        result = train_or_resume(run_dir, layers, config_file, log, self.cores, watch)
        if result.state is not RunState.FAILED:
            trial = {"study": self.trial.study.study_name, "trial": self.claim.number, "params": self.values}
            add_to_summary(run_dir, "optuna", trial)
        return result

    def _report_curve(self, run: RunDir, seen: int) -> int:
        """Report the run's new in-training values (hyperband); raise Pruned when told to stop."""
        rows = run.read_metrics() if run.metrics_path.exists() else []
        if self.wilcoxon:
            return len(rows)
        key = None if self.spec.objective == FINAL_REWARD else self.spec.objective
        for i in range(seen, len(rows)):
            row = rows[i]
            if key is not None and row.get(key) is not None and row.get("step", 0) > 0:
                value = row[key]
            elif key is None and row.get("step", 0) > 0 and row["step"] % REWARD_WINDOW == 0:
                window = [r.get("reward/mean") for r in rows[max(0, i - REWARD_WINDOW + 1) : i + 1]]
                value = sum(v for v in window if v is not None) / max(1, sum(v is not None for v in window))
            else:
                continue
            self.reports += 1
            self.trial.report(float(value), self.reports)
            if self.trial.should_prune():
                raise Pruned(f"pruned at report {self.reports} (step {row['step']}): {value:.4f}")
        return len(rows)

    def _objective(self, run_dir: Path) -> tuple[float, list[float] | None]:
        """(the seed's objective, its per-problem scores for an eval objective)."""
        if self.spec.objective == FINAL_REWARD:
            rewards = [
                r["reward/mean"] for r in RunDir(run_dir).read_metrics() if r.get("reward/mean") is not None
            ]
            tail = rewards[-max(REWARD_WINDOW, len(rewards) // 10) :]
            return (sum(tail) / len(tail) if tail else 0.0), None
        bench = self.spec.objective_bench
        plan = EvalPlan((bench,), k=self.spec.eval_k, limit=self.spec.eval_limit, seed=self.spec.eval_seed)
        log = self.out / "logs" / self.arm.slug / f"{run_dir.name}.eval.log"
        ok, detail = evaluate_checkpoint(run_dir, plan, log, self.cores)
        if not ok:
            raise RuntimeError(f"evaluation failed: {detail}")
        scores = list(problem_scores(read_records(run_dir / "evals" / "final" / f"{bench}.jsonl")).values())
        return sum(scores) / len(scores), scores

    def _report_problems(self, seed_index: int, scores: list[float]) -> None:
        """Per-problem scores to the Wilcoxon pruner, with stable (seed, problem) step ids."""
        for j, score in enumerate(scores):
            self.trial.report(score, seed_index * len(scores) + j)
        if self.trial.should_prune():
            raise Pruned(
                f"pruned after seed {self.spec.seeds[seed_index]}'s evaluation (Wilcoxon vs the best trial)"
            )
