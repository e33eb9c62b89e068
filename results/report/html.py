"""The report's `index.html`: one self-contained page (inline CSS and script, no network) that
opens with the bottom line, then the learning curves, the tables, the other figures, provenance
and the commands that made it.

    write_index(out_dir, title=..., intro=[...], bottom_line=[(label, sentence)], sections=[(heading, html)],
                figures=[...], provenance={...}, commands=[...]) -> out_dir / "index.html"
    table_html(df, caption) -> an HTML fragment for `sections` (`results.report.html_tables`)

Figures go where their `section` says: "bottom line" beside the sentences, "curves" in the
learning curves, "search" (a sweep's) after them, the rest under "More figures"; each links its PNG, SVG and PDF. Interactivity
is one small inline script: a click (or Enter) on a table's header sorts its rows by that
column, numbers by their value (`data-sort`), text alphabetically; without script the page
reads the same, unsorted. Every text given as a `str` is escaped; only the `sections`
fragments are inserted as they are (make them with `table_html` or other escaping code).
"""

from __future__ import annotations

import os
from html import escape
from pathlib import Path
from typing import Any

from results.report.html_tables import provenance_table, slug, table_html
from results.report.plotting import DPI, Figure

__all__ = ["slug", "table_html", "write_index"]

SECTIONS = {"curves": "Learning curves", "search": "The search"}
"""the figure sections shown after the bottom line, in this order, with their headings"""
WIDE_PX = 1400
"""figures wider than this (text-width ones, at print resolution) take a whole row of the grid"""
PX_PER_INCH = 120
"""Screen pixels per inch of a figure's print size: every image is shown at most this large, so
column-width and text-width figures show their fonts at one size. Scaled to fit its box instead,
the bottom line's column-width forest plot showed at 196 pixels per inch beside curves at 122 (in
headless Chromium at 1440 px; `test_report_html` checks the scale)."""

CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; color: #1d1d1f;
       max-width: 1240px; margin: 0 auto; padding: 1rem 1.5rem 4rem; background: #fff; }
h1 { font-size: 1.55rem; margin: 0.2rem 0 0.3rem; line-height: 1.25; }
h2 { font-size: 1.2rem; margin-top: 2rem; padding-bottom: 0.2rem; border-bottom: 1px solid #ddd; }
p.lede { color: #444; margin: 0.2rem 0; font-size: 0.92rem; }
nav { font-size: 0.85rem; margin: 0.5rem 0 0.8rem; color: #666; }
nav a { margin-right: 0.9rem; white-space: nowrap; }
a { color: #0b5cad; }
#bottom-line { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1.1fr); gap: 1.4rem;
               align-items: start; }
#bottom-line h2 { grid-column: 1 / -1; margin-top: 0.6rem; }
ul.claims { margin: 0; padding-left: 1.1rem; font-size: 0.92rem; }
ul.claims li { margin-bottom: 0.45rem; }
ul.claims .label { font-weight: 600; }
div.scroll { overflow-x: auto; max-width: 100%; margin: 0.8rem 0 1.4rem; }
table.data { border-collapse: collapse; font-size: 0.86rem; font-variant-numeric: tabular-nums; }
table.data caption { caption-side: top; text-align: left; font-weight: 600; padding: 0.3rem 0;
                     max-width: 70rem; }
table.data th, table.data td { padding: 0.25rem 0.65rem; border-bottom: 1px solid #e3e3e3;
                               text-align: left; white-space: nowrap; }
table.data .num { text-align: right; }
table.data th { background: #f3f4f6; border-bottom: 2px solid #c9ccd1; cursor: pointer; user-select: none; }
table.data th[aria-sort="ascending"]::after { content: " \\25B2"; font-size: 0.7em; }
table.data th[aria-sort="descending"]::after { content: " \\25BC"; font-size: 0.7em; }
table.data tbody tr:nth-child(even) { background: #fafafa; }
table.data tbody tr:hover { background: #eef4fb; }
table.data a.more { font-size: 0.8em; }
table.provenance { border-collapse: collapse; font-size: 0.84rem; }
table.provenance th { text-align: left; font-weight: 600; padding: 0.15rem 1rem 0.15rem 0; vertical-align: top;
                      white-space: nowrap; }
table.provenance td { padding: 0.15rem 0; overflow-wrap: anywhere; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(380px, 1fr)); gap: 1.4rem; }
figure { margin: 0; }
figure.wide { grid-column: 1 / -1; }
figure img { width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.84rem; color: #444; margin-top: 0.3rem; }
figcaption .ref { font-weight: 600; color: #1d1d1f; }
pre { background: #f6f8fa; padding: 0.8rem 1rem; overflow-x: auto; font-size: 0.85rem; border-radius: 4px; }
code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; }
"""

SCRIPT = """
document.querySelectorAll("table.data").forEach(function (table) {
  var heads = table.tHead ? table.tHead.rows[0].cells : [];
  Array.prototype.forEach.call(heads, function (th, col) {
    th.tabIndex = 0;
    th.title = "sort by this column";
    function key(row) {
      var c = row.cells[col];
      if (!c) return [2, ""];
      var v = c.hasAttribute("data-sort") ? c.getAttribute("data-sort") : c.textContent.trim();
      if (v === "" || v === "\\u2013" || v === "-") return [2, ""];
      var n = Number(v);
      return isNaN(n) ? [1, v.toLowerCase()] : [0, n];
    }
    function sort() {
      var up = th.getAttribute("aria-sort") !== "ascending";
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", up ? "ascending" : "descending");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x[0] !== y[0]) return x[0] - y[0];
        var d = x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0;
        return up ? d : -d;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    }
    th.addEventListener("click", sort);
    th.addEventListener("keydown", function (e) { if (e.key === "Enter") sort(); });
  });
});
"""


def write_index(
    out_dir: Path,
    *,
    title: str,
    intro: list[str],
    sections: list[tuple[str, str]],
    figures: list[Figure],
    provenance: dict[str, Any],
    commands: list[str],
    bottom_line: list[tuple[str, str]] = (),
) -> Path:
    """Write `out_dir/index.html` and return its path.

    `intro`: paragraphs (plain text) under the title; `bottom_line`: (label, sentence) pairs;
    `sections`: (heading, HTML fragment) pairs, in order, after the learning curves; `figures`:
    shown by their `section`, with their titles and captions, linking to PNG, SVG and PDF by
    relative path; `provenance`: key -> value (a table: nested values as `a / b` rows);
    `commands`: shell commands that regenerate the report's inputs and the report. Sections
    without content are left out."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    by_section = {name: [f for f in figures if f.section == name] for name in ("bottom line", *SECTIONS)}
    more = [f for f in figures if f.section not in by_section]
    ids = _unique_ids([f"sec-{slug(h)}" for h, _ in sections])
    blocks: list[tuple[str, str, str]] = []  # (id, heading in the nav, html)
    if bottom_line or by_section["bottom line"]:
        blocks.append(
            ("bottom-line", "Bottom line", _bottom_line_html(out_dir, bottom_line, by_section["bottom line"]))
        )
    for name, heading in SECTIONS.items():
        if by_section[name]:
            blocks.append((name, heading, _figures_html(out_dir, name, heading, by_section[name])))
    blocks += [
        (i, h, f'<section id="{i}">\n<h2>{escape(h)}</h2>\n{fragment}\n</section>')
        for i, (h, fragment) in zip(ids, sections)
    ]
    if more:
        blocks.append(("figures", "More figures", _figures_html(out_dir, "figures", "More figures", more)))
    if provenance:
        blocks.append(
            ("provenance", "Provenance", _section("provenance", "Provenance", provenance_table(provenance)))
        )
    if commands:
        listing = "\n".join(escape(c) for c in commands)
        blocks.append(
            ("commands", "Commands", _section("commands", "Commands", f"<pre><code>{listing}</code></pre>"))
        )
    nav = "<nav>" + " ".join(f'<a href="#{i}">{escape(h)}</a>' for i, h, _ in blocks) + "</nav>"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head>\n<meta charset="utf-8">\n<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>",
        "<body>",
        f"<h1>{escape(title)}</h1>",
        *(f'<p class="lede">{escape(p)}</p>' for p in intro),
        nav,
        *(html for _, _, html in blocks),
        f"<script>{SCRIPT}</script>",
        "</body>",
        "</html>",
    ]
    path = out_dir / "index.html"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path


def _section(id_: str, heading: str, body: str) -> str:
    return f'<section id="{id_}">\n<h2>{escape(heading)}</h2>\n{body}\n</section>'


CLAIMS_OPEN, CLAIMS_CLOSE = '<ul class="claims">', "</ul>"
"""How the bottom line's list of sentences opens and closes (`claims_html`)."""


def claims_html(lines: list[tuple[str, str]]) -> str:
    """The bottom line's (label, sentence) pairs as its list."""
    items = "".join(
        f'<li><span class="label">{escape(label)}:</span> {escape(text)}</li>' for label, text in lines
    )
    return f"{CLAIMS_OPEN}{items}{CLAIMS_CLOSE}"


def _bottom_line_html(out_dir: Path, lines: list[tuple[str, str]], figures: list[Figure]) -> str:
    """The sentences, and beside them the bottom line's column-width figures (the forest plot of
    a few differences); a text-width one (many) goes under both, across the page."""
    claims = claims_html(lines) if lines else "<div></div>"
    wide = [_png_size(f.png)[0] > WIDE_PX for f in figures]
    beside = "".join(_figure_html(out_dir, f, wide=False) for f, w in zip(figures, wide) if not w)
    under = "".join(_figure_html(out_dir, f, wide=True) for f, w in zip(figures, wide) if w)
    return (
        f'<section id="bottom-line">\n<h2>Bottom line</h2>\n{claims}\n<div>{beside}</div>\n{under}</section>'
    )


def _unique_ids(ids: list[str]) -> list[str]:
    """`ids` with repeats numbered (`a`, `a-2`, ...)."""
    seen: dict[str, int] = {}
    out = []
    for i in ids:
        seen[i] = seen.get(i, 0) + 1
        out.append(i if seen[i] == 1 else f"{i}-{seen[i]}")
    return out


def _figure_html(out_dir: Path, f: Figure, wide: bool | None = None) -> str:
    """One <figure>: the image linking to its full-size PNG, title, caption, and its files."""
    png = escape(_relative(f.png, out_dir), quote=True)
    files = [("PNG", f.png), ("SVG", f.svg)] + ([("PDF", f.pdf)] if f.pdf is not None else [])
    links = " \u00b7 ".join(
        f'<a href="{escape(_relative(p, out_dir), quote=True)}">{name}</a>'
        for name, p in files
        if Path(p).exists()
    )
    ref = f"{escape(f.paper_ref)} \u2014 " if f.paper_ref else ""
    pixels, inches = _png_size(f.png)  # one read of the header for both
    wide = pixels > WIDE_PX if wide is None else wide
    css = ' class="wide"' if wide else ""
    size = f' style="max-width: {round(inches * PX_PER_INCH)}px"' if inches else ""
    return (
        f'<figure id="{escape(f.key, quote=True)}"{css}>\n'
        f'<a href="{png}"><img src="{png}"{size} alt="{escape(f.title, quote=True)}" loading="eager"></a>\n'
        f'<figcaption><span class="ref">{ref}{escape(f.title)}.</span> {escape(f.caption)} {links}</figcaption>\n'
        "</figure>"
    )


def _figures_html(out_dir: Path, id_: str, heading: str, figures: list[Figure]) -> str:
    """A section of figures in a grid."""
    items = "\n".join(_figure_html(out_dir, f) for f in figures)
    return f'<section id="{id_}">\n<h2>{escape(heading)}</h2>\n<div class="figures">\n{items}\n</div>\n</section>'


def _png_size(path: Path) -> tuple[int, float]:
    """A PNG's width in pixels and in print inches, from its header: the pixels over the
    resolution its pHYs chunk states (matplotlib writes the figure's dpi there), over `DPI` where
    it states none; (0, 0.0) when unreadable."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)  # pHYs comes before the image data
    except OSError:
        return 0, 0.0
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return 0, 0.0
    width, at = int.from_bytes(head[16:20], "big"), head.find(b"pHYs")
    per_metre = int.from_bytes(head[at + 4 : at + 8], "big") if at > 0 else 0
    metre = at > 0 and head[at + 12] == 1  # unit 1: pixels per metre; 0: an aspect ratio only
    return width, (width / (per_metre * 0.0254) if metre and per_metre else width / DPI)


def _relative(path: Path, out_dir: Path) -> str:
    """`path` relative to the page (forward slashes, so the link works on every platform)."""
    return Path(os.path.relpath(Path(path).resolve(), out_dir.resolve())).as_posix()
