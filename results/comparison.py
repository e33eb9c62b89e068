"""Reading comparisons: a `bench compare` directory, or plain run directories, as tables.

A comparison directory holds `comparison.json` (the spec: arms, seeds, budget, evaluation),
`runs/<arm>-s<seed>/` (ordinary run directories), `status/<run>.json` (each run's outcome as
its worker recorded it) and `logs/`. `load` turns one or several of them (or run directories)
into a `Comparison` of pandas frames, which tables, figures and the HTML report are made of.
Reads files only: no torch, no runtime, no scheduler.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.scoring import correct_by_problem
from results.budgets import limits_text
from results.collapse import collapse_step, deepest_fall
from results.evals import read_records, read_summary
from results.experiments import FINAL_EVAL_DIR, SPEC_FILE, RunState, arm_slug, read_status, seed_run_name
from results.files import read_json
from results.rundir import RunDir, RunOutcome


@dataclass
class Comparison:
    """What `load` returns: the spec(s) and four frames.

    - `runs`: one row per run: run, arm, seed, path, state (the worker's `RunState`), detail,
      outcome and stopped_by (as the run recorded them, `results.rundir.RunDir.read_outcome`),
      steps and the consumption (trajectories, generated_trajectories, generated_tokens,
      elapsed_s, learner_s, critic_s, critic_share, flops and critic_flops: None where not
      counted), updates_per_batch (the run's `minibatches`), collapsed and collapse_step (the rule
      of `results.collapse`) and deepest_fall (`results.collapse.deepest_fall`), selected
      checkpoint, config hash, commit, task and the budget its config sets
      (`results.budgets.limits_text`);
    - `metrics`: one row per (run, step) with every metric of metrics.jsonl (arm, seed, run);
    - `scores`: one row per problem of a final evaluation: arm, seed, run, benchmark,
      problem_id, correct and samples (how many of its samples were correct, of how many:
      `benchmarks.scoring.correct_by_problem`) and score (their fraction);
    - `summaries`: one row per (run, benchmark) of the final evaluation: avg_at_k, k,
      n_problems, version, data_hash, sampling, seed, model.
    """

    specs: list[dict[str, Any]]
    runs: pd.DataFrame
    metrics: pd.DataFrame
    scores: pd.DataFrame
    summaries: pd.DataFrame
    sources: list[Path] = field(default_factory=list)

    @property
    def arms(self) -> list[str]:
        """Arm names in the order the spec lists them (then any others, sorted)."""
        if self.runs.empty:
            return []
        listed = [a["name"] for spec in self.specs for a in spec.get("arms", [])]
        seen = list(dict.fromkeys(listed + sorted(set(self.runs["arm"]) - set(listed))))
        return [a for a in seen if a in set(self.runs["arm"])]

    @property
    def benchmarks(self) -> list[str]:
        """Benchmarks of the final evaluation (spec order, then any others)."""
        listed = [b for spec in self.specs for b in spec.get("eval", {}).get("benchmarks", [])]
        found = sorted(set(self.summaries["benchmark"])) if len(self.summaries) else []
        return list(dict.fromkeys(listed + found))

    def timeline(self, run: str) -> list[dict[str, Any]]:
        """The timeline.jsonl lines of one run."""
        path = Path(self.runs.set_index("run").loc[run, "path"])
        return RunDir(path).read_timeline()


def load(paths: list[str | Path]) -> Comparison:
    """Read comparison directories and/or run directories (module docstring). Arms are named
    as the comparison names them (a plain run: `algo[:preset]`); when the runs are of several
    tasks, `@task` is appended so that runs of different tasks never pool."""
    specs, entries, rows, metrics, scores, summaries = [], [], [], [], [], []
    for source in map(Path, paths):
        if (source / SPEC_FILE).exists():
            spec = read_json(source / SPEC_FILE)
            specs.append(spec)
            entries += _spec_runs(source, spec)
        elif (source / "config.json").exists():
            entries.append(_plain_run(source))
        else:
            raise ValueError(
                f"{source}: neither a comparison directory ({SPEC_FILE}) nor a run directory (config.json)"
            )
    if len({e["task"] for e in entries}) > 1:  # runs of different tasks are never pooled into one arm
        for e in entries:
            e["arm"] = f"{e['arm']}@{e['task']}"
    for entry in entries:
        row, run_metrics, run_scores, run_summaries = _read_run(entry)
        rows.append(row)
        metrics += run_metrics
        scores += run_scores
        summaries += run_summaries
    return Comparison(
        specs,
        pd.DataFrame(rows),
        pd.DataFrame(metrics),
        pd.DataFrame(scores),
        pd.DataFrame(summaries),
        [Path(p) for p in paths],
    )


def _spec_runs(out: Path, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every (arm, seed) of a comparison directory, started or not."""
    entries = []
    for arm in spec["arms"]:
        for seed in spec["seeds"]:
            run = seed_run_name(arm_slug(arm["name"]), seed)
            status = read_status(out, run) or {"state": RunState.PENDING}
            entries.append(
                {
                    "run": run,
                    "arm": arm["name"],
                    "seed": seed,
                    "task": spec.get("task"),
                    "path": out / "runs" / run,
                    "status": status,
                }
            )
    return entries


def _plain_run(path: Path) -> dict[str, Any]:
    """A run directory outside a comparison: its arm is `algo[:preset]`, its state the outcome
    the run recorded (`unfinished` when it never started training)."""
    run = RunDir(path)
    config = run.read_config()
    arm = config["algo"] + (f":{config['algo_preset']}" if config.get("algo_preset") else "")
    end = run.read_outcome()
    return {
        "run": path.name,
        "arm": arm,
        "seed": config.get("seed", 0),
        "task": config.get("task"),
        "path": path,
        "status": {
            "state": "unfinished" if end is None else str(end.outcome),
            "detail": "" if end is None else end.detail,
        },
    }


def _cost_columns(metric_rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """A run's median seconds per training step and the peak resident memory its steps recorded
    (GiB, learner and engine processes apart; None where its metrics lack them)."""
    steps = [m["time/step_s"] for m in metric_rows if m.get("time/step_s") is not None]
    columns: dict[str, float | None] = {"step_s": statistics.median(steps) if steps else None}
    for column, key in (
        ("learner_peak_rss_gib", "memory/learner_peak_rss_gib"),
        ("engine_peak_rss_gib", "memory/engine_peak_rss_gib"),
    ):
        values = [m[key] for m in metric_rows if m.get(key) is not None]
        columns[column] = max(values) if values else None
    return columns


def _consumption_columns(consumption: dict[str, Any]) -> dict[str, Any]:
    """The runs table's consumption columns from a run's `Consumption` record (summary.json, or
    the last step's `budget/` metrics); FLOPs None where not counted (0 or absent: a run from
    before they were)."""
    keys = (
        "trajectories",
        "generated_trajectories",
        "generated_tokens",
        "elapsed_s",
        "learner_s",
        "critic_s",
    )
    row = {key: consumption.get(key) for key in keys}
    row["flops"] = consumption.get("flops") or None
    row["critic_flops"] = None if row["flops"] is None else consumption.get("critic_flops", 0)
    learner_s, critic_s = row["learner_s"] or 0, row["critic_s"] or 0
    row["critic_share"] = critic_s / learner_s if learner_s else None
    return row


def _read_run(entry: dict[str, Any]) -> tuple[dict, list[dict], list[dict], list[dict]]:
    """(runs row, metric rows, final eval record rows, final eval summary rows) of one run."""
    path: Path = entry["path"]
    ids = {"run": entry["run"], "arm": entry["arm"], "seed": entry["seed"]}
    status = entry["status"]
    row: dict[str, Any] = {
        **ids,
        "path": str(path),
        "state": status.get("state"),
        "detail": status.get("detail", ""),
        "attempts": status.get("attempts", 0),
    }
    if not (path / "config.json").exists():
        if row["state"] == RunState.FINISHED:  # its worker finished it, its results are gone
            row["state"] = RunState.FAILED
            row["detail"] = f"recorded finished, but {path} is gone: the comparison's command trains it again"
        return row, [], [], []
    run = RunDir(path)
    config = run.read_config()
    row["config_hash"] = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
    row["updates_per_batch"] = config.get("minibatches", 1)
    row["task"], row["budget"] = config.get("task"), limits_text(config)
    env = read_json(path / "env.json") if (path / "env.json").exists() else {}
    row["commit"] = env.get("git_commit")
    summary = read_json(path / "summary.json") if (path / "summary.json").exists() else {}
    end = run.read_outcome()
    row.update(
        outcome=None if end is None else str(end.outcome),
        stopped_by=None if end is None or end.stopped_by is None else str(end.stopped_by),
        wall_s=summary.get("wall_s"),
        nonfinite_skipped=summary.get("nonfinite_skipped"),
    )
    metric_rows = [{**ids, **m} for m in run.read_metrics()]
    last = metric_rows[-1] if metric_rows else {}
    consumption = summary.get("consumption") or {
        k.removeprefix("budget/"): v for k, v in last.items() if k.startswith("budget/")
    }
    row.update(_consumption_columns(consumption))
    row["steps"] = max((m.get("step", 0) for m in metric_rows), default=0)
    rewards = [
        (m["step"], m["reward/mean"]) for m in metric_rows if m.get("step", 0) > 0 and "reward/mean" in m
    ]
    collapse = collapse_step(rewards, diverged=row["outcome"] == RunOutcome.NON_FINITE)
    row["collapsed"], row["collapse_step"] = collapse is not None, collapse  # `results.collapse`'s rule
    row["deepest_fall"] = deepest_fall(rewards)  # how near the rule's threshold it came (descriptive)
    row["stale_dropped"] = sum(m.get("rollout/stale_dropped") or 0 for m in metric_rows)
    row.update(_cost_columns(metric_rows))
    final = path / "evals" / FINAL_EVAL_DIR
    selected = final / "selected.json"
    row["selected"] = read_json(selected).get("rule") if selected.exists() else None
    scores, summaries = [], []
    for summary_path in sorted(final.glob("*.summary.json")) if final.is_dir() else []:
        s = read_summary(summary_path)
        bench = s["benchmark"]
        summaries.append(
            {
                **ids,
                "benchmark": bench,
                "avg_at_k": s["avg_at_k"],
                "k": s["k"],
                "n_problems": s["n_problems"],
                "version": s.get("version"),
                "data_hash": s.get("provenance", {}).get("data_hash"),
                "sampling": json.dumps(s.get("provenance", {}).get("sampling", {}), sort_keys=True),
                "eval_seed": s.get("provenance", {}).get("seed"),  # `summarize` keeps it there
                "model": s.get("provenance", {}).get("model"),
            }
        )
        for problem, correct in correct_by_problem(read_records(final / f"{bench}.jsonl")).items():
            scores.append(
                {
                    **ids,
                    "benchmark": bench,
                    "problem_id": problem,
                    "score": sum(correct) / len(correct),
                    "correct": sum(correct),
                    "samples": len(correct),
                }
            )
    return row, metric_rows, scores, summaries
