"""`bench report`: a comparison's tables, figures and index.html, made from run directories
and evaluation records only.

    write_report([comparison_dir], out_dir)  ->  out_dir/{tables/, figures/, index.html}

Tables (`results.report.tables`) in Markdown, CSV and LaTeX (`results.report.render`), beside
`score_matrix.csv`, every (arm, seed, problem) count they are computed from
(`results.report.score_matrix`); figures (`results.report.figures`, `.curves`,
`.bottom_figures`) in PNG, SVG and PDF; one self-contained index.html (`results.report.page`,
`.html`) that opens with the bottom line (`results.report.bottom_line`), then the learning
curves, the tables, the other figures, the provenance and the commands that reproduce it. The
same code reports one run, several runs, one or several comparisons and sweeps
(`results.report.sweep`); a table or figure without data is left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from results.comparison import Comparison, load
from results.files import named
from results.report import tables as T
from results.report.claims import claim_pairs
from results.report.compute_curves import CAPTION as CURVES
from results.report.compute_curves import compute_curve_table
from results.report.differences import differences
from results.report.drift import DRIFT_SCORE, drift_matrices, drift_phase_table, drift_segments
from results.report.render import write_table
from results.report.score_matrix import (
    SCORE_MATRIX_FILE,
    cell_counts,
    matrices_from_counts,
    read_score_matrix,
    write_score_matrix,
)
from results.report.stability import RULE, stability_table
from results.tables import format_table

FORMATS = ("md", "csv", "tex", "html")


class ReportError(ValueError):
    """A report that cannot be made as asked (one-line message)."""


@dataclass
class ReportPaths:
    """What `write_report` made."""

    comparison: Comparison
    table_text: str
    index_html: Path | None
    files: list[Path] = field(default_factory=list)
    scores: pd.DataFrame = field(default_factory=pd.DataFrame)
    """the final scores table (`results.report.tables.final_scores`)"""
    differences: pd.DataFrame = field(default_factory=pd.DataFrame)
    """the differences table (`results.report.differences.differences`)"""


def write_report(
    dirs: list[Path],
    out: Path,
    baseline: str | None = None,
    formats: list[str] | tuple = FORMATS,
    n_boot: int = 10000,
) -> ReportPaths:
    """Load `dirs` (comparison, sweep or run directories), compute every table, write them (and
    the figures and index.html with "html" in `formats`) into `out`. Tables without a row are
    left out (one arm: no differences), as are figures without data; the tables and figures of
    an earlier report in `out` are removed first (`OUTPUT_FILES`). A write that fails on a
    full disk names `out` (pandas and matplotlib name no file then)."""
    try:
        return _write_report(dirs, out, baseline, formats, n_boot)
    except OSError as exc:
        raise named(exc, out) from None


def _write_report(
    dirs: list[Path], out: Path, baseline: str | None, formats: list[str] | tuple, n_boot: int
) -> ReportPaths:
    """`write_report`'s work."""
    from results.report.sweep import is_sweep_dir, merge_sweeps, sweep_sections

    command = report_command(dirs, out, baseline)  # as asked: the default baseline is no flag
    sweep_dirs = [d for d in dirs if is_sweep_dir(d)]
    comparison = load([d for d in dirs if not is_sweep_dir(d)])
    arms = comparison.arms
    if not arms and not sweep_dirs:
        raise ReportError(f"{', '.join(map(str, dirs))}: no runs to report")
    if baseline is not None and baseline not in arms:
        raise ReportError(f"--baseline {baseline!r} is not an arm here; arms: {', '.join(arms)}")
    out.mkdir(parents=True, exist_ok=True)
    _remove_previous_output(out)
    sections, sweep = {}, None
    for d in sweep_dirs:
        try:
            more, figs, about = sweep_sections(d, out)
        except ValueError as exc:
            raise ReportError(str(exc)) from None
        sections.update(more)
        sweep = about if sweep is None else merge_sweeps(sweep, about)
        sweep["figures"] = sweep.get("figures", []) + figs
    scores = diffs = pd.DataFrame()
    files: list[Path] = []
    frames: dict = {}
    if arms:
        baseline = baseline or ("grpo" if "grpo" in arms else arms[0])
        drift = drift_segments(comparison)  # the phase table's and the drift scores' one source
        counts, recovery = cell_counts(comparison), drift_matrices(drift)
        files.append(write_score_matrix(out / SCORE_MATRIX_FILE, counts, arms, recovery))
        matrices, ks = matrices_from_counts(counts)
        matrices.update(recovery)
        scores = T.final_scores(matrices, ks, arms, n_boot)
        diffs = differences(matrices, ks, arms, comparison.benchmarks, baseline, n_boot, pairs=claim_pairs())
        sections.update(_sections(comparison, scores, diffs, baseline, n_boot, drift_phase_table(drift)))
        frames = {name: sections[name][2] for name in ("aggregate", "per_seed")}
        frames.update(scores=scores, differences=diffs, matrices=matrices)
        if not comparison.specs:  # plain run directories: no comparison chose their parameters
            sections.pop("tuning")
    sections = {name: s for name, s in sections.items() if len(s[2])}
    for name, (heading, caption, df) in sections.items():
        files += write_table(
            df, out / "tables", name, f"{heading}: {caption}", [f for f in formats if f != "html"]
        )
    provenance = _provenance(comparison, command, sweep)
    files.append(out / "provenance.json")
    files[-1].write_text(json.dumps(provenance, indent=2, default=str) + "\n")
    index = None
    if "html" in formats:
        from results.report.page import write_page

        index = write_page(comparison, out, sections, frames, provenance, sweep)
        files.append(index)
    headline = T.headline(scores, diffs) if len(scores) else pd.DataFrame()
    text = (
        format_table(headline.to_dict("records"), list(headline.columns))
        if len(headline)
        else "(no evaluations yet)"
    )
    if not len(comparison.runs):  # a sweep-only report: its best trials
        text = "\n".join(
            f"{h}:\n{format_table(df.to_dict('records'), list(df.columns))}"
            for h, _, df in sections.values()
            if len(df)
        )
        return ReportPaths(comparison, text, index, files)
    return ReportPaths(comparison, _budget_line(comparison) + "\n" + text, index, files, scores, diffs)


OUTPUT_FILES = {"tables": (".md", ".csv", ".tex"), "figures": (".png", ".svg", ".pdf")}
"""What a report writes under `out`: its tables and figures, by folder and suffix."""


def _remove_previous_output(out: Path) -> None:
    """Remove the tables and figures an earlier report wrote into `out`: a section or figure
    this report leaves out (no rows, no data) must not stay behind from the last one (the drift
    reference kept an empty aggregate table from an older layout). Other files are left."""
    for folder, suffixes in OUTPUT_FILES.items():
        for path in (out / folder).glob("*"):
            if path.is_file() and path.suffix in suffixes:
                path.unlink()


def tables_from_score_matrix(
    report: Path, baseline: str, n_boot: int = 10000, benchmarks: list[str] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scores, differences) recomputed from a report's `score_matrix.csv` alone, as
    `write_report` computed them (the same bootstrap seeds): the committed evidence checks the
    committed tables."""
    matrices, ks, arms = read_score_matrix(report / SCORE_MATRIX_FILE)
    benches = benchmarks if benchmarks is not None else list(dict.fromkeys(b for _, b in matrices))
    scores = T.final_scores(matrices, ks, arms, n_boot)
    return scores, differences(matrices, ks, arms, benches, baseline, n_boot, pairs=claim_pairs())


def _sections(comparison, scores, diffs, baseline, n_boot, drift) -> dict[str, tuple[str, str, pd.DataFrame]]:
    """name -> (heading, caption, table) of every table of the report, in reading order."""
    sections = {
        "scores": (
            "Final scores",
            "Mean avg@k over seeds (%), 95% CI by a two-level bootstrap over seeds and "
            "problems; n problems x k samples per run",
            scores,
        ),
        "differences": (
            f"Differences vs {baseline}",
            f"Each arm minus {baseline} (points of %), then the pairs "
            "the paper's claims compare (their other arm in the baseline column); problems paired, "
            "each arm's seeds independent: the two-level bootstrap's 95% CI and p-value (floor "
            "1/(n_boot+1)) and Welch's t over per-seed means (welch_*); verdict: better or worse only "
            "where both 95% intervals exclude 0; seed_noise_p: seeds differing beyond evaluation "
            "noise (arm, baseline); mde: the difference detectable with 80% power at 0.05; poi = "
            "probability of improvement across seeds",
            diffs,
        ),
        "aggregate": (
            "Aggregate",
            "Interquartile mean across seeds and benchmarks (%), 95% CI resampling seeds",
            T.aggregate(comparison, n_boot),
        ),
        "per_seed": (
            "Every run's score",
            "avg@k of every run (%), failed and stopped runs included",
            T.per_seed_scores(comparison),
        ),
        "budget": (
            "Budget and consumption",
            f"{_budget_line(comparison)}; what each arm consumed: mean [min, max] over its runs; model "
            "FLOPs of generation, learner and critic (bench.train.compute); policy updates per batch",
            T.budget_table(comparison),
        ),
        "runs": (
            "Runs",
            "Every run: outcome, what stopped it, reward collapse, consumption, evaluated checkpoint",
            T.runs_table(comparison),
        ),
        "stability": ("Stability", RULE, stability_table(comparison)),
        "compute_curves": (
            "Compute-performance curves",
            CURVES,
            compute_curve_table(comparison, min(n_boot, 1000)),
        ),
        "tuning": (
            "Tuning",
            "How each arm's parameters were chosen: shared defaults, or the best trial of a sweep "
            "with the same trials and budget for every arm, the comparison on fresh seeds; parameters "
            "that could not act in the sweep's runs (the PPO clip at one policy update per batch) are left out",
            T.tuning_table(comparison),
        ),
    }
    if len(drift):
        sections["drift_phases"] = (
            "Online drift by phase (Fig. 5)",
            "Each stretch of steps in one phase of the "
            "drifting task, in schedule order: share of episodes using the phase's label and "
            "training reward over its first and last 5 steps, mean over seeds; in the scores and differences, "
            f"{DRIFT_SCORE} is the label share over each stretch after the first switch, "
            "paired by seed and stretch",
            drift,
        )
    evaluated = scores[scores["benchmark"].isin(comparison.benchmarks)] if len(scores) else scores
    for i, (title, df) in enumerate(T.paper_tables(evaluated)):  # the paper's tables are of evaluations
        sections[f"paper_{i + 1}"] = (title, "The paper's layout: its numbers beside this harness's", df)
    return sections


def _budget_line(comparison: Comparison) -> str:
    from results.report.bottom_line import budget_text

    return "budget " + budget_text(comparison)


def report_command(dirs: list[Path], out: Path, baseline: str | None) -> str:
    """The `bench report` command that makes this report again."""
    import shlex

    words = ["bench", "report", *map(str, dirs), "--out", str(out)]
    return " ".join(shlex.quote(w) for w in words) + (
        f" --baseline {shlex.quote(baseline)}" if baseline else ""
    )


def _provenance(comparison: Comparison, command: str, sweep: dict | None) -> dict[str, Any]:
    """Commits, config hashes, benchmark versions and data hashes, sampling, seeds, commands (and
    a sweep's settings, storage and command)."""
    runs, summaries = comparison.runs, comparison.summaries
    by_arm = (
        {arm: sorted(set(runs.loc[runs["arm"] == arm, "config_hash"].dropna())) for arm in comparison.arms}
        if "config_hash" in runs
        else {}
    )
    benches = []
    if len(summaries):
        for bench, group in summaries.groupby("benchmark"):
            benches.append(
                {
                    "benchmark": bench,
                    "versions": sorted(set(group["version"].dropna())),
                    "data_hashes": sorted(set(group["data_hash"].dropna())),
                    "sampling": sorted(set(group["sampling"])),
                    "eval_seeds": sorted(set(group["eval_seed"])),
                    "k": sorted(set(group["k"])),
                    "n_problems": sorted(set(group["n_problems"])),
                }
            )
    commands = [s.get("command") for s in comparison.specs if s.get("command")]
    commands += (sweep or {}).get("commands", [])
    commands.append(command)
    provenance = {
        "commits": sorted(set(runs["commit"].dropna())) if "commit" in runs else [],
        "config_hashes_by_arm": by_arm,
        "benchmarks": benches,
        "specs": comparison.specs,
        "commands": commands,
    }
    if sweep is not None:
        provenance["commits"] = sorted(set(provenance["commits"]) | set(sweep["commits"]))
        provenance["sweeps"] = sweep["provenance"]
    return provenance
