"""Fig. 5 as numbers: how each arm of a drifting-task comparison followed the phases.

A drifting task (`envs/online.py`) changes which answer label it rewards every `phase_every`
trajectories without telling the model; `results.phases.phase_segments` cuts each run into
its stretches of steps in one phase (`drift_segments`, once per report). Two outputs from them:

- `drift_phase_table`: per arm and stretch (schedule order), the label share and reward over
  the stretch's first and last steps, mean over seeds (the report's "Online drift by phase").
- `drift_matrices`: the paper's Fig. 5 claim (SAO recovers faster than the running-mean
  baseline after each shift) as a score per seed and stretch, `DRIFT_SCORE`: the share of
  episodes using the current phase's label over the whole stretch, for every stretch after
  the first switch. A faster recovery is a higher mean over the stretch. It has the shape of
  an evaluation's seeds x problems matrix, so the report's scores and paired differences
  (seeds, then stretches resampled) treat it like a benchmark.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from results.comparison import Comparison
from results.phases import phase_segments

DRIFT_SCORE = "drift-recovery"
"""The pseudo-benchmark name of `drift_matrices` in the report's tables and verdicts."""


Segments = dict[str, list[tuple[int, list[dict]]]]
"""arm -> [(seed, that run's phase stretches from `phase_segments`)]."""


def drift_segments(comparison: Comparison, edge: int = 5) -> Segments:
    """Each run's phase stretches (means over their first and last `edge` steps), by arm, for
    the runs that logged a drifting task; empty without one."""
    m = comparison.metrics
    if m.empty or "drift/phase" not in m or "reward/style" not in m:
        return {}
    m = m.dropna(subset=["drift/phase", "reward/style"])
    out: Segments = {}
    for arm in comparison.arms:
        for _, g in m[m["arm"] == arm].groupby("run"):
            out.setdefault(arm, []).append(
                (int(g["seed"].iloc[0]), phase_segments(g.sort_values("step").to_dict("records"), edge))
            )
    return out


def drift_phase_table(segments: Segments) -> pd.DataFrame:
    """For each arm and each stretch of steps in one phase, in schedule order: the share of
    episodes following the phase's label rule and the training reward over its first and last
    steps (the `edge` of `drift_segments`), mean over the seeds that reached it. Empty without
    a drifting task."""
    rows = []
    for arm, runs in segments.items():
        for i in range(max(len(s) for _, s in runs)):
            cells = [s[i] for _, s in runs if len(s) > i]
            rows.append(
                {
                    "arm": arm,
                    "stretch": i + 1,
                    "rule": cells[0]["phase"],
                    "steps": f"{min(c['first_step'] for c in cells)}-{max(c['last_step'] for c in cells)}",
                    "label share first": np.mean([c["style_first"] for c in cells]),
                    "label share last": np.mean([c["style_last"] for c in cells]),
                    "reward first": np.mean([c["reward_first"] for c in cells]),
                    "reward last": np.mean([c["reward_last"] for c in cells]),
                    "seeds": len(cells),
                }
            )
    return pd.DataFrame(rows)


def drift_matrices(segments: Segments) -> dict[tuple[str, str], pd.DataFrame]:
    """(arm, DRIFT_SCORE) -> a seeds x stretches frame of the label share over each stretch
    after the first (stretch 2 onwards, each after a switch; the first starts from the base
    model's label mix, not from a shift). Stretches
    one seed did not reach are NaN (and left out of the paired differences)."""
    out = {}
    for arm, runs in segments.items():
        table = {
            seed: {f"stretch-{i + 1}": s["style_mean"] for i, s in enumerate(segs) if i >= 1}
            for seed, segs in runs
        }
        frame = pd.DataFrame.from_dict(table, orient="index").sort_index()
        if frame.shape[1]:
            out[(arm, DRIFT_SCORE)] = frame
    return out
