"""Tables as files: Markdown (GitHub pipes), CSV and LaTeX (pandas' Styler, booktabs), from pandas
frames, and the display form the Markdown, LaTeX and HTML tables share (`display_frame`).

CSV keeps the frames as they are (fractions in [0, 1], every interval end in its own column: for
tools, and for `results.report.evidence`, which reads them back). For reading, an estimate and its
interval are one cell, "69.1 [63.2, 74.7]" (percentages with one decimal, differences in points of
%), numbers are right-aligned, and the best value of each column (of each benchmark's group in a
long table) is bold: the highest score, IQM or paper-table number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

PERCENT_COLUMNS = (
    "mean",
    "ci_low",
    "ci_high",
    "diff",
    "avg_at_k",
    "iqm",
    "poi",
    "poi_low",
    "poi_high",
    "welch_low",
    "welch_high",
    "mde",
)
"""Columns holding fractions in [0, 1] (or differences of them): shown x100 for reading."""

INTERVALS = (
    (("mean", "ci_low", "ci_high"), "score % [95% CI]", ""),
    (("diff", "ci_low", "ci_high"), "difference [95% CI]", "+"),
    (("iqm", "ci_low", "ci_high"), "IQM % [95% CI]", ""),
    ((None, "welch_low", "welch_high"), "seed-level 95% CI", "+"),
    (("poi", "poi_low", "poi_high"), "PoI % [95% CI]", ""),
)
"""(estimate, low, high) columns shown as one cell, its header, and the sign format ("+": signed)."""


@dataclass(frozen=True)
class Cell:
    """A table cell with more than text: its sort key, a link, more links after it, bold."""

    text: str
    sort: float | str | None = None
    href: str | None = None
    more: tuple[tuple[str, str], ...] = ()
    """(label, href) links after the text (e.g. a run's config.json, logs, status)"""
    bold: bool = False

    def __str__(self) -> str:
        return self.text


def cell(value, column: str) -> str:
    """One table cell as text: fractions x100, p-values to 3 decimals, missing values as '-'."""
    if isinstance(value, Cell):
        return value.text
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float | np.floating):
        value = float(value)
        if column in PERCENT_COLUMNS:
            return f"{100 * value:.1f}"
        if column == "p_value" or column.endswith("_p") or column.startswith("seed_noise_p"):
            return "<0.001" if value < 0.001 else f"{value:.3f}"
        return f"{value:.4g}"
    return str(value)


def _interval_cell(row, columns: tuple, sign: str) -> Cell:
    """ "69.1 [63.2, 74.7]" (or "[+1.0, +3.2]" without an estimate), sorted by the estimate."""
    est, low, high = (None if c is None else row[c] for c in columns)
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        text = "-" if est is None or pd.isna(est) else f"{100 * est:{sign}.1f}"
        return Cell(text, None if est is None or pd.isna(est) else float(est))
    interval = f"[{100 * low:{sign}.1f}, {100 * high:{sign}.1f}]"
    if est is None:
        return Cell(interval, float(low))
    return Cell(f"{100 * est:{sign}.1f} {interval}", None if pd.isna(est) else float(est))


def display_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The frame as it is read (module docstring): each (estimate, low, high) of `INTERVALS` as one
    `Cell` in the estimate's place, the best value of each column bold (`best_cells`)."""
    out = df.copy()
    best = best_cells(df)
    for c in {c for _, c in best}:
        out[c] = out[c].astype(object)
    for r, c in best:
        out.at[r, c] = Cell(cell(df.at[r, c], c), _sortable(df.at[r, c]), bold=True)
    for columns, header, sign in INTERVALS:
        if not all(c is None or c in out for c in columns) or (columns[0] is None and "diff" not in df):
            continue
        if columns[0] == "mean" and "diff" in df:  # a differences table's ci_low/high are the diff's
            continue
        merged = [_interval_cell(row, columns, sign) for _, row in df.iterrows()]
        if columns[0] in best_columns(df):
            merged = [Cell(m.text, m.sort, bold=(i, columns[0]) in best) for i, m in zip(df.index, merged)]
        anchor = columns[0] or columns[1]
        out.insert(list(out.columns).index(anchor), header, merged)
        out = out.drop(columns=[c for c in columns if c is not None])
    return out


def _sortable(value):
    return float(value) if isinstance(value, int | float | np.number) and not pd.isna(value) else None


def best_columns(df: pd.DataFrame) -> list[str]:
    """The columns whose best value is marked: a score table's mean, an aggregate's IQM, and the
    number columns of a paper table (the paper's and this harness's)."""
    if "iqm" in df:
        return ["iqm"]
    if "mean" in df and "benchmark" in df and "diff" not in df:
        return ["mean"]
    return [c for c in df.columns if str(c).endswith(("(this harness)", "scale)"))]


def best_cells(df: pd.DataFrame) -> set[tuple]:
    """(index, column) of each best value (the highest; per benchmark in a long table); a column
    whose values are all equal, or that has one value, has no best."""
    out = set()
    for column in best_columns(df):
        values = pd.to_numeric(df[column], errors="coerce")
        groups = df.groupby("benchmark").groups.values() if "benchmark" in df else [df.index]
        for index in groups:
            v = values.loc[index].dropna()
            if v.nunique() > 1:
                out |= {(i, column) for i in v.index[v == v.max()]}
    return out


def _strings(df: pd.DataFrame, bold: tuple[str, str] = ("", "")) -> list[list[str]]:
    """Every cell as text, bold ones wrapped in `bold` (open, close)."""

    def text(v, c):
        t = cell(v, c)
        return f"{bold[0]}{t}{bold[1]}" if isinstance(v, Cell) and v.bold else t

    return [[text(v, c) for c, v in zip(df.columns, row)] for row in df.itertuples(index=False)]


def to_markdown(df: pd.DataFrame) -> str:
    """A GitHub Markdown table (pipes in cells escaped) of the display frame, best values bold."""
    shown = display_frame(df)
    header = [str(c) for c in shown.columns]
    rows = [[s.replace("|", "\\|") for s in row] for row in _strings(shown, ("**", "**"))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"


_TEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def _tex(text: str) -> str:
    return "".join(_TEX_SPECIALS.get(ch, ch) for ch in text)


def numeric_columns(shown: pd.DataFrame) -> list[bool]:
    """Per column of a display frame: whether it holds numbers (right-aligned): a numeric dtype,
    or cells whose values are numbers, intervals or '-'."""
    out = []
    for c in shown.columns:
        values = shown[c]
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            out.append(True)
            continue
        texts = [cell(v, str(c)) for v in values]
        out.append(bool(texts) and all(_looks_numeric(t) for t in texts))
    return out


def _looks_numeric(text: str) -> bool:
    head = text.split(" [")[0].strip().lstrip("<>+-\u2212").replace(",", "").rstrip("%")
    if text.strip() in ("-", "\u2013", ""):
        return True
    try:
        float(head)
    except ValueError:
        return text.startswith("[")
    return True


def to_latex(df: pd.DataFrame, caption: str) -> str:
    """A booktabs `table` environment of the display frame through pandas' Styler: numbers
    right-aligned, intervals in one cell, best values bold (needs \\usepackage{booktabs})."""
    shown = display_frame(df)
    strings = pd.DataFrame(_strings(shown), columns=[str(c) for c in shown.columns])
    bold = pd.DataFrame(
        [[isinstance(v, Cell) and v.bold for v in row] for row in shown.itertuples(index=False)],
        columns=strings.columns,
    )
    align = "".join("r" if num else "l" for num in numeric_columns(shown))
    styler = strings.style.hide(axis="index").format(escape="latex").format_index(escape="latex", axis=1)
    styler = styler.apply(lambda _: bold.replace({True: "textbf:--rwrap;", False: ""}), axis=None)
    return styler.to_latex(
        caption=_tex(caption),
        hrules=True,
        column_format=align,
        position="t",
        position_float="centering",
        environment="table",
    )


def write_table(df: pd.DataFrame, directory: Path, name: str, caption: str, formats: list[str]) -> list[Path]:
    """Write `name.md` / `name.csv` / `name.tex` (as `formats` asks) into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    if "md" in formats:
        path = directory / f"{name}.md"
        path.write_text(f"**{caption}**\n\n{to_markdown(df)}")
        written.append(path)
    if "csv" in formats:
        path = directory / f"{name}.csv"
        df.to_csv(path, index=False)
        written.append(path)
    if "tex" in formats:
        path = directory / f"{name}.tex"
        path.write_text(to_latex(df, caption))
        written.append(path)
    return written
