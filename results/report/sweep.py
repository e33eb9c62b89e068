"""The sweep part of a report: `bench report SWEEP_DIR` shows each arm's trial counts, best trials
with their parameters, search space and parameter importances, and three figures per arm drawn
here (importances, optimisation history, the pruner's rungs), from the `sweep_summary.json` that
`bench sweep` (or `bench sweep --show`) writes and the sweep's `sweep.json`, with its command,
settings and the optuna-dashboard command as provenance. Files only: results/ never opens an
Optuna storage.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from results.files import read_json
from results.report.plotting import (
    COLUMN_IN,
    HEIGHT_IN,
    Figure,
    arm_style,
    legend_below,
    new_figure,
    save,
    styled,
)

SUMMARY_FILE = "sweep_summary.json"
SPEC_FILE = "sweep.json"
SETTINGS = (
    "task",
    "seeds",
    "budget",
    "trials",
    "objective",
    "direction",
    "sampler",
    "pruner",
    "eval_k",
    "eval_limit",
    "eval_every",
    "eval_seed",
    "shared",
    "storage",
    "created",
    "run_defaults",
)
"""the sweep.json keys its provenance shows"""


def is_sweep_dir(path: Path) -> bool:
    """Whether `path` is a `bench sweep` directory."""
    return (Path(path) / SPEC_FILE).exists()


def sweep_sections(
    sweep_dir: Path, out: Path
) -> tuple[dict[str, tuple[str, str, pd.DataFrame]], list[Figure], dict]:
    """(name -> (heading, caption, table), figures written into `out/figures/`, about) of one
    sweep; about: its `title`, `commands`, `commits` and `provenance`."""
    sweep_dir = Path(sweep_dir)
    path = sweep_dir / SUMMARY_FILE
    if not path.exists():
        raise ValueError(f"{sweep_dir}: no {SUMMARY_FILE} yet; run `bench sweep --show {sweep_dir}` first")
    summary = read_json(path)
    spec = read_json(sweep_dir / SPEC_FILE)
    percent = str(spec.get("objective", "")).startswith(("eval/", "reward/"))
    objective = "objective (%)" if percent else "objective"
    scale = 100.0 if percent else 1.0
    sections = {
        "sweep_counts": ("Sweep: trials per arm", summary["sweep"], _counts(summary, objective, scale))
    }
    figures = []
    for arm, s in summary["arms"].items():
        top = pd.DataFrame(
            [{"trial": r["trial"], objective: scale * r["value"], **r["params"]} for r in s["top"]]
        )
        sections[f"sweep_{arm}_top"] = (
            f"Sweep: best trials of {arm}",
            f"objective {spec.get('objective')}",
            top,
        )
        space = _space(spec, arm)
        if len(space):
            sections[f"sweep_{arm}_space"] = (
                f"Sweep: search space of {arm}",
                "the distributions sampled",
                space,
            )
        if s["importances"]:
            imp = pd.DataFrame([{"parameter": k, "importance": v} for k, v in s["importances"].items()])
            sections[f"sweep_{arm}_importances"] = (
                f"Sweep: parameter importances of {arm}",
                "Optuna's default importance evaluator (fANOVA): each parameter's share of the objective's variance",
                imp,
            )
        figures += sweep_figures(arm, s, out / "figures", percent)
    return (
        sections,
        figures,
        {**_about(sweep_dir, spec, summary), "sentences": _sentences(spec, summary, scale)},
    )


def _sentences(spec: dict, summary: dict, scale: float) -> list[tuple[str, str]]:
    """Per arm: its best trial with its objective and parameters, and what the paper's defaults
    (the first slot) scored."""
    unit = "%" if scale == 100 else ""
    out = []
    for arm, s in summary["arms"].items():
        counts = ", ".join(f"{n} {state.lower()}" for state, n in sorted(s["counts"].items()))
        best = s["best"]
        if best is None:
            out.append((arm, f"no completed trial yet ({counts})."))
            continue
        params = ", ".join(
            f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in best["params"].items()
        )
        text = f"best trial {best['trial']}: {spec.get('objective')} = {scale * best['value']:.4g}{unit} ({counts}); {params}."
        first = next((t for t in s.get("trials", []) if t.get("slot") == "trial-000"), None)
        if first is not None and first.get("value") is not None:
            text += f" The paper's defaults (trial {first['trial']}): {scale * first['value']:.4g}{unit}."
        out.append((arm, text))
    return out


def _counts(summary: dict, objective: str, scale: float) -> pd.DataFrame:
    rows = []
    for arm, s in summary["arms"].items():
        overhead = s.get("overhead") or {}
        rows.append(
            {
                "arm": arm,
                **{state.lower(): n for state, n in s["counts"].items()},
                f"best {objective}": None if s["best"] is None else scale * s["best"]["value"],
                "median overhead": f"{overhead['median']:.0%}" if overhead else "-",
            }
        )
    return pd.DataFrame(rows)


def _space(spec: dict, arm: str) -> pd.DataFrame:
    """An arm's search space from sweep.json (`arm_spaces`), one row per parameter."""
    params = spec.get("arm_spaces", {}).get(arm, {}).get("params", [])
    rows = [
        {
            "parameter": p["name"],
            "kind": p["kind"],
            "range": ", ".join(map(str, p["choices"]))
            if p.get("choices")
            else f"[{p['low']:g}, {p['high']:g}]",
            "scale": "log" if p.get("log") else "linear",
        }
        for p in params
    ]
    return pd.DataFrame(rows)


def _about(sweep_dir: Path, spec: dict, summary: dict) -> dict:
    """Title, commands (the sweep's, the dashboard's), commits of its runs, and its settings."""
    arms = ", ".join(a["name"] for a in spec.get("arms", []))
    budget = spec.get("budget", {})
    seeds = len(spec.get("seeds", []))
    title = (
        f"Sweep of {arms} on {spec.get('task')}: {spec.get('trials')} trials per arm at "
        f"{budget.get('kind')}={budget.get('amount')} x {seeds} seed{'s' if seeds != 1 else ''}"
    )
    storage = spec.get("storage") or str(sweep_dir / "study.journal")
    commands = [c for c in (spec.get("command"),) if c]
    commands += [f"bench sweep --show {sweep_dir}", f"optuna-dashboard --host 127.0.0.1 {storage}"]
    commits = set()
    for env in sweep_dir.glob("*/*/env.json"):
        commit = read_json(env).get("git_commit")
        if commit:
            commits.add(commit)
    settings = {key: spec[key] for key in SETTINGS if key in spec}
    settings["arms"] = [a["name"] for a in spec.get("arms", [])]
    settings["studies"] = [s["study"] for s in summary["arms"].values()]
    return {
        "title": title,
        "commands": commands,
        "commits": sorted(commits),
        "provenance": {str(sweep_dir): settings},
    }


def merge_sweeps(a: dict, b: dict) -> dict:
    """The `about` of two sweeps reported together."""
    return {
        "title": "Sweeps: " + "; ".join(t.removeprefix("Sweeps: ") for t in (a["title"], b["title"])),
        "commands": a["commands"] + b["commands"],
        "commits": sorted(set(a["commits"]) | set(b["commits"])),
        "provenance": {**a["provenance"], **b["provenance"]},
        "figures": a.get("figures", []),
        "sentences": a["sentences"] + b["sentences"],
    }


def sweep_figures(arm: str, s: dict, out: Path, percent: bool) -> list[Figure]:
    """An arm's importances, history and rungs (those its summary has the data for)."""
    key = f"sweep_{arm}".replace(":", "_")
    figures = importances_figure(arm, s.get("importances", {}), out, key)
    trials = s.get("trials")
    if trials:
        figures += history_figure(arm, trials, s.get("direction", "maximize"), out, key, percent)
        figures += rungs_figure(arm, trials, s.get("direction", "maximize"), out, key, percent)
    return figures


@styled
def importances_figure(arm: str, importances: dict[str, float], out: Path, key: str) -> list[Figure]:
    """Horizontal bars of the parameter importances, the largest on top."""
    if not importances:
        return []
    names = sorted(importances, key=importances.get)
    fig, (ax,) = new_figure(width=COLUMN_IN, height=0.45 + 0.2 * len(names))
    ax.barh(range(len(names)), [100 * importances[n] for n in names], color=arm_style(arm).color, height=0.65)
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("importance (%)")  # the caption says of what: a long label is cut at column width
    ax.grid(False, axis="y")
    caption = (
        f"Parameter importances of the {arm} study (Optuna's default evaluator, fANOVA): each parameter's "
        "share of the variance of the objective over the completed trials."
    )
    return [
        save(
            fig,
            out,
            f"{key}_importances",
            f"Sweep of {arm}: parameter importances",
            caption,
            None,
            section="search",
        )
    ]


@styled
def history_figure(
    arm: str, trials: list[dict], direction: str, out: Path, key: str, percent: bool
) -> list[Figure]:
    """Each trial's objective by trial number (pruned: its last reported value, an x), and the best so far."""
    done = [t for t in trials if t["state"] == "COMPLETE" and t.get("value") is not None]
    if not done:
        return []
    scale = 100.0 if percent else 1.0
    fig, (ax,) = new_figure()
    style = arm_style(arm)
    ax.plot(
        [t["trial"] for t in done],
        [scale * t["value"] for t in done],
        linestyle="none",
        marker=style.marker,
        color=style.color,
        label="completed",
    )
    pruned = [t for t in trials if t["state"] == "PRUNED" and t.get("intermediate")]
    if pruned:
        ax.plot(
            [t["trial"] for t in pruned],
            [scale * t["intermediate"][-1][1] for t in pruned],
            linestyle="none",
            marker="x",
            color="0.5",
            label="pruned (last report)",
        )
    order = sorted(done, key=lambda t: t["trial"])
    values = np.array([t["value"] for t in order])
    best = np.maximum.accumulate(values) if direction == "maximize" else np.minimum.accumulate(values)
    ax.step(
        [t["trial"] for t in order],
        scale * best,
        where="post",
        color="0.2",
        linewidth=1.0,
        label="best so far",
    )
    ax.set_xlabel("trial")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("objective" + (" (%)" if percent else ""))
    legend_below(fig, ax)
    caption = (
        f"Optimisation history of the {arm} study: the objective of each completed trial, the best so far."
    )
    return [
        save(
            fig,
            out,
            f"{key}_history",
            f"Sweep of {arm}: optimisation history",
            caption,
            None,
            section="bottom line",
        )
    ]


@styled
def rungs_figure(
    arm: str, trials: list[dict], direction: str, out: Path, key: str, percent: bool
) -> list[Figure]:
    """The values each trial reported to the pruner, by report: completed trials in the arm's colour,
    pruned ones in grey ending in an x, the best trial (by the study's `direction`) thick."""
    reported = [t for t in trials if t.get("intermediate")]
    if not reported:
        return []
    scale = 100.0 if percent else 1.0
    done = [t for t in reported if t["state"] == "COMPLETE" and t.get("value") is not None]
    pick = max if direction == "maximize" else min
    best = pick(done, key=lambda t: t["value"], default=None)
    fig, (ax,) = new_figure(height=HEIGHT_IN)
    style = arm_style(arm)
    for t in reported:
        steps, values = zip(*t["intermediate"])
        values = [scale * v for v in values]
        if t["state"] == "PRUNED":
            ax.plot(steps, values, color="0.6", linewidth=0.6, label="pruned")
            ax.plot(steps[-1], values[-1], marker="x", color="0.5", linestyle="none")
        else:
            ax.plot(steps, values, color=style.color, linewidth=0.7, alpha=0.7, label="completed")
    if best is not None:
        steps, values = zip(*best["intermediate"])
        ax.plot(
            steps,
            [scale * v for v in values],
            color=style.color,
            linewidth=2.0,
            label=f"best (trial {best['trial']})",
        )
    ax.set_xlabel("report (the pruner's step)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # reports are counted
    ax.set_ylabel("reported value" + (" (%)" if percent else ""))
    legend_below(fig, ax)
    caption = (
        f"What each trial of the {arm} study reported to the pruner (its in-training objective), by report: "
        "completed trials in the arm's colour, pruned ones in grey ending where they were stopped (x), the best "
        "completed trial thick."
    )
    return [
        save(fig, out, f"{key}_rungs", f"Sweep of {arm}: the pruner's rungs", caption, None, section="search")
    ]
