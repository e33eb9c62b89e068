"""Numbers about a finished run, sent to the trackers it trained with (its config's `report_to`):
its final evaluation (`final/<benchmark>/...`, when `bench eval` writes into the run's evals/)
and the report's headline numbers for its arm (`report/<benchmark>/...`, from `bench report` and
`bench compare`). Each reopens the run's tracker runs (the same W&B id, MLflow run, TensorBoard
directory) and logs at the run's last step; a tracker that fails only warns.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.trackers import open_trackers
from results.files import read_json
from results.rundir import RunDir

if TYPE_CHECKING:  # pandas and the report only for the annotations: bench eval needs neither
    import pandas as pd

    from results.report import ReportPaths


def log_to_run(run_dir: Path, metrics: dict[str, float]) -> bool:
    """Send `metrics` to the trackers of the run in `run_dir` as numbers about the whole run, at its
    last step; False when the run has no tracker (or none could start)."""
    config_path = Path(run_dir) / "config.json"
    if not config_path.exists():
        return False
    config = read_json(config_path)
    if not config.get("report_to") or config.get("report_to") == "none":
        return False
    try:
        trackers = open_trackers(config["report_to"], run_dir, config)
    except Exception as exc:  # noqa: BLE001 - a tracker must never fail the evaluation or the report
        print(f"bench: warning: {run_dir}: trackers not reopened ({exc})", file=sys.stderr)
        return False
    rows = RunDir(run_dir).read_metrics()
    step = int(rows[-1].get("step", 0)) if rows else 0
    finite = {k: float(v) for k, v in metrics.items() if isinstance(v, int | float) and math.isfinite(v)}
    trackers.summarize(step, finite)
    trackers.close()
    return True


def evaluated_run(out: Path) -> Path | None:
    """The run directory an evaluation written to `out` belongs to (`<run>/evals/<name>`), or None."""
    out = Path(out).resolve()
    run = out.parent.parent
    return run if out.parent.name == "evals" and (run / "config.json").exists() else None


def log_final_evaluation(out: Path, summaries: list[Mapping[str, Any]]) -> bool:
    """The evaluation summaries written to `out` as `final/<benchmark>/...` of its run, when `out`
    is a run's evals/ folder (a comparison's final evaluation is); False otherwise."""
    from benchmarks.scoring import eval_metrics

    run = evaluated_run(out)
    if run is None or not summaries:
        return False
    metrics = {}
    for summary in summaries:
        metrics.update({"final/" + k.removeprefix("eval/"): v for k, v in eval_metrics(summary).items()})
    return log_to_run(run, metrics)


def report_metrics(arm: str, scores: pd.DataFrame, diffs: pd.DataFrame) -> dict[str, float]:
    """The report's headline numbers of one arm (fractions, as metrics are): its score and 95% CI on
    each benchmark, and its differences with their intervals (`report/<bench>/diff_vs_<other>`)."""
    out: dict[str, float] = {}
    for r in scores[scores["arm"] == arm].itertuples() if len(scores) else ():
        ns = f"report/{r.benchmark}/"
        out.update({ns + "score": r.mean, ns + "score_ci_low": r.ci_low, ns + "score_ci_high": r.ci_high})
    for r in diffs[diffs["arm"] == arm].itertuples() if len(diffs) else ():
        ns = f"report/{r.benchmark}/diff_vs_{r.baseline}"
        out.update({ns: r.diff, ns + "_ci_low": r.ci_low, ns + "_ci_high": r.ci_high})
        out.update({ns + "_seed_ci_low": r.welch_low, ns + "_seed_ci_high": r.welch_high})
    return out


def log_report(paths: ReportPaths) -> int:
    """The headline numbers of a report (`results.report.ReportPaths`) to every run of it that has
    trackers, each its arm's; says so and returns how many runs got them."""
    runs, sent = paths.comparison.runs, 0
    for arm, path in runs[["arm", "path"]].itertuples(index=False) if len(runs) else ():
        metrics = report_metrics(arm, paths.scores, paths.differences)
        if metrics and Path(path).exists():
            sent += log_to_run(Path(path), metrics)
    if sent:
        print(f"the report's numbers went to the trackers of {sent} run(s)")
    return sent
