"""One sweep trial: its parameters from the sampler, a run per seed, the objective, pruning.

Each seed's run is an ordinary `bench run` process (its directory `<arm>/<slot>-s<seed>/`, its
parameters in config.json, the Optuna study and trial number added to summary.json), resumed
with `--resume` when a retried trial finds it. While it trains, the worker reads its
metrics.jsonl and reports the in-training curve to Optuna (hyperband: the objective's
in-training evaluation, or the mean training reward of the last 10 steps for `reward/final`);
after it, the objective: `bench eval` of the final checkpoint on the objective's benchmark
(whose per-problem scores the Wilcoxon pruner sees, step = seed index x problems + problem
index, the same ids in every trial) or the final training reward. A pruned trial's run is
killed (its directory stays); a trial's value is the mean over its seeds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from results.rundir import RunDir, write_json_atomic
from sweeps.grid import Arm, EvalPlan
from sweeps.processes import outcome, start_bench
from sweeps.queue import Claim, RunQueue
from sweeps.spaces import Param, as_layer
from sweeps.study import FINAL_REWARD, SweepSpec
from sweeps.worker import evaluate_checkpoint

REWARD_WINDOW = 10  # steps averaged into one reward report / the final reward
POLL_S = 1.0


class Pruned(Exception):
    """The pruner stopped the trial."""


def suggest(trial: Any, p: Param) -> Any:
    """The trial's value of `p` (the sampler's choice, or the enqueued fixed value)."""
    if p.kind == "float":
        return trial.suggest_float(p.name, p.low, p.high, log=p.log)
    if p.kind == "int":
        return trial.suggest_int(p.name, int(p.low), int(p.high), log=p.log)
    return trial.suggest_categorical(p.name, list(p.choices))


def trial_values(
    queue: RunQueue, claim: Claim, params: list[Param], fixed: dict[str, Any]
) -> tuple[Any, dict]:
    """(the Optuna Trial of a claimed trial, its parameter values), as `study.ask` would make them."""
    import optuna

    study = queue.study
    study.sampler.before_trial(study, queue.storage.get_trial(claim.trial_id))
    trial = optuna.trial.Trial(study, claim.trial_id)
    return trial, {**fixed, **{p.name: suggest(trial, p) for p in params}}


class TrialRun:
    """Runs one claimed trial of `spec` for `arm` (module docstring)."""

    def __init__(
        self, out: Path, spec: SweepSpec, arm: Arm, trial: Any, claim: Claim, values: dict, cores
    ) -> None:
        self.out, self.spec, self.arm, self.trial, self.claim, self.values, self.cores = (
            out,
            spec,
            arm,
            trial,
            claim,
            values,
            cores,
        )
        self.reports = 0  # in-training reports so far (the hyperband step)
        self.wilcoxon = spec.pruner == "wilcoxon"

    def run(self) -> dict[str, Any]:
        """{"state": complete | pruned | failed, "value", "detail", "seeds"}."""
        scores, stopped = [], []
        for index, seed in enumerate(self.spec.seeds):
            run_dir = self.out / self.arm.slug / f"{self.claim.run}-s{seed}"
            try:
                state, detail = self._train(run_dir, seed)
                if state in ("failed", "busy"):
                    return {"state": state, "detail": detail}
                if state == "stopped":
                    stopped.append(f"seed {seed}: {detail}")
                score, per_problem = self._objective(run_dir)
                if per_problem is not None and self.wilcoxon:
                    self._report_problems(index, per_problem)
            except Pruned as why:
                return {"state": "pruned", "detail": str(why)}
            except RuntimeError as exc:  # the evaluation failed
                return {"state": "failed", "detail": str(exc)}
            scores.append(score)
        return {
            "state": "complete",
            "value": sum(scores) / len(scores),
            "seeds": scores,
            "detail": "; ".join(stopped) or "trained to the budget",
        }

    def _train(self, run_dir: Path, seed: int) -> tuple[str, str]:
        """Train one seed's run (or resume it), reporting its curve; ("finished"|..., detail)."""
        from bench.config import build_config

        summary = run_dir / "summary.json"
        if summary.exists() and json.loads(summary.read_text()).get("stopped_by"):
            return "finished", "already trained"
        if (run_dir / "config.json").exists():
            args = ["run", "--resume", str(run_dir)]
        else:
            layers = self.spec.config_layers(self.arm, seed, as_layer(self.values))
            config_file = run_dir.with_name(run_dir.name + ".config.json")
            config_file.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(config_file, build_config(*layers).to_dict())
            args = ["run", "--config", str(config_file), "--out", str(run_dir)]
        log = self.out / "logs" / self.arm.slug / f"{run_dir.name}.run.log"
        proc = start_bench([*args, "--no-progress"], log, self.cores)
        seen = 0
        try:
            while True:
                done = proc.poll() is not None
                seen = self._report_curve(RunDir(run_dir), seen)
                if done:
                    break
                time.sleep(POLL_S)
        except Pruned:
            proc.kill()
            proc.wait()
            raise
        state, detail = outcome(proc.returncode, log)
        if state != "failed" and summary.exists():
            data = json.loads(summary.read_text())
            data["optuna"] = {
                "study": self.trial.study.study_name,
                "trial": self.claim.number,
                "params": self.values,
            }
            write_json_atomic(summary, data)
        return state, detail

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
        return per_problem_scores(run_dir / "evals" / "final" / f"{bench}.jsonl")

    def _report_problems(self, seed_index: int, scores: list[float]) -> None:
        """Per-problem scores to the Wilcoxon pruner, with stable (seed, problem) step ids."""
        for j, score in enumerate(scores):
            self.trial.report(score, seed_index * len(scores) + j)
        if self.trial.should_prune():
            raise Pruned(
                f"pruned after seed {self.spec.seeds[seed_index]}'s evaluation (Wilcoxon vs the best trial)"
            )


def per_problem_scores(records: Path) -> tuple[float, list[float]]:
    """(avg@k, the per-problem fraction correct in the file's problem order) of a record file."""
    by_problem: dict[str, list[bool]] = {}
    for line in records.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            by_problem.setdefault(r["problem_id"], []).append(bool(r["correct"]))
    scores = [sum(v) / len(v) for v in by_problem.values()]
    return sum(scores) / len(scores), scores
