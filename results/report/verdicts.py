"""VERDICTS.md and README.md's table: one row per claim of the SAO paper, the paper's numbers
beside this harness's, and what the evidence shows.

    write_verdicts(Path("results/reference"), Path("README.md"))

Each claim (`results.report.claims`) names the reference comparison that tests it; its row is
computed from that directory's committed files only (`results.report.evidence`). The rule:

1. Two intervals for arm minus other: the two-level bootstrap (problems and seeds) and the
   seed-level interval (Welch's t over per-seed means, calibrated at 3-10 seeds).
2. The primary claims (Table 1, every arm tuned) are one family: p = max(bootstrap p, seed-level
   p) (the p-value of "both intervals exclude 0"), Holm-adjusted over the declared family of m
   claims (`benchmarks.multiplicity`), where a claim not run yet enters with p = 1: it is never
   shown, and running fewer of the claims makes none of the others easier to show; each primary
   row's intervals are at the level Holm tests it at (alpha / (m - i + 1) for the i-th smallest
   p). Every other row is exploratory: 95% intervals, no adjustment.
3. A direction is shown only where both intervals exclude 0 on the same side and, for a primary
   row, its Holm-adjusted p is below 0.05: "same direction, at toy scale" (or "opposite
   direction"); a tiny model on synthetic tasks is not the paper's setting, so a verdict says
   only whether the sign of the paper's gap came out here. Where one interval excludes 0 and the
   other does not, the intervals disagree; where neither does, no direction is shown, and the
   minimum detectable effect (80% power; alpha 0.05, or 0.05 / m for primary rows) says how big
   a gap the row could have shown.
4. Seeds whose means differ beyond their evaluation's sampling noise are named in their own
   column (`benchmarks.seed_stats.seed_noise_test`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmarks.multiplicity import holm, holm_levels
from benchmarks.run_stats import Direction, format_p, p_floor
from results.report.claims import CLAIMS, Claim, paper_text
from results.report.differences import both_intervals_verdict, row_mde
from results.report.evidence import FLOPS_NOT_COUNTED, Evidence, Reference, compute_comparison
from results.report.findings import Finding
from results.report.render import to_markdown
from results.report.stability_verdicts import stability_rows

VERDICTS_FILE = "VERDICTS.md"
README_START, README_END = "<!-- verdicts:start -->", "<!-- verdicts:end -->"
ALPHA = 0.05
DECLARED_FAMILY = frozenset(c.label for c in CLAIMS if c.primary)
"""The primary claims' labels: the Holm family, whichever of them have been run."""


@dataclass(frozen=True)
class Verdict:
    """One claim's assessment."""

    claim: Claim
    evidence: Evidence | None
    budget: str
    compute: str  # how the arms' compute compares at the matched budget (`compute_comparison`)
    level: float  # the two-sided alpha of its intervals
    p: float  # max(bootstrap p, seed-level p); NaN without both
    p_adjusted: float | None  # Holm over the primary family; None for exploratory rows
    boot: tuple[float, float] | None
    welch: tuple[float, float] | None
    mde: float
    finding: Finding

    @property
    def p_is_floor(self) -> bool:
        """Whether p is the bootstrap's floor (only known to be below it)."""
        ev = self.evidence
        return ev is not None and self.p == ev.boot_p and ev.boot_p <= p_floor(ev.n_boot) * (1 + 1e-9)


def assess(root: Path) -> list[Verdict]:
    """Every claim's verdict from the reference comparisons under `root` (module docstring)."""
    references: dict[str, Reference] = {}
    evidence = []
    for claim in CLAIMS:
        if claim.reference not in references:  # several claims share one reference comparison
            references[claim.reference] = Reference.named(root, claim.reference)
        evidence.append(references[claim.reference].evidence(claim))
    budgets = [references[c.reference].budget_and_tuning(c) for c in CLAIMS]
    computes = [compute_comparison(references[c.reference].runs, c.arm, c.other) for c in CLAIMS]
    return judge(CLAIMS, evidence, budgets, computes)


def judge(claims, evidence: list[Evidence | None], budgets: list[str], computes: list[str]) -> list[Verdict]:
    """The verdict of each claim from its evidence (rules 1-3 of the module docstring), with its
    budget and how its arms' compute compares (`compute_comparison`) as given: the primary
    claims among `claims` that have evidence are the Holm family. `assess` judges the paper's
    claims over the reference root; a report (`results.report.bottom_line`) its own claims."""
    p = [_combined_p(ev) for ev in evidence]
    family = [i for i, c in enumerate(claims) if c.primary and not math.isnan(p[i])]
    # the declared family, run or not: a primary claim without evidence here enters as p = 1
    unrun = len(DECLARED_FAMILY - {claims[i].label for i in family})
    family_p = [p[i] for i in family] + [1.0] * unrun
    adjusted = dict(zip(family, holm(family_p))) if family else {}
    levels = dict(zip(family, holm_levels(family_p, ALPHA))) if family else {}
    out = []
    for i, (claim, ev) in enumerate(zip(claims, evidence)):
        level = levels.get(i, ALPHA)
        boot = welch = None
        mde = math.nan
        if ev is not None and ev.has_seed_level:
            boot = ev.boot_interval(1 - level)
            w = ev.welch(1 - level)
            welch = (w["ci_low"], w["ci_high"])
            w95 = ev.welch()
            mde_alpha = ALPHA / len(family_p) if i in levels else ALPHA
            mde = row_mde(w95["se"], w95["df"], *ev.boot, alpha=mde_alpha)
        finding = _finding(ev, boot, welch, adjusted.get(i))
        out.append(
            Verdict(
                claim, ev, budgets[i], computes[i], level, p[i], adjusted.get(i), boot, welch, mde, finding
            )
        )
    return out


def _combined_p(ev: Evidence | None) -> float:
    """max(bootstrap p, seed-level p): NaN where either is missing."""
    if ev is None or not ev.has_seed_level:
        return math.nan
    return max(ev.boot_p, ev.welch()["p_value"])


def _excludes_zero(interval: tuple[float, float]) -> bool:
    return interval[0] > 0 or interval[1] < 0


def _finding(ev, boot, welch, p_adjusted) -> Finding:
    """Rule 3 of the module docstring."""
    if ev is None:
        return Finding.NOT_RUN
    if boot is None or welch is None:
        return Finding.NEEDS_RERUN
    direction = both_intervals_verdict([boot, welch])
    if direction is Direction.NOT_DISTINGUISHABLE or (p_adjusted is not None and p_adjusted >= ALPHA):
        return Finding.DISAGREE if _excludes_zero(boot) != _excludes_zero(welch) else Finding.NOT_SHOWN
    return Finding.SAME if direction is Direction.BETTER else Finding.OPPOSITE


# ----------------------------------------------------------------------------- rendering


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def _interval(iv: tuple[float, float] | None, mark: str = "") -> str:
    return "-" if iv is None else f"[{_pts(iv[0])}, {_pts(iv[1])}]{mark}"


def _pct(mean: float, ci: tuple[float, float]) -> str:
    return f"{100 * mean:.1f} [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _boot_mark(v: Verdict) -> str:
    """† for a bootstrap that paired seeds across arms (older references), ≈ for a level read
    off the 95% interval as normal."""
    ev = v.evidence
    marks = "†" if ev.boot_seeds_paired else ""
    return marks + ("≈" if not ev.boot_exact and not math.isclose(v.level, ALPHA) else "")


def _adjusted_text(v: Verdict) -> str:
    if v.p_adjusted is None:
        return "-"
    text = f"{v.p_adjusted:.3g}"
    return f"< {text}" if v.p_is_floor else text


def verdict_text(v: Verdict) -> str:
    """The finding with its p: Holm's for a primary row, the label "exploratory" otherwise."""
    if v.finding in (Finding.NOT_RUN, Finding.NEEDS_RERUN):
        return str(v.finding)
    if v.p_adjusted is None:
        return f"{v.finding} (exploratory)"
    return f"{v.finding} (Holm p {'<' if v.p_is_floor else '='} {v.p_adjusted:.2g})"


def _seed_spread(v: Verdict) -> str:
    """The arms whose seeds differ beyond evaluation noise (p < 0.05), or "no" / "-"."""
    ev = v.evidence
    if ev is None or all(math.isnan(p) for p in ev.noise_p):
        return "-"
    flagged = [
        f"{arm} (p = {p:.2g})" for arm, p in zip((v.claim.arm, v.claim.other), ev.noise_p) if p < ALPHA
    ]
    bound = "" if ev.noise_exact else ", bound"
    return ("; ".join(flagged) + (f" ({bound[2:]})" if bound else "")) if flagged else "no"


def verdict_rows(root: Path, link_prefix: str = "") -> list[dict[str, str]]:
    """The full table: one row per claim (figure links relative to `root`, after `link_prefix`)."""
    rows = []
    for v in assess(root):
        claim, ev = v.claim, v.evidence
        row = {
            "claim": claim.label,
            "role": "primary" if claim.primary else "exploratory",
            "paper": paper_text(claim),
        }
        row.update(dict.fromkeys(_FULL_COLUMNS[3:], "-"))
        row["verdict"] = verdict_text(v)
        if ev is not None:
            welch = ev.welch() if ev.has_seed_level else None
            row.update(
                {
                    "here": f"{_pct(ev.mean_a, ev.ci_a)} vs {_pct(ev.mean_b, ev.ci_b)} ({claim.benchmark})",
                    "difference": _pts(ev.diff),
                    "bootstrap CI": _interval(
                        v.boot or ev.boot, _boot_mark(v) if v.boot else "†" * ev.boot_seeds_paired
                    ),
                    "seed-level CI": _interval(v.welch),
                    "level": f"{100 * (1 - v.level):.4g}%",
                    "p: bootstrap": format_p(ev.boot_p, ev.n_boot),
                    "p: seeds": "-" if welch is None else f"{welch['p_value']:.2g}",
                    "p: Holm": _adjusted_text(v),
                    "MDE": "-" if math.isnan(v.mde) else f"{100 * v.mde:.1f}",
                    "seeds": f"{ev.n_seeds[0]} vs {ev.n_seeds[1]}",
                    "seeds beyond noise": _seed_spread(v),
                    "budget, tuning": v.budget,
                    "compute": v.compute,
                    "figure": f"[{claim.figure}]({link_prefix}{claim.reference}/figures/{claim.figure})",
                }
            )
        rows.append(row)
    return rows


_FULL_COLUMNS = (
    "claim",
    "role",
    "paper",
    "here",
    "difference",
    "bootstrap CI",
    "seed-level CI",
    "level",
    "p: bootstrap",
    "p: seeds",
    "p: Holm",
    "MDE",
    "seeds",
    "seeds beyond noise",
    "budget, tuning",
    "compute",
    "verdict",
    "figure",
)


def compact_rows(root: Path, link_prefix: str = "") -> list[dict[str, str]]:
    """README's table: claim, difference with the envelope of its two intervals at the row's
    level (it excludes 0 exactly where both do), verdict, figure link."""
    rows = []
    for v in assess(root):
        ev, claim = v.evidence, v.claim
        interval = "-"
        if ev is not None:
            interval = _pts(ev.diff)
            if v.boot is not None:
                envelope = (min(v.boot[0], v.welch[0]), max(v.boot[1], v.welch[1]))
                interval += f" {_interval(envelope)}"
        link = (
            "-" if ev is None else f"[{claim.figure}]({link_prefix}{claim.reference}/figures/{claim.figure})"
        )
        rows.append(
            {
                "claim": claim.label,
                "difference [interval]": interval,
                "verdict": verdict_text(v),
                "figure": link,
            }
        )
    return rows


def verdicts_markdown(root: Path, link_prefix: str = "", compact: bool = False) -> str:
    """The verdict table as Markdown, then the stability claims' table
    (`results.report.stability_verdicts`): the full ones (VERDICTS.md) or the compact ones (README)."""
    rows = compact_rows(root, link_prefix) if compact else verdict_rows(root, link_prefix)
    frame = pd.DataFrame(rows)
    table = to_markdown(frame if compact else frame[list(_FULL_COLUMNS)]).rstrip("\n")
    stability = to_markdown(pd.DataFrame(stability_rows(root, link_prefix, compact))).rstrip("\n")
    return f"{table}\n\n{STABILITY_COMPACT if compact else STABILITY_HEADER}\n\n{stability}"


STABILITY_COMPACT = (
    "Stability under the off-policy regime (exploratory; survival to collapse, rule fixed before the runs):"
)
STABILITY_HEADER = """## Stability under the off-policy regime (exploratory)

The paper's stability claims (`results/report/stability_verdicts.py`), from the `stability`
reference: the engine sampling in bfloat16 against the float32 learner, weights pushed every 4
policy versions (REPRODUCE.md, rerun 2). A run collapsed at the first step >= 50 whose 20-step
trailing mean training reward fell below half its best earlier one (`results/collapse.py`, fixed
before the runs). The two arms' survival is compared by the log-rank statistic with its p exact by
permutation over every split of the runs (two-sided; the normal approximation is far too small at
a few runs per arm); a direction is shown where p <= 0.05, and each row says the smallest p its
runs could have given (3 vs 3: 0.1, so at 3 seeds no direction can be shown)."""


HEADER = """# Verdicts: the SAO paper's claims at this harness's scale

Generated by `bench report --verdicts results/reference --readme README.md` from the reference
comparisons' committed files (each listed with its command in REPRODUCE.md). Paper: its first
column, at GLM/Qwen3 scale; here: mean avg@k (%) over seeds with a 95% CI; differences in points
of %, problems paired, each arm's seeds independent.

How a row is judged (`results/report/verdicts.py`):
- Two intervals: the two-level bootstrap over seeds and problems, and the seed-level interval
  (Welch's t over per-seed means; its 95% covers the true difference in 94-97% of simulated
  comparisons at 3, 5 and 10 seeds, where the bootstrap at 3 seeds is too narrow).
- Primary claims: Table 1 with every arm tuned (`arith-tuned`), one family of the m = {m} declared
  claims: p = max(bootstrap p, seed-level p), Holm-adjusted over all m (family-wise error
  0.05 under any dependence; not BH, whose false-discovery guarantee suits screening many
  hypotheses, not a few claims read one by one); a claim not run yet enters with p = 1, so it is
  never shown and running fewer claims makes none of the others easier to show. Each primary
  row's intervals are at the level Holm tests it at (column "level"). The family was declared
  after the committed tuned reference had been read: it binds the re-runs. Every other row is
  exploratory: 95%, unadjusted.
- "same direction, at toy scale" only where both intervals exclude 0 on the paper's side (and,
  for primary rows, Holm p < 0.05): a tiny model on synthetic tasks shows the sign of the
  paper's gap, not its size. MDE: the gap the row would show with 80% power (alpha 0.05, or
  0.05 / m for primary rows), from the spreads measured.
- "seeds beyond noise": arms whose seed means differ by more than their evaluation's sampling
  noise (chi-square test, p < 0.05); "bound": computed from per-seed means with an upper bound
  of the noise (it misses some, never invents one).
- p-values at the bootstrap's floor print as "< 1/n_boot".
- compute: at a matched trajectory budget, the arm's model FLOPs and wall time as multiples of
  the other arm's (means over runs).
"""

# Legend lines for marks only references made before issue 36 produce; a line is printed only
# where a row carries its mark, so a legend never explains what the table does not show.
LEGACY_LEGEND = (
    (
        "†",
        "- † the bootstrap of references made before issue 36: it paired seed s of one arm with seed s\n"
        "  of the other (re-running the reference gives exact intervals from its `score_matrix.csv`).\n",
    ),
    (
        "≈",
        "- ≈ an interval at a level other than 95%, read off the 95% interval as normal (a reference\n"
        "  made before issue 36, without `score_matrix.csv`).\n",
    ),
    (
        Finding.NEEDS_RERUN,
        f'- "{Finding.NEEDS_RERUN}": the reference committed no per-seed scores for this benchmark.\n',
    ),
    (
        FLOPS_NOT_COUNTED,
        f'- "{FLOPS_NOT_COUNTED}": runs that counted no model FLOPs (references made before they were).\n',
    ),
)


def _legend(table: str) -> str:
    """The header with the legacy legend lines whose marks occur in `table`."""
    extra = "".join(line for mark, line in LEGACY_LEGEND if mark in table)
    return HEADER.format(m=len(DECLARED_FAMILY)) + extra


def write_verdicts(root: Path, readme: Path | None = None) -> Path:
    """Write `root`/VERDICTS.md (the full table) and, with `readme`, replace the table between
    its verdict markers with the compact one. Returns the VERDICTS.md path. (`bench report
    --verdicts` then rewrites the bottom line of a reference page in parts:
    `reference_pages.refresh_reference_pages`.)"""
    path = root / VERDICTS_FILE
    table = verdicts_markdown(root)
    path.write_text(f"{_legend(table)}\n{table}\n")
    if readme is not None:
        text = readme.read_text()
        start, end = text.find(README_START), text.find(README_END)
        if start < 0 or end < start:
            raise ValueError(f"{readme}: no {README_START} ... {README_END} block to fill")
        prefix = os.path.relpath(root, readme.parent).replace(os.sep, "/") + "/"
        table = verdicts_markdown(root, prefix, compact=True)
        readme.write_text(text[: start + len(README_START)] + "\n" + table + "\n" + text[end:])
    return path
