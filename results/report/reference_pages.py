"""A reference page in parts gets its bottom line judged over all its parts.

A reference comparison may be reported in several directories (`claims.REFERENCE_PARTS`: arms run
after the first report's run directories were gone). Its claims, and the Holm family of the
primary ones, are judged over all parts by the verdict table (`evidence.Reference`); the first
part's page was written before the others existed, so `bench report --verdicts` rewrites its
bottom-line sentences to the verdict table's and redraws its forest plot from them. Its other
figures and its tables stay as `bench report` wrote them.
"""

from __future__ import annotations

from pathlib import Path

from results.report.bottom_figures import forest_plot
from results.report.bottom_line import bottom_lines, sentence
from results.report.claims import REFERENCE_PARTS
from results.report.evidence import Reference
from results.report.html import CLAIMS_CLOSE, CLAIMS_OPEN, claims_html
from results.report.stability_verdicts import stability_sentences


def refresh_reference_pages(root: Path) -> list[Path]:
    """Rewrite the bottom-line sentences of each reference page in parts (`REFERENCE_PARTS`,
    once a part exists): its claims are judged over all parts, as the verdict table judges them
    (a part reported later changes the Holm family of the first page, whose runs may be gone).
    Its forest plot is redrawn from the same lines; the other figures and the tables stay as
    `bench report` wrote them. Returns the pages rewritten."""
    written = []
    for name, parts in REFERENCE_PARTS.items():
        page = root / name / "index.html"
        if not any((root / part).exists() for part in parts) or not page.exists():
            continue
        own = Reference(root / name)  # the page's own rows; judged in the joined reference
        lines = bottom_lines(
            own.diffs, own.scores, own.per_seed, own.matrices, name, Reference.named(root, name)
        )
        forest_plot(lines, root / name / "figures")  # its levels and filled markers follow the lines
        sentences = [sentence(line) for line in lines] + stability_sentences(own.runs)
        text = page.read_text()
        start = text.find(CLAIMS_OPEN)
        end = text.find(CLAIMS_CLOSE, start)
        if start < 0 or end < 0:
            raise ValueError(f"{page}: no bottom-line list to rewrite ({CLAIMS_OPEN} ... {CLAIMS_CLOSE})")
        page.write_text(text[:start] + claims_html(sentences) + text[end + len(CLAIMS_CLOSE) :])
        written.append(page)
    return written
