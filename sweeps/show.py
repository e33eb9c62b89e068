"""`bench sweep --show`: a sweep's results from its storage, as text, a summary file and plots.

For every arm's study: trial counts by state, the best trials with their parameters, every
trial's state, value and intermediate values (the report's history and rung plots), the
parameter importances (Optuna's default evaluator; shown from 2 finished trials with a varying
parameter), and Optuna's matplotlib plots (optimisation history, parallel coordinates,
importances, slices, intermediate values) as PNG and SVG under `plots/<arm>/`, and the
machinery's share of the completed trials' wall time (`trial_overheads`). The summary
(`sweep_summary.json`) is what `bench report SWEEP_DIR` and `bench compare --params-from-sweep`
read; results/ never opens the storage itself.
"""

from __future__ import annotations

import statistics
import warnings
from pathlib import Path
from typing import Any

from results.experiments import STATUS_DIR, seed_run_name
from results.files import read_json, write_json_atomic
from results.tables import format_table
from sweeps.errors import ExperimentError
from sweeps.queue import open_storage, was_taken_over
from sweeps.spec import load_spec
from sweeps.sweep import SweepSpec

SUMMARY_FILE = "sweep_summary.json"
PLOTS = ("optimization_history", "parallel_coordinate", "param_importances", "slice", "intermediate_values")


def summarize_study(study: Any, top: int = 10) -> dict[str, Any]:
    """Counts, best trial, top trials and importances of one study (JSON-ready)."""
    trials = study.get_trials(deepcopy=False)
    counts: dict[str, int] = {}
    for t in trials:
        if t.user_attrs.get("duplicate"):
            continue
        state = "TAKEN_OVER" if was_taken_over(t) else t.state.name  # its slot ran again in a later trial
        counts[state] = counts.get(state, 0) + 1
    done = [t for t in trials if t.state.name == "COMPLETE" and t.value is not None]
    reverse = study.direction.name == "MAXIMIZE"
    ranked = sorted(done, key=lambda t: t.value, reverse=reverse)
    rows = [
        {"trial": t.number, "value": t.value, "params": t.params, "detail": t.user_attrs.get("detail", "")}
        for t in ranked[:top]
    ]
    failed = [
        {
            "trial": t.number,
            "state": t.state.name,
            "reason": t.user_attrs.get("fail_reason") or t.user_attrs.get("detail", ""),
        }
        for t in trials
        if t.state.name in ("FAIL", "PRUNED") and not t.user_attrs.get("duplicate")
    ]
    return {
        "study": study.study_name,
        "direction": study.direction.name.lower(),
        "counts": counts,
        "best": rows[0] if rows else None,
        "top": rows,
        "not_completed": failed,
        "importances": _importances(study, done),
        "trials": [_trial(t) for t in trials if not t.user_attrs.get("duplicate")],
    }


def _trial(t: Any) -> dict[str, Any]:
    """One trial for the report's history and rung plots: number, slot (`trial-000` holds the
    paper's defaults), state, value and what it reported to the pruner, (step, value) in step order."""
    return {
        "trial": t.number,
        "slot": t.user_attrs.get("run"),
        "state": t.state.name,
        "value": t.value,
        "intermediate": sorted([int(k), float(v)] for k, v in t.intermediate_values.items()),
    }


def _importances(study: Any, done: list) -> dict[str, float]:
    import optuna

    varying = {k for t in done for k in t.params if len({str(u.params.get(k)) for u in done}) > 1}
    if len(done) < 2 or not varying:
        return {}
    try:
        return {k: float(v) for k, v in optuna.importance.get_param_importances(study).items()}
    except (RuntimeError, ValueError):  # too few distinct trials for the evaluator
        return {}


def write_plots(study: Any, out: Path) -> list[Path]:
    """Optuna's matplotlib plots of `study` as PNG and SVG in `out` (a plot that needs more
    trials than there are is skipped)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna.visualization.matplotlib as vis

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in PLOTS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = getattr(vis, f"plot_{name}")(study)
        except (ValueError, RuntimeError, TypeError):
            continue
        axes = result.flatten()[0] if hasattr(result, "flatten") else result
        fig = axes.figure
        fig.set_size_inches(max(fig.get_size_inches()[0], 7), max(fig.get_size_inches()[1], 4.5))
        for ext in ("png", "svg"):
            path = out / f"{name}.{ext}"
            fig.savefig(path, dpi=110, bbox_inches="tight")
            written.append(path)
        plt.close(fig)
    return written


def show(out: Path, plots: bool = True) -> str:
    """Summarise every study of the sweep in `out`: the text to print (also writes
    sweep_summary.json and, with `plots`, the plots)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)  # "no complete trials yet" is in the counts
    spec, data = load_spec(out, SweepSpec)
    storage = open_storage(data.get("storage") or "", out / "study.journal")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    summary: dict[str, Any] = {"sweep": _describe(spec), "arms": {}}
    lines = [summary["sweep"]]
    for arm in spec.arms:
        study = optuna.load_study(study_name=spec.study_name(arm), storage=storage)
        arm_summary = summarize_study(study)
        if plots:
            arm_summary["plots"] = [
                str(p.relative_to(out)) for p in write_plots(study, out / "plots" / arm.slug)
            ]
        arm_summary["overhead"] = trial_overheads(out, spec, arm)
        summary["arms"][arm.name] = arm_summary
        lines += ["", _arm_text(arm.name, arm_summary)]
    write_json_atomic(out / SUMMARY_FILE, summary)
    target = f"{out / 'study.journal'}" if not data.get("storage") else data["storage"]
    lines += [
        "",
        f"live dashboard (pip install -e '.[dashboard]'): optuna-dashboard --host 127.0.0.1 {target}",
    ]
    return "\n".join(lines)


def trial_overheads(out: Path, spec: SweepSpec, arm: Any) -> dict[str, Any]:
    """The sweep machinery's share of each completed trial's wall time.

    A trial's wall time runs from its claim to its result in the storage (its status file);
    the work in it is each seed's training as the run measures it (summary.json `wall_s`,
    in-training evaluations included) and the final evaluation's generation (`wall_seconds`
    of its summary). The rest is overhead: sampling, storage, claims, starting the run and
    eval processes and loading their models, polling. Median and max over completed trials;
    a trial whose run directories are gone (deleted, lost with a machine: its value is still
    the study's) is left out and counted in `without_runs`."""
    rows, without_runs = [], 0
    for status in sorted((out / STATUS_DIR / arm.slug).glob("*.json")):
        st = read_json(status)
        if st.get("state") != "complete" or "started" not in st:
            continue
        run_dirs = [out / arm.slug / seed_run_name(status.stem, seed) for seed in spec.seeds]
        if not all((run_dir / "summary.json").is_file() for run_dir in run_dirs):
            without_runs += 1
            continue
        wall = st.get("recorded", st["ended"]) - st["started"]
        work = 0.0
        for run_dir in run_dirs:
            work += read_json(run_dir / "summary.json").get("wall_s", 0.0)
            for ev in (run_dir / "evals" / "final").glob("*.summary.json"):
                work += read_json(ev).get("wall_seconds", 0.0)
        rows.append({"trial": st["trial"], "wall_s": wall, "work_s": work, "overhead": (wall - work) / wall})
    if not rows:
        return {"without_runs": without_runs} if without_runs else {}
    shares = [r["overhead"] for r in rows]
    return {
        "median": statistics.median(shares),
        "max": max(shares),
        "n_trials": len(rows),
        "trials": rows,
        "without_runs": without_runs,
    }


def _describe(spec: SweepSpec) -> str:
    kind, amount = spec.budget
    return (
        f"sweep of {', '.join(a.name for a in spec.arms)} on {spec.task}: {spec.trials} trials each, "
        f"budget {kind}={amount} x {len(spec.seeds)} seed(s), objective {spec.objective} ({spec.direction}), "
        f"sampler {spec.sampler}, pruner {spec.pruner}"
    )


def _arm_text(name: str, s: dict[str, Any]) -> str:
    counts = ", ".join(f"{n} {state.lower()}" for state, n in sorted(s["counts"].items()))
    rows = [
        {
            "trial": r["trial"],
            "value": f"{r['value']:.4f}",
            "params": ", ".join(f"{k}={_short(v)}" for k, v in r["params"].items()),
        }
        for r in s["top"][:5]
    ]
    text = f"{name}: {counts}"
    if rows:
        text += "\n" + format_table(rows, ["trial", "value", "params"])
    o = s.get("overhead") or {}
    if o.get("n_trials"):
        text += (
            f"\nsweep overhead: median {o['median']:.1%} (max {o['max']:.1%}) of a completed trial's "
            f"wall time over {o['n_trials']} trial(s)"
        )
    if o.get("without_runs"):
        text += (
            f"\n{o['without_runs']} completed trial(s) have no run directory left (deleted or lost): "
            "their values are the study's; their curves and records are gone"
        )
    if s["importances"]:
        text += "\nimportances: " + ", ".join(f"{k} {v:.2f}" for k, v in s["importances"].items())
    return text


def _short(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


# What every arm of a tuned comparison must have been tuned with, so no arm had more search.
SAME_TUNING = (
    "task",
    "trials",
    "budget",
    "seeds",
    "objective",
    "eval_k",
    "eval_limit",
    "eval_every",
    "eval_seed",
    "pruner",
    "sampler",
    "shared",
)


def best_arms(sweep_dirs: list[Path]) -> tuple[list, dict[str, Any]]:
    """The sweeps' arms with their best trial's parameters (for `bench compare
    --params-from-sweep`), and what their tuning cost: trials, budget, seeds, objective.

    Several sweep directories (e.g. one swept earlier for SAO, one for the other arms) must agree
    on everything in SAME_TUNING: a fair comparison gives every arm the same search."""
    import optuna

    loaded = [(Path(d), *load_spec(Path(d), SweepSpec)) for d in sweep_dirs]
    first_dir, first, _ = loaded[0]
    for other_dir, other, _ in loaded[1:]:
        for key in SAME_TUNING:
            if getattr(other, key) != getattr(first, key):
                raise ExperimentError(
                    f"--params-from-sweep: {first_dir} and {other_dir} differ in {key} "
                    f"({getattr(first, key)!r} vs {getattr(other, key)!r}); every arm needs the same tuning"
                )
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    arms, best = [], {}
    for out, spec, data in loaded:
        for arm, params in _best_of_sweep(out, spec, data):
            if arm.name in best:
                raise ExperimentError(f"--params-from-sweep: arm {arm.name} is in more than one sweep")
            arms.append(arm)
            best[arm.name] = params
    tuning = {
        "sweep": ", ".join(str(d) for d, _, _ in loaded),
        "trials_per_arm": first.trials,
        "budget": list(first.budget),
        "seeds": list(first.seeds),
        "objective": first.objective,
        "best": best,
        "task": first.task,
    }
    return arms, tuning


def _best_of_sweep(out: Path, spec: SweepSpec, data: dict[str, Any]) -> list[tuple[Any, dict[str, Any]]]:
    """(arm with its best trial's parameters, {trial, value, params}) of every arm of one sweep;
    a parameter stored under an algorithm field's old name (a study swept before the rename) is
    read under its current one. `params` leaves out those that could not act under the sweep's
    run settings (`Algorithm.inactive_fields`; listed as `not_acting`)."""
    import optuna

    from algorithms import registry
    from algorithms.fields import RunSettings
    from algorithms.renames import current_key
    from sweeps.spaces import as_layer
    from sweeps.spec import Arm

    storage = open_storage(data.get("storage") or "", out / "study.journal")
    fixed = {name: t["fixed"] for name, t in spec.space.items() if isinstance(t, dict) and "fixed" in t}
    found = []
    for arm in spec.arms:
        study = optuna.load_study(study_name=spec.study_name(arm), storage=storage)
        done = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
        if not done:
            raise ExperimentError(f"--params-from-sweep {out}: {arm.name} has no completed trial yet")
        trial = study.best_trial
        cls = registry.get(arm.algo)
        params = {current_key(cls, name): value for name, value in {**fixed, **trial.params}.items()}
        layer = as_layer(params)
        algo_args = {**arm.algo_args, **layer.pop("algo_args", {})}
        tuned = Arm(arm.name, arm.algo, arm.preset, algo_args, {**arm.run_args, **layer})
        # what the report shows: the searched parameters that could act in the sweep's runs (an old
        # sweep may have searched a dead one, e.g. the PPO clip at one policy update per batch)
        algo = cls(cls.make_config(arm.preset, **algo_args))
        dead = {f"algo.{f}" for f in algo.inactive_fields(RunSettings(spec.updates_per_batch()))}
        best = {current_key(cls, name): value for name, value in trial.params.items()}
        shown = {name: value for name, value in best.items() if name not in dead}
        record = {"trial": trial.number, "value": trial.value, "params": shown}
        found.append(
            (
                tuned,
                record | ({"not_acting": sorted(set(best) - set(shown))} if len(shown) < len(best) else {}),
            )
        )
    return found
