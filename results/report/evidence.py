"""What a reference comparison's committed files say about one claim (arm minus other on one
benchmark), for the verdict table: the two intervals at any confidence, p-values, seed spreads.

A reference directory (written by `bench report`) holds `tables/scores.csv`,
`tables/differences.csv`, `tables/per_seed.csv`, `tables/runs.csv` (each run's consumption: the
claim's compute comparison) and, from issue 36 on, `score_matrix.csv`.
What each statistic is computed from, best source first:

- `score_matrix.csv`: every cell; both intervals exact at any confidence (the bootstrap with the
  report's resampling seed, so at 95% it repeats `differences.csv`), the exact seed-noise test;
- a `differences.csv` with the seed-level columns (reports from issue 36 on): its 95% intervals;
- older references: `differences.csv`'s bootstrap, whose seed resamples paired seed s of one arm
  with seed s of the other (`boot_seeds_paired`); Welch's t from `per_seed.csv`; the seed-noise
  test in its conservative form (`seed_noise_bound_test`); a bootstrap interval at another
  confidence than 95% read as normal around its ends (`boot_exact` False). Pseudo-benchmarks
  without per-seed rows there (drift-recovery) have no seed-level interval: they need the re-run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from benchmarks.run_stats import paired_difference
from benchmarks.seed_stats import seed_noise_bound_test, welch_interval
from results.files import read_json
from results.report.claims import REFERENCE_PARTS, Claim
from results.report.differences import pair_row
from results.report.score_matrix import SCORE_MATRIX_FILE, read_score_matrix

DEFAULT_N_BOOT = 10000
"""The bootstrap size of references whose tables predate the `n_boot` column (`bench report`'s default)."""
FLOPS_NOT_COUNTED = "FLOPs not counted"
"""What the compute column says for runs without model FLOPs (references made before they were
counted); VERDICTS.md's legend explains it where a row shows it."""


@dataclass(frozen=True)
class Evidence:
    """One claim's statistics from its reference (module docstring); fractions, not points."""

    mean_a: float
    ci_a: tuple[float, float]
    mean_b: float
    ci_b: tuple[float, float]
    diff: float
    boot: tuple[float, float]  # the bootstrap's 95% interval
    boot_p: float
    n_boot: int
    boot_seeds_paired: bool
    n_seeds: tuple[int, int]  # each arm's seeds in the difference
    seeds_a: tuple[float, ...] | None  # per-seed means; None: not committed
    seeds_b: tuple[float, ...] | None
    noise_p: tuple[float, float]  # seed-noise test of (arm, other); NaN where not computable
    noise_exact: bool
    matrices: tuple[np.ndarray, np.ndarray] | None  # (a_S_P, b_S_P) on the shared problems

    @property
    def has_seed_level(self) -> bool:
        """Whether the seed-level interval can be computed (two seeds per arm committed)."""
        return (
            self.seeds_a is not None
            and self.seeds_b is not None
            and min(len(self.seeds_a), len(self.seeds_b)) >= 2
        )

    def welch(self, confidence: float = 0.95) -> dict:
        """Welch's t over the per-seed means at `confidence`."""
        return welch_interval(list(self.seeds_a or ()), list(self.seeds_b or ()), confidence)

    def boot_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """The bootstrap interval at `confidence`: exact from the score matrix, else the 95%
        interval itself or, at other levels, each side scaled by the normal quantiles' ratio."""
        if self.matrices is not None:
            d = paired_difference(*self.matrices, n_boot=self.n_boot, confidence=confidence)
            return d["ci_low"], d["ci_high"]
        if math.isclose(confidence, 0.95):
            return self.boot
        scale = sps.norm.ppf(0.5 + confidence / 2) / sps.norm.ppf(0.975)
        mid = (self.boot[0] + self.boot[1]) / 2
        return mid - (mid - self.boot[0]) * scale, mid + (self.boot[1] - mid) * scale

    @property
    def boot_exact(self) -> bool:
        """Whether intervals at other levels than 95% are exact (a score matrix is committed)."""
        return self.matrices is not None


def _csv(path: Path) -> pd.DataFrame:
    """A table, or an empty frame where the file is missing or has no columns."""
    try:
        return pd.read_csv(path)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def _joined(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The rows of every non-empty frame (an empty frame where all are empty)."""
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _one(frame: pd.DataFrame, **match) -> pd.Series | None:
    if frame.empty or any(column not in frame for column in match):
        return None
    hit = frame[np.logical_and.reduce([frame[c] == v for c, v in match.items()])]
    return None if hit.empty else hit.iloc[0]


def _seed_means(per_seed: pd.DataFrame, arm: str, benchmark: str) -> tuple[float, ...] | None:
    if per_seed.empty or "avg_at_k" not in per_seed:
        return None
    rows = per_seed[(per_seed["arm"] == arm) & (per_seed["benchmark"] == benchmark)].dropna(
        subset=["avg_at_k"]
    )
    return tuple(rows.sort_values("seed")["avg_at_k"]) if len(rows) else None


def _bound_p(seeds: tuple[float, ...] | None, score: pd.Series) -> float:
    """The conservative seed-noise test from per-seed means; NaN without k >= 1 or 2 seeds."""
    k = score.get("k")
    if seeds is None or len(seeds) < 2 or k is None or pd.isna(k):
        return math.nan
    return seed_noise_bound_test(list(seeds), int(k), int(score["n_problems"]))["p_value"]


def budget_and_tuning(provenance: Path | list[Path], arms: tuple[str, ...] = ()) -> str:
    """ "trajectories=32000, shared defaults", "..., tuned: 20 trials/arm" or "..., arms' own settings
    (arms file)" (an arms file carrying, e.g., a sweep's best parameters) from a report's provenance.
    A report of several comparisons: the budgets of those that hold `arms`, each naming its arms
    where they differ ("trajectories=32000 (sao), flops=2.72e+13 (grpo+dis-sao-flops)"). Several
    provenance files (a reference in parts): the comparisons of all of them."""
    paths = provenance if isinstance(provenance, list) else [provenance]
    specs = [spec for path in paths if path.exists() for spec in read_json(path).get("specs", [])]
    every = [(spec, {a.get("name") for a in spec.get("arms", [])}) for spec in specs]
    held = [(spec, names) for spec, names in every if names & set(arms)] or every[:1]
    if not held:
        return "-"
    first = held[0][0]
    tuning = first.get("tuning")
    own = any(arm.get("algo_args") or arm.get("run_args") for spec, _ in held for arm in spec.get("arms", []))
    tuned = "arms' own settings (arms file)" if own else "shared defaults"
    tuned = f"tuned: {tuning['trials_per_arm']} trials/arm" if tuning else tuned
    budgets = [_budget_text(spec.get("budget", {})) for spec, _ in held]
    if len(set(budgets)) > 1:
        budgets = [
            f"{b} ({', '.join(sorted(h & set(arms)))})" for b, (_, h) in zip(budgets, held, strict=True)
        ]
    return f"{', '.join(dict.fromkeys(budgets))}, {tuned}"


def _budget_text(budget: dict) -> str:
    """`kind=amount`, a FLOPs amount in scientific notation."""
    amount = budget.get("amount")
    shown = f"{float(amount):.3g}" if budget.get("kind") == "flops" and amount is not None else amount
    return f"{budget.get('kind')}={shown}"


def compute_comparison(runs: pd.DataFrame, arm: str, other: str) -> str:
    """How `arm`'s compute compares with `other`'s in a reference's runs table (means over their
    runs): "sao: 2.9x grpo+dis's FLOPs, 3.8x its wall time"; "sao: FLOPs not counted, 2.3x grpo's
    wall time" where either arm's runs lack them (references from before FLOPs were counted)."""
    if runs.empty or "arm" not in runs:
        return "-"

    def mean(name: str, column: str) -> float:
        if column not in runs:
            return math.nan
        values = pd.to_numeric(runs.loc[runs["arm"] == name, column], errors="coerce").dropna()
        return float(values.mean()) if len(values) and (values > 0).all() else math.nan

    flops = mean(arm, "flops") / mean(other, "flops")
    wall = mean(arm, "elapsed_s") / mean(other, "elapsed_s")
    parts = [FLOPS_NOT_COUNTED if math.isnan(flops) else f"{flops:.2g}x {other}'s FLOPs"]
    if not math.isnan(wall):
        whose = "its" if not math.isnan(flops) else f"{other}'s"
        parts.append(f"{wall:.2g}x {whose} wall time")
    return f"{arm}: " + ", ".join(parts)


class Reference:
    """One reference comparison's committed files, read once for all the claims that use it."""

    def __init__(self, path: Path, *parts: Path):
        """Read the tables (missing files read as empty) and the score matrix when present.
        `parts`: further report directories whose arms join this one's (`claims.REFERENCE_PARTS`:
        arms run in another comparison, after this one's runs were gone, and reported apart);
        a difference between arms of different directories is computed from their score
        matrices as `bench report` computes its own (`differences.pair_row`, same resampling)."""
        self.path = path
        dirs = [path, *parts]
        self.scores, self.diffs, self.per_seed, self.runs = (
            _joined([_csv(d / "tables" / name) for d in dirs])
            for name in ("scores.csv", "differences.csv", "per_seed.csv", "runs.csv")
        )
        self.matrices, self.ks = {}, {}
        for d in dirs:
            if (d / SCORE_MATRIX_FILE).exists():
                matrices, ks, arms = read_score_matrix(d / SCORE_MATRIX_FILE)
                if clash := {arm for arm, _ in self.matrices} & set(arms):
                    raise ValueError(f"{d}: arms {sorted(clash)} are also in {path} (one name per arm)")
                self.matrices.update(matrices)
                self.ks.update(ks)
        self.provenance = [d / "provenance.json" for d in dirs]

    @classmethod
    def named(cls, root: Path, name: str) -> Reference:
        """The reference comparison `name` under the reference root `root`, joined with those of
        its parts (`REFERENCE_PARTS`) that exist there."""
        parts = [root / part for part in REFERENCE_PARTS.get(name, ()) if (root / part).exists()]
        return cls(root / name, *parts)

    def budget_and_tuning(self, claim: Claim) -> str:
        """The budget and tuning of the comparisons that hold the claim's arms (`budget_and_tuning`)."""
        if self.path is None:
            return "-"
        return budget_and_tuning(self.provenance, (claim.arm, claim.other))

    @classmethod
    def from_frames(
        cls, scores: pd.DataFrame, diffs: pd.DataFrame, per_seed: pd.DataFrame, matrices: dict
    ) -> Reference:
        """The same reading of a report's tables while `bench report` makes them (the frames it
        writes as scores.csv, differences.csv, per_seed.csv and the score matrix), so that the
        report's bottom line judges its claims exactly as the verdict table will."""
        ref = cls.__new__(cls)
        ref.path, ref.scores, ref.diffs, ref.per_seed, ref.matrices = None, scores, diffs, per_seed, matrices
        ref.ks = {}
        return ref

    def _difference(self, claim: Claim) -> pd.Series | None:
        """The claim's row of the differences table; for arms of different parts (none has the
        row) the row `bench report` would have written, from their score matrices."""
        row = _one(self.diffs, arm=claim.arm, baseline=claim.other, benchmark=claim.benchmark)
        a = self.matrices.get((claim.arm, claim.benchmark))
        b = self.matrices.get((claim.other, claim.benchmark))
        if row is not None or a is None or b is None:
            return row
        n_boot = self.diffs["n_boot"].dropna() if "n_boot" in self.diffs else pd.Series(dtype=float)
        n_boot = int(n_boot.iloc[0]) if len(n_boot) else DEFAULT_N_BOOT
        ks = (self.ks.get((claim.arm, claim.benchmark)), self.ks.get((claim.other, claim.benchmark)))
        computed = pair_row(a, b, *ks, n_boot)
        return None if computed is None else pd.Series(computed)

    def evidence(self, claim: Claim) -> Evidence | None:
        """The claim's statistics, or None when its arms or difference are not in the tables."""
        score_a = _one(self.scores, arm=claim.arm, benchmark=claim.benchmark)
        score_b = _one(self.scores, arm=claim.other, benchmark=claim.benchmark)
        diff = self._difference(claim)
        if score_a is None or score_b is None or diff is None:
            return None
        new_format = "welch_low" in diff.index
        a, b = (
            self.matrices.get((claim.arm, claim.benchmark)),
            self.matrices.get((claim.other, claim.benchmark)),
        )
        matrices, seeds_a, seeds_b = None, None, None
        if a is not None and b is not None:
            problems = sorted(set(a.dropna(axis=1).columns) & set(b.dropna(axis=1).columns))
            matrices = (a[problems].to_numpy(), b[problems].to_numpy())
            seeds_a, seeds_b = tuple(matrices[0].mean(axis=1)), tuple(matrices[1].mean(axis=1))
        else:
            seeds_a = _seed_means(self.per_seed, claim.arm, claim.benchmark)
            seeds_b = _seed_means(self.per_seed, claim.other, claim.benchmark)
        if new_format:
            noise = (float(diff["seed_noise_p"]), float(diff["seed_noise_p_baseline"]))
        else:
            noise = (_bound_p(seeds_a, score_a), _bound_p(seeds_b, score_b))
        n_boot = diff.get("n_boot")
        return Evidence(
            mean_a=float(score_a["mean"]),
            ci_a=(float(score_a["ci_low"]), float(score_a["ci_high"])),
            mean_b=float(score_b["mean"]),
            ci_b=(float(score_b["ci_low"]), float(score_b["ci_high"])),
            diff=float(diff["diff"]),
            boot=(float(diff["ci_low"]), float(diff["ci_high"])),
            boot_p=float(diff["p_value"]),
            n_boot=int(n_boot) if n_boot is not None and not pd.isna(n_boot) else DEFAULT_N_BOOT,
            boot_seeds_paired=not new_format,
            n_seeds=(int(diff["n_seeds"]), int(diff.get("n_seeds_baseline", diff["n_seeds"]))),
            seeds_a=seeds_a,
            seeds_b=seeds_b,
            noise_p=noise,
            noise_exact=new_format,
            matrices=matrices,
        )
