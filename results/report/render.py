"""Tables as files: Markdown (GitHub pipes), CSV and LaTeX (booktabs), from pandas frames.

Numbers are written as the frames hold them, scores as fractions in CSV (for tools) and as
percentages with one decimal in Markdown and LaTeX (for reading)."""

from __future__ import annotations

import math
from pathlib import Path

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


def cell(value, column: str) -> str:
    """One table cell as text: fractions x100, p-values to 3 decimals, missing values as '-'."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        if column in PERCENT_COLUMNS:
            return f"{100 * value:.1f}"
        if column == "p_value" or column.endswith("_p") or column.startswith("seed_noise_p"):
            return "<0.001" if value < 0.001 else f"{value:.3f}"
        return f"{value:.4g}"
    return str(value)


def _strings(df: pd.DataFrame) -> list[list[str]]:
    return [[cell(v, c) for c, v in zip(df.columns, row)] for row in df.itertuples(index=False)]


def to_markdown(df: pd.DataFrame) -> str:
    """A GitHub Markdown table (pipes in cells escaped)."""
    header = [str(c) for c in df.columns]
    rows = [[s.replace("|", "\\|") for s in row] for row in _strings(df)]
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


def to_latex(df: pd.DataFrame, caption: str) -> str:
    """A booktabs `table` environment with the caption (needs \\usepackage{booktabs})."""
    header = " & ".join(_tex(str(c)) for c in df.columns) + r" \\"
    body = "\n".join(" & ".join(_tex(s) for s in row) + r" \\" for row in _strings(df))
    return (
        "\\begin{table}[t]\n\\centering\n"
        f"\\caption{{{_tex(caption)}}}\n"
        f"\\begin{{tabular}}{{{'l' * len(df.columns)}}}\n\\toprule\n{header}\n\\midrule\n{body}\n"
        "\\bottomrule\n\\end{tabular}\n\\end{table}\n"
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
