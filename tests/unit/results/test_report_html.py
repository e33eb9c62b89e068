"""`results.report.html`: index.html from synthetic runs, checked as text and rendered in real
headless Chromium (every image decodes, every table is there, a click on a header sorts its
table, every link resolves, wide tables scroll in their box; skipped without Chromium)."""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from results.comparison import load
from results.report.figures import write_figures
from results.report.html import PX_PER_INCH, _png_size, table_html, write_index
from results.report.plotting import COLUMN_IN, DPI, TEXT_IN, Figure
from tests.requires import chromium

from .synthetic_runs import final_scores_frame

PROBE = """<script>
function column(table, col) {
  return Array.from(table.tBodies[0].rows).map(function (r) {
    var c = r.cells[col];
    return c.hasAttribute("data-sort") ? c.getAttribute("data-sort") : c.textContent.trim();
  });
}
function sorts(table) {
  // click each header twice: the column's keys as the rows then stand, ascending and descending
  return Array.from(table.tHead.rows[0].cells).map(function (th, col) {
    th.click();
    var up = column(table, col), upSort = th.getAttribute("aria-sort");
    th.click();
    return {header: th.textContent, up: up, down: column(table, col), upSort: upSort,
            downSort: th.getAttribute("aria-sort"), numeric: th.classList.contains("num")};
  });
}
window.addEventListener("load", function () {
  var images = Array.from(document.images).map(function (i) {
    return {src: i.getAttribute("src"), complete: i.complete, width: i.naturalWidth, height: i.naturalHeight,
            shown: i.clientWidth};
  });
  var tables = Array.from(document.querySelectorAll("table.data")).map(function (t) {
    var box = t.parentElement;
    return {id: t.id, caption: t.caption ? t.caption.textContent : null, rows: t.rows.length,
            scrolls: box.classList.contains("scroll") && getComputedStyle(box).overflowX === "auto",
            wider: t.offsetWidth > box.clientWidth};
  });
  var links = Array.from(document.querySelectorAll("a[href]")).map(function (a) {
    var href = a.getAttribute("href");
    return {href: href, target: href[0] === "#" ? !!document.getElementById(href.slice(1)) : null};
  });
  var sorted = {};
  document.querySelectorAll("table.data").forEach(function (t) { sorted[t.id] = sorts(t); });
  var out = document.createElement("pre");
  out.id = "probe-result";
  out.textContent = JSON.stringify({title: document.title, images: images, tables: tables, links: links,
    sorted: sorted, figures: document.querySelectorAll("figure").length,
    pageScrollsSideways: document.documentElement.scrollWidth > window.innerWidth,
    h2: Array.from(document.querySelectorAll("h2")).map(function (h) { return h.textContent; })});
  document.body.appendChild(out);
});
</script>
"""


def render(index: Path, profile: Path) -> dict:
    """Load `index` (a copy with the PROBE script added) in headless Chromium after the load
    event, i.e. once every image has loaded or failed, and return what PROBE found."""
    probe = index.with_name("probe.html")
    probe.write_text(index.read_text().replace("</body>", PROBE + "</body>"))
    command = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-extensions",
        "--window-size=1440,900",
        f"--user-data-dir={profile}",
        "--dump-dom",
        probe.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="probe-result">(.*?)</pre>', done.stdout, re.S)
    assert found, f"no probe result (rc {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def _report(dirs: list[Path], out: Path) -> tuple[Path, list[Figure]]:
    """Figures and index.html the way `bench report` makes them, with two tables."""
    comparison = load(dirs)
    figures = write_figures(comparison, out / "figures", final_scores_frame())
    scores = final_scores_frame()
    runs = comparison.runs[["run", "arm", "seed", "state", "steps", "trajectories"]]
    sections = [
        ("Final scores", table_html(scores, "Final scores (mean and 95% CI over seeds)")),
        ("Runs", table_html(runs, "Runs and their consumption")),
    ]
    index = write_index(
        out,
        title="Comparison <arith> & drift",
        intro=["Synthetic runs: 3 arms x 2 seeds."],
        sections=sections,
        figures=figures,
        provenance={"commit": "0" * 40, "seeds": [0, 1]},
        commands=["bench report cmp --out report"],
    )
    return index, figures


def test_table_html_escapes_cells_formats_numbers_and_carries_its_caption():
    df = pd.DataFrame(
        {"arm": ["<b>sao</b>", "grpo & co"], "mean": [0.123456, np.nan], "tokens": [12345.6, 3.0]}
    )
    text = table_html(df, "Scores <final> & more")
    assert "<caption>Scores &lt;final&gt; &amp; more</caption>" in text
    assert "&lt;b&gt;sao&lt;/b&gt;" in text and "grpo &amp; co" in text and "<b>" not in text
    assert ">0.1235<" in text and ">12,346<" in text and ">3<" in text and "\u2013" in text
    assert '<table class="data" id="table-scores-final-more">' in text
    assert '<th>arm</th><th class="num">mean</th>' in text
    assert '<td class="num" data-sort="0.123456">0.1235</td>' in text  # the page sorts by the value
    assert '<td class="num" data-sort="">\u2013</td>' in text and text.startswith('<div class="scroll">')


def test_table_html_can_show_the_index_and_joins_multiindex_column_names():
    df = pd.DataFrame({("score", "mean"): [0.5], ("score", "n"): [3]}, index=pd.Index(["sao"], name="arm"))
    text = table_html(df, "t", index=True, table_id="x")
    assert '<th>arm</th><th class="num">score / mean</th><th class="num">score / n</th>' in text
    assert "<td>sao</td>" in text and '<td class="num" data-sort="3.0">3</td>' in text and 'id="x"' in text


def test_table_html_writes_cells_with_the_callers_formatter():
    df = pd.DataFrame({"arm": ["sao"], "mean": [0.5625], "p_value": [0.0001]})
    percent = {"mean"}

    def cell(value, column):
        if column in percent:
            return f"{100 * value:.1f}"
        return "<0.001" if column == "p_value" and value < 0.001 else str(value)

    text = table_html(df, "t", format_cell=cell)
    assert '<td class="num" data-sort="0.5625">56.2</td>' in text
    assert '<td class="num" data-sort="0.0001">&lt;0.001</td>' in text


def test_index_escapes_text_links_figures_relatively_and_needs_no_network(synthetic_dirs, tmp_path):
    index, figures = _report(synthetic_dirs, tmp_path / "report")
    text = index.read_text()
    assert "<title>Comparison &lt;arith&gt; &amp; drift</title>" in text
    assert "http://" not in text and "https://" not in text and "<script src" not in text
    assert text.count("<script>") == 1  # the sorting, inline
    for figure in figures:
        assert f'src="figures/{figure.key}.png"' in text and f'href="figures/{figure.key}.svg"' in text
        assert f'href="figures/{figure.key}.pdf"' in text and f'id="{figure.key}"' in text
    assert (
        text.count('<table class="data"') == 2
        and 'href="#sec-final-scores"' in text
        and 'id="sec-runs"' in text
    )
    assert "<tr><th>seeds</th><td><code>0, 1</code></td></tr>" in text  # provenance as a table
    assert "<pre><code>bench report cmp --out report</code></pre>" in text


def test_repeated_section_headings_get_distinct_anchors(tmp_path):
    index = write_index(
        tmp_path,
        title="t",
        intro=[],
        sections=[("A", "<p>1</p>"), ("A", "<p>2</p>")],
        figures=[],
        provenance={},
        commands=[],
    )
    text = index.read_text()
    assert 'id="sec-a"' in text and 'id="sec-a-2"' in text and "Provenance" not in text
    assert (
        "Bottom line" not in text and "Learning curves" not in text
    )  # sections without content are left out


def test_a_figure_is_shown_at_most_at_its_print_width_at_one_scale(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure as MplFigure

    for dpi, inches in ((300, 3.25), (110, 7.0), (300, 6.75)):
        fig = MplFigure(figsize=(inches, 2), dpi=dpi)
        fig.savefig(tmp_path / f"{dpi}-{inches}.png", dpi=dpi)
        assert _png_size(tmp_path / f"{dpi}-{inches}.png")[1] == pytest.approx(inches, abs=0.01)
    bare = tmp_path / "bare.png"  # the signature and IHDR only, no pHYs: the package's DPI is assumed
    bare.write_bytes((tmp_path / "300-3.25.png").read_bytes()[:33])
    assert _png_size(bare) == (975, pytest.approx(975 / DPI)) and _png_size(tmp_path / "none.png") == (0, 0)
    figure = Figure(
        "forest", "t", "c", tmp_path / "300-3.25.png", tmp_path / "300-3.25.svg", section="bottom line"
    )
    text = write_index(
        tmp_path, title="t", intro=[], sections=[], figures=[figure], provenance={}, commands=[]
    ).read_text()
    assert f'style="max-width: {round(3.25 * PX_PER_INCH)}px"' in text


@pytest.mark.chromium
def test_index_renders_in_headless_chromium_with_every_image_and_table(synthetic_dirs, tmp_path):
    index, figures = _report(synthetic_dirs, tmp_path / "report")
    page = render(index, tmp_path / "profile")
    assert page["title"] == "Comparison <arith> & drift"
    assert page["figures"] == len(figures) >= 10
    assert sorted(i["src"] for i in page["images"]) == sorted(f"figures/{f.key}.png" for f in figures)
    broken = [i["src"] for i in page["images"] if not (i["complete"] and i["width"] > 0 and i["height"] > 0)]
    assert not broken, f"images that did not load: {broken}"
    captions = {t["caption"]: t["rows"] for t in page["tables"]}
    assert captions == {"Final scores (mean and 95% CI over seeds)": 7, "Runs and their consumption": 9}


def _keys(values: list[str], numeric: bool) -> list:
    """Sort keys as the page's script reads them: numbers, then text; missing ones last."""
    present = [v for v in values if v not in ("", "-", "\u2013")]
    return [float(v) for v in present] if numeric else [v.lower() for v in present]


@pytest.mark.chromium
def test_a_report_page_sorts_its_tables_and_every_link_resolves(tmp_path):
    from results.report import write_report

    from .synthetic_runs import write_comparison

    out = write_comparison(
        tmp_path / "cmp", arms=("sao", "grpo"), seeds=(0, 1, 2), steps=8, final_eval=(12, 2)
    )
    (out / "logs").mkdir()
    (out / "logs" / "sao-s0.run.log").write_text("trained\n")
    paths = write_report([out], tmp_path / "report", n_boot=200)
    page = render(paths.index_html, tmp_path / "profile")
    assert page["title"] == "arith: sao, grpo at trajectories=128 (3 seeds per arm)"
    assert (
        page["h2"][:2] == ["Bottom line", "Learning curves"]
        and "Config differences between arms" in page["h2"]
    )
    diff = next(t for t in page["tables"] if t["caption"].startswith("The config.json fields"))
    assert diff["rows"] == 2  # the header and "algo": the only field the arms' configs differ in
    broken = [i["src"] for i in page["images"] if not (i["complete"] and i["width"] > 0)]
    assert page["images"] and not broken
    # one scale for every figure at 1440 px: the bottom line's column-width forest plot no
    # longer fills a box twice its size, and the text-width curves are not shrunk
    per_inch = {i["src"]: i["shown"] / (i["width"] / DPI) for i in page["images"]}
    assert all(0.9 * PX_PER_INCH <= s <= PX_PER_INCH + 0.5 for s in per_inch.values()), per_inch
    assert {round(i["width"] / DPI, 2) for i in page["images"]} >= {COLUMN_IN, TEXT_IN}
    anchors = [link["href"] for link in page["links"] if link["target"] is False]
    assert not anchors, f"links to anchors that are not on the page: {anchors}"
    files = [link["href"] for link in page["links"] if link["target"] is None]
    missing = [h for h in files if not (paths.index_html.parent / h.rstrip("/")).exists()]
    assert not missing, f"links to files that do not exist: {missing}"
    assert any(h.endswith("runs/sao-s0/") for h in files) and any(
        h.endswith("logs/sao-s0.run.log") for h in files
    )
    assert any(h.endswith("runs/sao-s0/config.json") for h in files) and any(
        h.endswith("status/sao-s0.json") for h in files
    )
    checked = 0
    for table, columns in page["sorted"].items():
        for c in columns:
            up, down = _keys(c["up"], c["numeric"]), _keys(c["down"], c["numeric"])
            assert (c["upSort"], c["downSort"]) == ("ascending", "descending"), (table, c["header"])
            assert up == sorted(up) and down == sorted(down, reverse=True), (table, c["header"], up, down)
            checked += c["numeric"] and len(set(up)) > 1
    assert checked >= 5  # real reorderings of numeric columns, by their values (not their text)
    assert all(t["scrolls"] for t in page["tables"]) and not page["pageScrollsSideways"]
