"""The report's `index.html`: one self-contained page (inline CSS, no scripts, no network) with
the intro, the tables, the figures (relative links to their PNGs and SVGs), provenance and
the commands that made it.

    write_index(out_dir, title=..., intro=[...], sections=[(heading, html)], figures=[...],
                provenance={...}, commands=[...]) -> out_dir / "index.html"
    table_html(df, caption) -> an HTML fragment for `sections`

Every text given as a `str` is escaped; only the `sections` fragments are inserted as they
are (make them with `table_html` or other escaping code).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from results.report.plotting import Figure

WIDE_PX = 800
"""figures wider than this (multi-panel ones) take a whole row of the page's grid"""

CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; color: #1d1d1f;
       max-width: 1180px; margin: 0 auto; padding: 1.5rem 1.5rem 4rem; background: #fff; }
h1 { font-size: 1.7rem; margin: 0.2rem 0 0.8rem; }
h2 { font-size: 1.25rem; margin-top: 2.2rem; padding-bottom: 0.25rem; border-bottom: 1px solid #ddd; }
nav ol { font-size: 0.9rem; margin: 0.4rem 0; }
a { color: #0b5cad; }
table.data { border-collapse: collapse; margin: 0.8rem 0 1.4rem; font-size: 0.88rem;
             font-variant-numeric: tabular-nums; display: block; overflow-x: auto; max-width: 100%; }
table.data caption { caption-side: top; text-align: left; font-weight: 600; padding: 0.3rem 0; }
table.data th, table.data td { padding: 0.28rem 0.7rem; border-bottom: 1px solid #e3e3e3;
                               text-align: left; white-space: nowrap; }
table.data .num { text-align: right; }
table.data th { background: #f3f4f6; border-bottom: 2px solid #c9ccd1; }
table.data tbody tr:nth-child(even) { background: #fafafa; }
table.data tbody tr:hover { background: #eef4fb; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 1.6rem; }
figure { margin: 0; }
figure.wide { grid-column: 1 / -1; }
figure img { width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.86rem; color: #444; margin-top: 0.3rem; }
figcaption .ref { font-weight: 600; color: #1d1d1f; }
dl.provenance { display: grid; grid-template-columns: max-content 1fr; gap: 0.2rem 1rem; font-size: 0.88rem; }
dl.provenance dt { font-weight: 600; }
dl.provenance dd { margin: 0; overflow-wrap: anywhere; }
pre { background: #f6f8fa; padding: 0.8rem 1rem; overflow-x: auto; font-size: 0.85rem; border-radius: 4px; }
code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; }
"""


def table_html(
    df: pd.DataFrame,
    caption: str,
    *,
    index: bool = False,
    table_id: str | None = None,
    format_cell: Callable[[Any, str], str] | None = None,
) -> str:
    """A DataFrame as an HTML `<table class="data">` with a `<caption>`; every cell and header escaped.

    Numbers are right-aligned, text left-aligned. `format_cell(value, column)` writes a cell
    (e.g. the Markdown tables' own, to show fractions as percentages the same way); by default
    floats get 4 significant digits (thousands grouped from 1000 on), missing values an en dash.
    `index=True` shows the index as the first columns; tuple column names (a MultiIndex) are
    joined with " / ". `table_id` (default: `table-` and the caption's slug) is its anchor."""
    fmt = format_cell or _cell
    frame = df.reset_index() if index else df
    numeric = [
        pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
        for c in frame.columns
    ]
    names = [
        " / ".join(str(p) for p in c if str(p)) if isinstance(c, tuple) else str(c) for c in frame.columns
    ]
    head = "".join(f"<th{_NUM if num else ''}>{escape(n)}</th>" for n, num in zip(names, numeric))
    rows = []
    for values in frame.itertuples(index=False, name=None):
        cells = (
            f"<td{_NUM if num else ''}>{escape(fmt(v, c))}</td>"
            for v, c, num in zip(values, frame.columns, numeric)
        )
        rows.append(f"<tr>{''.join(cells)}</tr>")
    anchor = escape(table_id or f"table-{slug(caption)}", quote=True)
    return (
        f'<table class="data" id="{anchor}">\n<caption>{escape(caption)}</caption>\n'
        f"<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table>"
    )


_NUM = ' class="num"'


def _cell(value: Any, column: str) -> str:
    """The default cell text: missing -> en dash, floats by `_format_float`, the rest as str."""
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


def slug(text: str) -> str:
    """An HTML id from a text: lowercase words joined by '-'."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


def write_index(
    out_dir: Path,
    *,
    title: str,
    intro: list[str],
    sections: list[tuple[str, str]],
    figures: list[Figure],
    provenance: dict[str, Any],
    commands: list[str],
) -> Path:
    """Write `out_dir/index.html` and return its path.

    `intro`: paragraphs (plain text); `sections`: (heading, HTML fragment) pairs, in order;
    `figures`: shown with their titles and captions, linking to PNG and SVG by relative path;
    `provenance`: key -> value (dicts and lists shown as JSON); `commands`: shell commands that
    regenerate the report's inputs and the report."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ids = _unique_ids([f"sec-{slug(h)}" for h, _ in sections])
    toc = list(zip(ids, (h for h, _ in sections)))
    if figures:
        toc.append(("figures", "Figures"))
    toc += [("provenance", "Provenance")] if provenance else []
    toc += [("commands", "Commands")] if commands else []
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head>\n<meta charset="utf-8">\n<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>",
        "<body>",
        f"<h1>{escape(title)}</h1>",
        *(f"<p>{escape(p)}</p>" for p in intro),
        "<nav><ol>" + "".join(f'<li><a href="#{i}">{escape(h)}</a></li>' for i, h in toc) + "</ol></nav>",
        *(
            f'<section id="{i}">\n<h2>{escape(h)}</h2>\n{fragment}\n</section>'
            for i, (h, fragment) in zip(ids, sections)
        ),
    ]
    if figures:
        parts.append(_figures_html(out_dir, figures))
    if provenance:
        parts.append(_provenance_html(provenance))
    if commands:
        listing = "\n".join(escape(c) for c in commands)
        parts.append(
            f'<section id="commands">\n<h2>Commands</h2>\n<pre><code>{listing}</code></pre>\n</section>'
        )
    parts += ["</body>", "</html>"]
    path = out_dir / "index.html"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path


def _unique_ids(ids: list[str]) -> list[str]:
    """`ids` with repeats numbered (`a`, `a-2`, ...)."""
    seen: dict[str, int] = {}
    out = []
    for i in ids:
        seen[i] = seen.get(i, 0) + 1
        out.append(i if seen[i] == 1 else f"{i}-{seen[i]}")
    return out


def _figures_html(out_dir: Path, figures: list[Figure]) -> str:
    """The figures section: a grid of <figure>s, each image linking to its full-size PNG."""
    items = []
    for f in figures:
        png, svg = (escape(_relative(p, out_dir), quote=True) for p in (f.png, f.svg))
        ref = f"{escape(f.paper_ref)} \u2014 " if f.paper_ref else ""
        wide = ' class="wide"' if _png_width(f.png) > WIDE_PX else ""
        items.append(
            f'<figure id="{escape(f.key, quote=True)}"{wide}>\n'
            f'<a href="{png}"><img src="{png}" alt="{escape(f.title, quote=True)}" loading="eager"></a>\n'
            f'<figcaption><span class="ref">{ref}{escape(f.title)}.</span> {escape(f.caption)} '
            f'<a href="{svg}">SVG</a></figcaption>\n</figure>'
        )
    return (
        '<section id="figures">\n<h2>Figures</h2>\n<div class="figures">\n'
        + "\n".join(items)
        + "\n</div>\n</section>"
    )


def _png_width(path: Path) -> int:
    """A PNG's width in pixels from its header (0 when unreadable)."""
    try:
        with open(path, "rb") as f:
            head = f.read(24)
    except OSError:
        return 0
    return int.from_bytes(head[16:20], "big") if head[:8] == b"\x89PNG\r\n\x1a\n" else 0


def _relative(path: Path, out_dir: Path) -> str:
    """`path` relative to the page (forward slashes, so the link works on every platform)."""
    return Path(os.path.relpath(Path(path).resolve(), out_dir.resolve())).as_posix()


def _provenance_html(provenance: dict[str, Any]) -> str:
    """Provenance as a definition list; non-string values as compact JSON."""
    rows = []
    for key, value in provenance.items():
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        rows.append(f"<dt>{escape(str(key))}</dt><dd><code>{escape(text)}</code></dd>")
    return (
        '<section id="provenance">\n<h2>Provenance</h2>\n<dl class="provenance">\n'
        + "\n".join(rows)
        + "\n</dl>\n</section>"
    )
