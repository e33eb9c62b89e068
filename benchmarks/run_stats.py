"""Statistics over training runs for comparison reports, after rliable (Agarwal et al., 2021,
"Deep RL at the edge of the statistical precipice"), on numpy only.

A comparison on one benchmark has arms x seeds x problems x k samples. The unit score is one
(seed, problem) cell: the fraction of that problem's k samples that are correct. Arms are
paired by problem (the same problems, sample indices and evaluation seed for every arm), not
by seed: seed s of arm A and seed s of arm B share only the base model, so each arm's seeds
are independent draws of its own training runs (and their counts may differ).

Shape suffixes: `_S` seeds (independent training runs), `_P` problems, `_M` benchmarks (rliable's
tasks), `_R` bootstrap replicates, `_C` one chunk of replicates. Intervals are percentile
intervals (rliable's default) with numpy's linear quantiles, as in `benchmarks.stats`.

Where this departs from rliable or chooses what it leaves open:
1. Two sources of variance, training seeds and evaluation problems. rliable's stratified
   bootstrap resamples runs within each task, because there each task has its own runs. Here
   one trained model (one seed) answers every problem, so a replicate draws *one* multiset of
   seeds, used for all problems, and independently one multiset of problems (rliable's
   `task_bootstrap=True`, with problems as tasks): the replicate is the mean of the cells
   (s*_i, p*_j) over all i, j. This is the "pigeonhole" bootstrap of a crossed design (Owen,
   2007). For x = seed effect + problem effect + interaction, its variance is about
   v_seed (S-1)/S^2 + v_problem (P-1)/P^2 + 3 v_inter/(S P), against the true
   v_seed/S + v_problem/P + v_inter/(S P): main effects shrink by (n-1)/n as in any bootstrap,
   the interaction (here mostly the binomial noise of k samples) counts about three times.
2. The problem draws come from `default_rng(seed)` in the same chunks as
   `benchmarks.stats.bootstrap_ci`, the seed draws from a second stream, so with one seed (or
   identical seeds) the interval is the problem bootstrap of `bootstrap_ci` on the seed means.
3. Per-seed scores over several benchmarks (`_S_M`): a replicate resamples whole seeds (rows),
   since seed s on every benchmark is the same trained model; rliable resamples runs per task.
4. IQM is scipy's `trim_mean(x, 0.25)` over all scores flattened: sort, drop `n // 4` from each
   end (int(0.25 n)), average the rest; no fractional weights, so n = 10 averages the middle 6
   and n < 4 gives the plain mean.
5. Probability of improvement resamples the two arms' seeds independently, as rliable's
   `StratifiedIndependentBootstrap` does; `paired=True` draws the same seed indices for both.
6. With 3 seeds a seed resample is one of 10 multisets and the seed variance shrinks to 2/3
   (item 1): where seeds, not problems, dominate the spread, a 3-seed interval is too narrow.
   So every difference also gets a seed-level interval (`benchmarks.seed_stats`: Welch's t over
   per-seed means, calibrated at 3-10 seeds), and a verdict needs both.
7. A difference resamples problems jointly for both arms (they answered the same problems)
   and each arm's seeds independently (seeds are not paired across arms; an earlier version
   resampled the cell differences of seed s of A minus seed s of B, an arbitrary pairing).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import numpy as np

from benchmarks.stats import _BOOT_CHUNK_CELLS

_SEED_STREAM = 0x5EED
"""Second entropy word of the generator that resamples seeds (problems use `default_rng(seed)`)."""


class Direction(StrEnum):
    """What a difference's 95% interval(s) say about arm A against arm B."""

    BETTER = "better"
    WORSE = "worse"
    NOT_DISTINGUISHABLE = "not distinguishable"


VERDICTS = tuple(Direction)


def _finite(x: Any) -> np.ndarray:
    """`x` as a non-empty float array of finite scores."""
    a = np.asarray(x, dtype=float)
    if a.size == 0:
        raise ValueError("no scores")
    if not np.all(np.isfinite(a)):
        raise ValueError("scores must be finite (a NaN or inf score is a bug upstream)")
    return a


def _grid(x: Any) -> np.ndarray:
    """Scores of one arm as a [seeds, problems] array."""
    a = _finite(x)
    if a.ndim != 2:
        raise ValueError(f"scores must be a [seeds, problems] array, got shape {a.shape}")
    return a


def _per_seed(x: Any) -> np.ndarray:
    """Per-seed scores (S,) or per-seed-per-benchmark scores (S, M) as an (S, M) array."""
    a = _finite(x)
    a = a[:, None] if a.ndim == 1 else a
    if a.ndim != 2:
        raise ValueError(f"per-seed scores must be (seeds,) or (seeds, benchmarks), got shape {a.shape}")
    return a


def _counts(idx_C_N: np.ndarray, n: int) -> np.ndarray:
    """How often each of `n` items occurs in each row of resampled indices: (C, N) -> (C, n) floats."""
    rows = idx_C_N.shape[0]
    flat = (idx_C_N + n * np.arange(rows)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(float)


def _interval(boots_R: np.ndarray, confidence: float) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates."""
    alpha = (1 - confidence) / 2
    return float(np.quantile(boots_R, alpha)), float(np.quantile(boots_R, 1 - alpha))


def two_level_boot_means(x_S_P: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Bootstrap replicates (n_boot,) of the mean of `x_S_P`, resampling seeds and problems.

    Replicate r draws seeds s*_1..s*_S and problems p*_1..p*_P with replacement, independently,
    and is mean_{i,j} x[s*_i, p*_j] (see the module docstring). Chunked like `stats._boot_means`
    (chunks of _BOOT_CHUNK_CELLS problem draws: about 50 MB at most, whatever n_boot).
    """
    return arm_boot_means([x_S_P], n_boot, seed)[:, 0]


def arm_boot_means(arms: list[np.ndarray], n_boot: int, seed: int) -> np.ndarray:
    """Replicates (n_boot, arms) of each arm's mean: one problem resample shared by every arm
    (problems are paired), each arm's seeds resampled on its own (seeds are not).

    `arms`: [seeds, problems] arrays with the same problems (columns); seed counts may differ.
    The problem draws come from `default_rng(seed)`, arm i's seed draws from
    `default_rng([seed, _SEED_STREAM])` for i = 0 and `default_rng([seed, _SEED_STREAM, i])`
    after, so one arm alone gives `two_level_boot_means`.
    """
    n_problems = arms[0].shape[1]
    rng_problems = np.random.default_rng(seed)
    rngs = [np.random.default_rng([seed, _SEED_STREAM] + ([i] if i else [])) for i in range(len(arms))]
    shares = [x_S_P / x_S_P.shape[0] for x_S_P in arms]
    out_R_A = np.empty((n_boot, len(arms)))
    chunk = max(1, _BOOT_CHUNK_CELLS // n_problems)
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        problems_C_P = rng_problems.integers(0, n_problems, size=(stop - start, n_problems))
        for i, (rng, share_S_P) in enumerate(zip(rngs, shares)):
            n_seeds = share_S_P.shape[0]
            seeds_C_S = rng.integers(0, n_seeds, size=(stop - start, n_seeds))
            rows_C_P = _counts(seeds_C_S, n_seeds) @ share_S_P  # each replicate's mean over its seeds
            out_R_A[start:stop, i] = rows_C_P[np.arange(stop - start)[:, None], problems_C_P].mean(axis=1)
    return out_R_A


def stratified_bootstrap_ci(
    scores_S_P: Any, n_boot: int = 10000, seed: int = 0, confidence: float = 0.95
) -> dict[str, Any]:
    """Mean score of one arm on one benchmark with a CI over training seeds and problems.

    `scores_S_P[s, p]`: fraction of problem p's k samples correct for the run of seed s. The
    mean is over all cells; the percentile CI comes from `two_level_boot_means`. Keys: mean,
    ci_low, ci_high, n_seeds, n_problems, n_boot, confidence.
    """
    x_S_P = _grid(scores_S_P)
    low, high = _interval(two_level_boot_means(x_S_P, n_boot, seed), confidence)
    return {
        "mean": float(x_S_P.mean()),
        "ci_low": low,
        "ci_high": high,
        "n_seeds": x_S_P.shape[0],
        "n_problems": x_S_P.shape[1],
        "n_boot": n_boot,
        "confidence": confidence,
    }


def paired_difference(
    a_S_P: Any, b_S_P: Any, n_boot: int = 10000, seed: int = 0, confidence: float = 0.95
) -> dict[str, Any]:
    """Arm A minus arm B on the same problems, with a CI, a p-value and a verdict.

    A replicate resamples the problems once for both arms and each arm's seeds independently
    (`arm_boot_means`; item 7 of the module docstring): replicate = mean of A's resampled cells
    minus B's. `p_value`: two-sided, for diff = 0, with the bootstrap distribution centred on 0
    as in `stats.paired_bootstrap`: (1 + #{|d*_r - diff| >= |diff|}) / (n_boot + 1), so its
    floor is 1 / (n_boot + 1) (`p_floor`). `verdict`: "better" if ci_low > 0, "worse" if
    ci_high < 0, else "not distinguishable". Keys: diff, ci_low, ci_high, p_value, verdict,
    mean_a, mean_b, n_seeds (A's), n_seeds_b, n_problems, n_boot, confidence.
    """
    a, b = _grid(a_S_P), _grid(b_S_P)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"both arms need the same problems (columns), got {a.shape} and {b.shape}")
    diff = float(a.mean() - b.mean())
    boots_R_A = arm_boot_means([a, b], n_boot, seed)
    boots_R = boots_R_A[:, 0] - boots_R_A[:, 1]
    low, high = _interval(boots_R, confidence)
    extreme = int(np.sum(np.abs(boots_R - diff) >= abs(diff) - 1e-12))
    return {
        "diff": diff,
        "ci_low": low,
        "ci_high": high,
        "p_value": (1 + extreme) / (n_boot + 1),
        "verdict": VERDICTS[0] if low > 0 else VERDICTS[1] if high < 0 else VERDICTS[2],
        "mean_a": float(a.mean()),
        "mean_b": float(b.mean()),
        "n_seeds": a.shape[0],
        "n_seeds_b": b.shape[0],
        "n_problems": a.shape[1],
        "n_boot": n_boot,
        "confidence": confidence,
    }


def p_floor(n_boot: int) -> float:
    """The smallest p-value a bootstrap of `n_boot` replicates reports: 1 / (n_boot + 1)."""
    return 1 / (n_boot + 1)


def format_p(p: float, n_boot: int | None = None) -> str:
    """A p-value for a table: 3 significant digits, or "< 1/n_boot" (e.g. "< 0.0001" for 10,000
    resamples) at a bootstrap's floor, where no replicate was as extreme: the p-value is then
    only known to be below the bootstrap's resolution."""
    if n_boot is not None and p <= p_floor(n_boot) * (1 + 1e-9):
        return f"< {1 / n_boot:.2g}"
    return f"{p:.3g}"


def iqm(scores: Any) -> float:
    """Interquartile mean of all `scores` (any shape, flattened): the 25% trimmed mean.

    Sort, drop n // 4 values from each end, average the rest (scipy.stats.trim_mean(x, 0.25),
    which rliable's `aggregate_iqm` uses). Robust to one outlying run, less noisy than the median.
    """
    v = np.sort(_finite(scores).ravel())
    cut = v.size // 4
    return float(v[cut : v.size - cut].mean())


def iqm_ci(scores_S_M: Any, n_boot: int = 10000, seed: int = 0, confidence: float = 0.95) -> dict[str, Any]:
    """IQM of per-seed scores (S,) or per-seed-per-benchmark scores (S, M) with a CI over seeds.

    A replicate resamples seeds (whole rows) with replacement and takes the IQM of the flattened
    (S, M) resample. Keys: iqm, ci_low, ci_high, n_seeds, n_scores, n_boot, confidence.
    """
    x_S_M = _per_seed(scores_S_M)
    n_seeds, n = x_S_M.shape[0], x_S_M.size
    rng, cut = np.random.default_rng(seed), n // 4
    boots_R = np.empty(n_boot)
    chunk = max(1, _BOOT_CHUNK_CELLS // n)
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        seeds_C_S = rng.integers(0, n_seeds, size=(stop - start, n_seeds))
        sorted_C_N = np.sort(x_S_M[seeds_C_S].reshape(stop - start, n), axis=1)
        boots_R[start:stop] = sorted_C_N[:, cut : n - cut].mean(axis=1)
    low, high = _interval(boots_R, confidence)
    return {
        "iqm": iqm(x_S_M),
        "ci_low": low,
        "ci_high": high,
        "n_seeds": n_seeds,
        "n_scores": n,
        "n_boot": n_boot,
        "confidence": confidence,
    }


def _wins(a_S_M: np.ndarray, b_S_M: np.ndarray) -> np.ndarray:
    """(S_a, S_b) matrix: for each pair of runs, the benchmark-averaged [a > b] + [a == b] / 2."""
    if a_S_M.shape[1] != b_S_M.shape[1]:
        raise ValueError(f"both arms need the same benchmarks, got {a_S_M.shape[1]} and {b_S_M.shape[1]}")
    a, b = a_S_M[:, None, :], b_S_M[None, :, :]
    return ((a > b) + 0.5 * (a == b)).mean(axis=2)


def probability_of_improvement(a_S: Any, b_S: Any) -> float:
    """P(X > Y) + P(X = Y) / 2 for X a run of arm A and Y a run of arm B, averaged over benchmarks.

    `a_S`, `b_S`: per-seed scores (S,) or (S, M) per benchmark (seed counts may differ). Per
    benchmark this is the Mann-Whitney U of A over B divided by S_a * S_b; rliable then averages
    the benchmarks. 0.5 means neither arm tends to beat the other.
    """
    return float(_wins(_per_seed(a_S), _per_seed(b_S)).mean())


def probability_of_improvement_ci(
    a_S: Any, b_S: Any, n_boot: int = 10000, seed: int = 0, confidence: float = 0.95, paired: bool = False
) -> dict[str, Any]:
    """`probability_of_improvement` with a percentile CI from resampling each arm's seeds.

    A replicate resamples A's seeds and B's seeds independently (rliable), or with the same
    indices if `paired` (seed s of A with seed s of B). Keys: poi, ci_low, ci_high, n_seeds_a,
    n_seeds_b, n_benchmarks, n_boot, confidence.
    """
    a, b = _per_seed(a_S), _per_seed(b_S)
    wins_A_B = _wins(a, b)
    n_a, n_b = wins_A_B.shape
    if paired and n_a != n_b:
        raise ValueError(f"paired seeds need equal seed counts, got {n_a} and {n_b}")
    rng, boots_R = np.random.default_rng(seed), np.empty(n_boot)
    chunk = max(1, _BOOT_CHUNK_CELLS // (n_a + n_b))
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        count_a_C_A = _counts(rng.integers(0, n_a, size=(stop - start, n_a)), n_a)
        count_b_C_B = count_a_C_A if paired else _counts(rng.integers(0, n_b, size=(stop - start, n_b)), n_b)
        boots_R[start:stop] = ((count_a_C_A @ wins_A_B) * count_b_C_B).sum(axis=1) / (n_a * n_b)
    low, high = _interval(boots_R, confidence)
    return {
        "poi": float(wins_A_B.mean()),
        "ci_low": low,
        "ci_high": high,
        "n_seeds_a": n_a,
        "n_seeds_b": n_b,
        "n_benchmarks": a.shape[1],
        "n_boot": n_boot,
        "confidence": confidence,
    }
