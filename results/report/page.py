"""The report page (`index.html`) of `write_report`: every figure, the bottom line, the tables in
their display form (intervals in one cell, best values bold, runs linked to their files), the
config fields that differ between arms, provenance and commands.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from results.comparison import Comparison
from results.experiments import STATUS_DIR
from results.files import read_json
from results.report.bottom_figures import forest_plot, interval_estimates, probability_of_improvement
from results.report.bottom_line import bottom_lines, budget_text, report_title, sentence
from results.report.claims import part_of
from results.report.html import write_index
from results.report.html_tables import config_diff, table_html
from results.report.render import Cell, cell, display_frame
from results.report.stability_verdicts import stability_sentences

Sections = dict[str, tuple[str, str, pd.DataFrame]]


def write_page(
    comparison: Comparison,
    out: Path,
    sections: Sections,
    frames: dict[str, pd.DataFrame],
    provenance: dict,
    sweep: dict | None = None,
) -> Path:
    """index.html of the report in `out`. `sections`: name -> (heading, caption, table) in reading
    order (empty ones already left out); `frames`: the report's tables as computed (scores,
    differences, aggregate, per_seed) and the score matrices (`matrices`); `sweep`: a sweep's
    `title` and `figures` (`results.report.sweep.sweep_sections`) for a sweep's report."""
    from results.report.figures import write_figures

    figures_dir = out / "figures"
    figures, lines = [], []
    if len(comparison.runs):
        scores, diffs = frames["scores"], frames["differences"]
        lines = bottom_lines(diffs, scores, frames["per_seed"], frames["matrices"], out.name)
        figures += forest_plot(lines, figures_dir)
        figures += write_figures(comparison, figures_dir, scores if len(scores) else None)
        figures += interval_estimates(frames["aggregate"], scores, comparison.arms, figures_dir)
        figures += probability_of_improvement(diffs, figures_dir)
    if sweep is not None:
        figures += sweep["figures"]
    title = report_title(comparison) if len(comparison.runs) else (sweep["title"] if sweep else "Report")
    html_sections = [
        (heading, table_html(_shown(name, df, comparison, out), caption, format_cell=cell))
        for name, (heading, caption, df) in sections.items()
    ]
    diff = config_diff(_arm_configs(comparison))
    if len(diff):
        caption = "The config.json fields whose values differ between the arms (each arm's first run)"
        html_sections.append(("Config differences between arms", table_html(diff, caption)))
    return write_index(
        out,
        title=title,
        intro=_intro(comparison),
        bottom_line=[sentence(line) for line in lines]
        + _part_sentence(out.name)
        + stability_sentences(comparison.runs)
        + (sweep["sentences"] if sweep else []),
        sections=html_sections,
        figures=figures,
        provenance=provenance,
        commands=provenance.get("commands", []),
    )


def _part_sentence(name: str) -> list[tuple[str, str]]:
    """For a further part of a reference (`claims.REFERENCE_PARTS`): where its claims are stated."""
    whole = part_of(name)
    if whole is None:
        return []
    return [
        (
            f"Part of {whole}",
            f"these arms join those of {whole} (../{whole}/index.html): the paper's claims between"
            f" them are judged over both reports, on that page and in VERDICTS.md.",
        )
    ]


def _intro(comparison: Comparison) -> list[str]:
    """The line under the title: runs and their states, budget, where the numbers come from."""
    source = "Every number and figure here is computed from the run directories by `bench report`."
    runs = comparison.runs
    if runs.empty:
        return [source]
    states = ", ".join(f"{n} {s}" for s, n in runs["state"].value_counts().items())
    return [
        f"{len(runs)} run{'s' if len(runs) > 1 else ''} ({states}); budget {budget_text(comparison)}. {source}"
    ]


def _shown(name: str, df: pd.DataFrame, comparison: Comparison, out: Path) -> pd.DataFrame:
    """A section's table as the page shows it: its display form, the runs table's runs linked."""
    shown = display_frame(df)
    if name == "runs" and "run" in shown and len(comparison.runs):
        paths = comparison.runs.set_index("run")["path"]
        shown["run"] = [
            _run_cell(run, Path(paths[run]), out) if run in paths else run for run in shown["run"]
        ]
    return shown


def _run_cell(run: str, path: Path, out: Path) -> Cell | str:
    """The run's name linking to its directory, then its config.json, logs and status (those that
    exist); the plain name where a link would leave the git work tree the report is written in
    (a reference report committed from runs kept elsewhere: its links would resolve nowhere else)."""
    if not path.exists() or not _linkable(path, out):
        return run
    experiment = path.parent.parent  # <comparison>/runs/<run>
    candidates = [
        ("config", path / "config.json"),
        ("metrics", path / "metrics.jsonl"),
        ("summary", path / "summary.json"),
        ("log", experiment / "logs" / f"{run}.run.log"),
        ("eval log", experiment / "logs" / f"{run}.eval.log"),
        ("status", experiment / STATUS_DIR / f"{run}.json"),
    ]
    more = tuple((label, _relative(p, out)) for label, p in candidates if p.exists())
    return Cell(run, run, _relative(path, out) + "/", more)


def _linkable(path: Path, out: Path) -> bool:
    """True unless `out` lies in a git work tree that `path` is outside of."""
    out = out.resolve()
    tree = next((d for d in (out, *out.parents) if (d / ".git").exists()), None)
    return tree is None or path.resolve().is_relative_to(tree)


def _relative(path: Path, out: Path) -> str:
    return Path(os.path.relpath(path.resolve(), out.resolve())).as_posix()


def _arm_configs(comparison: Comparison) -> dict[str, dict]:
    """arm -> the config.json of its first run that has one."""
    configs: dict[str, dict] = {}
    if comparison.runs.empty:
        return configs
    for arm, path in comparison.runs.sort_values("seed")[["arm", "path"]].itertuples(index=False):
        config = Path(path) / "config.json"
        if arm not in configs and config.exists():
            configs[arm] = read_json(config)
    return configs
