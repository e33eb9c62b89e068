"""The sweep part of a report: `bench report SWEEP_DIR` shows each arm's trial counts, best
trials with their parameters and parameter importances, and Optuna's plots, from the
`sweep_summary.json` and `plots/` that `bench sweep` (or `bench sweep --show`) writes. Files
only: results/ never opens an Optuna storage."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from results.files import read_json
from results.report.plotting import Figure

SUMMARY_FILE = "sweep_summary.json"


def is_sweep_dir(path: Path) -> bool:
    """Whether `path` is a `bench sweep` directory."""
    return (Path(path) / "sweep.json").exists()


def sweep_sections(
    sweep_dir: Path, out: Path
) -> tuple[dict[str, tuple[str, str, pd.DataFrame]], list[Figure]]:
    """(name -> (heading, caption, table), figures copied into `out/figures/`) of one sweep."""
    path = Path(sweep_dir) / SUMMARY_FILE
    if not path.exists():
        raise ValueError(f"{sweep_dir}: no {SUMMARY_FILE} yet; run `bench sweep --show {sweep_dir}` first")
    summary = read_json(path)
    sections, figures = {}, []
    counts = []
    for arm, s in summary["arms"].items():
        counts.append(
            {
                "arm": arm,
                **{state.lower(): n for state, n in s["counts"].items()},
                "best value": None if s["best"] is None else s["best"]["value"],
            }
        )
        top = pd.DataFrame([{"trial": r["trial"], "value": r["value"], **r["params"]} for r in s["top"]])
        sections[f"sweep_{arm}_top"] = (f"Sweep: best trials of {arm}", summary["sweep"], top)
        if s["importances"]:
            imp = pd.DataFrame([{"parameter": k, "importance": v} for k, v in s["importances"].items()])
            sections[f"sweep_{arm}_importances"] = (
                f"Sweep: parameter importances of {arm}",
                "Optuna's default importance evaluator",
                imp,
            )
        figures += _copy_plots(Path(sweep_dir), arm, s.get("plots", []), out / "figures")
    sections["sweep_counts"] = ("Sweep: trials per arm", summary["sweep"], pd.DataFrame(counts))
    return dict(reversed(list(sections.items()))), figures


def _copy_plots(sweep_dir: Path, arm: str, plots: list[str], figures_dir: Path) -> list[Figure]:
    figures_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for png in (p for p in plots if p.endswith(".png")):
        stem = Path(png).stem
        key = f"sweep_{arm}_{stem}".replace(":", "_")
        paths = []
        for ext in ("png", "svg"):
            source = sweep_dir / Path(png).with_suffix(f".{ext}")
            if source.exists():
                shutil.copyfile(source, figures_dir / f"{key}.{ext}")
            paths.append(figures_dir / f"{key}.{ext}")
        title = f"Sweep of {arm}: {stem.replace('_', ' ')}"
        out.append(Figure(key, title, f"Optuna's {stem.replace('_', ' ')} plot of the {arm} study.", *paths))
    return out
