"""HTML tables of the report page: any frame (`table_html`, sortable on the page, cells that link),
the provenance as a table (`provenance_table`) and the config fields that differ between arms
(`config_diff`). Every text is escaped; links are relative to the page.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from html import escape
from typing import Any

import numpy as np
import pandas as pd

from results.report.render import Cell


def slug(text: str) -> str:
    """An HTML id from a text: lowercase words joined by '-'."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


def _cell(value: Any, column: str) -> str:
    """The default cell text: missing -> en dash, floats by `_format_float`, the rest as str."""
    if isinstance(value, Cell):
        return value.text
    if value is None or (not isinstance(value, str) and pd.api.types.is_scalar(value) and pd.isna(value)):
        return "\u2013"
    if isinstance(value, float | np.floating):
        return _format_float(float(value))
    return str(value)


def _format_float(value: float) -> str:
    """4 significant digits; integers above 1000 with thousands separators, no exponent below 1e7."""
    if not np.isfinite(value):
        return str(value)
    if abs(value) >= 1000 and abs(value) < 1e7:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def _sort_key(value: Any) -> str | None:
    """The `data-sort` of a cell: a Cell's key, a number's value; None: sort by the text."""
    if isinstance(value, Cell):
        key = value.sort
    elif isinstance(value, int | float | np.number) and not isinstance(value, bool):
        key = None if pd.isna(value) else float(value)
    else:
        return None
    return "" if key is None else str(key)


def _td(value: Any, text: str, numeric: bool) -> str:
    """One `<td>`: its text (linked, bold) and its sort key."""
    attrs = ' class="num"' if numeric else ""
    key = _sort_key(value)
    if key is not None:
        attrs += f' data-sort="{escape(key, quote=True)}"'
    body = escape(text)
    if isinstance(value, Cell):
        if value.href:
            body = f'<a href="{escape(value.href, quote=True)}">{body}</a>'
        if value.bold:
            body = f"<strong>{body}</strong>"
        for label, href in value.more:
            body += f' <a class="more" href="{escape(href, quote=True)}">{escape(label)}</a>'
    return f"<td{attrs}>{body}</td>"


def _is_numeric(column: pd.Series) -> bool:
    if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
        return True
    cells = [v for v in column if isinstance(v, Cell)]
    return (
        bool(cells)
        and len(cells) == len(column)
        and all(isinstance(c.sort, float) or c.sort is None for c in cells)
    )


def table_html(
    df: pd.DataFrame,
    caption: str,
    *,
    index: bool = False,
    table_id: str | None = None,
    format_cell: Callable[[Any, str], str] | None = None,
) -> str:
    """A DataFrame as an HTML `<table class="data">` with a `<caption>`, in a box that scrolls
    sideways when the table is wider than the page; every cell and header escaped.

    Numbers are right-aligned, text left-aligned; a numeric cell carries its value as `data-sort`
    (the page sorts by it). A `results.report.render.Cell` brings its own text, sort key, link
    and more links. `format_cell(value, column)` writes a plain cell (e.g. the Markdown tables'
    own, to show fractions as percentages the same way); by default floats get 4 significant
    digits (thousands grouped from 1000 on), missing values an en dash. `index=True` shows the
    index as the first columns; tuple column names (a MultiIndex) are joined with " / ".
    `table_id` (default: `table-` and the caption's slug) is its anchor."""
    fmt = format_cell or _cell
    frame = df.reset_index() if index else df
    numeric = [_is_numeric(frame[c]) for c in frame.columns]
    names = [
        " / ".join(str(p) for p in c if str(p)) if isinstance(c, tuple) else str(c) for c in frame.columns
    ]
    head = "".join(f"<th{_NUM if num else ''}>{escape(n)}</th>" for n, num in zip(names, numeric))
    rows = []
    for values in frame.itertuples(index=False, name=None):
        cells = (_td(v, fmt(v, c), num) for v, c, num in zip(values, frame.columns, numeric))
        rows.append(f"<tr>{''.join(cells)}</tr>")
    anchor = escape(table_id or f"table-{slug(caption)}", quote=True)
    return (
        f'<div class="scroll"><table class="data" id="{anchor}">\n<caption>{escape(caption)}</caption>\n'
        f"<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table></div>"
    )


_NUM = ' class="num"'


def _flat(value: Any, prefix: str, rows: list[tuple[str, str]], depth: int) -> None:
    """Rows of `provenance_table`: nested dicts as `a / b` keys (to `depth`), lists of scalars
    joined by ', ', anything deeper as compact JSON."""
    if isinstance(value, dict) and depth > 0 and value:
        for key, inner in value.items():
            _flat(inner, f"{prefix} / {key}" if prefix else str(key), rows, depth - 1)
    elif isinstance(value, list) and depth > 0 and value and all(isinstance(v, dict) for v in value):
        for i, inner in enumerate(value):
            name = inner.get("benchmark") or inner.get("task") or str(i + 1)
            _flat(inner, f"{prefix} [{name}]", rows, depth - 1)
    elif isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        rows.append((prefix, ", ".join(map(str, value)) if value else "\u2013"))
    elif isinstance(value, str | int | float | bool) or value is None:
        rows.append((prefix, "\u2013" if value is None or value == "" else str(value)))
    else:
        rows.append((prefix, json.dumps(value, sort_keys=True, default=str)))


def provenance_table(provenance: dict[str, Any]) -> str:
    """Provenance as a two-column table (nested records as `a / b` rows, `_flat`)."""
    rows: list[tuple[str, str]] = []
    for key, value in provenance.items():
        _flat(value, str(key), rows, depth=3)
    body = "\n".join(f"<tr><th>{escape(k)}</th><td><code>{escape(v)}</code></td></tr>" for k, v in rows)
    return f'<div class="scroll"><table class="provenance">\n<tbody>\n{body}\n</tbody>\n</table></div>'


def flat_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"algo_config": {"eps": 5.0}}` -> `{"algo_config.eps": 5.0}`."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(flat_config(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


RUN_FIELDS = ("seed", "out", "resume")
"""config fields that differ between any two runs and say nothing about an arm"""


def config_diff(configs: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """The config fields whose values differ between arms (one config per arm: `arm -> config.json`),
    one row per field, one column per arm; empty with fewer than two arms or no difference."""
    if len(configs) < 2:
        return pd.DataFrame()
    flat = {arm: flat_config(c) for arm, c in configs.items()}
    keys = sorted({k for c in flat.values() for k in c} - set(RUN_FIELDS))
    missing = object()
    rows = []
    for key in keys:
        values = [flat[arm].get(key, missing) for arm in flat]
        if (
            len({json.dumps(v, sort_keys=True, default=str) if v is not missing else "\0" for v in values})
            > 1
        ):
            rows.append(
                {
                    "field": key,
                    **{arm: "(absent)" if v is missing else _short(v) for arm, v in zip(flat, values)},
                }
            )
    return pd.DataFrame(rows)


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if isinstance(value, list | dict) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."
