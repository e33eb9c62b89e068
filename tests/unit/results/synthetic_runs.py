"""Synthetic run directories for the report tests: written in milliseconds, no model trained.

`write_comparison` makes a `bench compare` directory (comparison.json, status/, runs/<arm>-s<seed>/
with config.json, env.json, metrics.jsonl and timeline.jsonl) whose metrics follow the shapes
real runs log; `write_drift_run` makes a plain run directory of the drifting task.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from results.comparison import arm_slug

CRITIC = {"sao": True, "grpo": False, "ppo": True}
PER_STEP = 16


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """Write `rows` as JSON lines."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _metrics(arm: str, seed: int, steps: int, eval_every: int, flops: bool = False) -> list[dict]:
    """metrics.jsonl of one synthetic run: a step-0 evaluation line, then one line per step (with
    `flops`, the cumulative model FLOPs as the compute counting writes them, `budget/flops`)."""
    rng = np.random.default_rng(zlib.crc32(f"{arm}-{seed}".encode()))
    rows, elapsed = [{"step": 0, "eval/arith/avg_at_k": 0.3, "eval/arith/n_operands=2/avg_at_k": 0.5}], 0.0
    for step in range(1, steps + 1):
        elapsed += 0.5 + rng.random()
        row = {
            "step": step,
            "reward/mean": min(1.0, 0.3 + step / steps * 0.5 + 0.1 * rng.random()),
            "rollout/action_tokens_mean": 30 + 5 * rng.random() + (step if arm == "grpo" else 0),
            "rollout/truncated_frac": 0.05 * rng.random(),
            "staleness/mean": rng.random() * 2,
            "budget/trajectories": float(PER_STEP * step),
            "budget/elapsed_s": elapsed,
        }
        if flops:
            row["budget/flops"] = 3.0e12 * step * (2.5 if CRITIC.get(arm, False) else 1.0)
        if CRITIC.get(arm, False):
            row["value/explained_variance"] = step / steps - 0.2 * rng.random()
            row["value/grad_norm"] = 2.0 + rng.random()
        if arm == "sao" and step > 3:
            row["policy/masked_frac"] = 0.01 * rng.random()
        elif arm != "sao":
            row["policy/clip_frac"] = 0.02 * rng.random()
        if step % eval_every == 0:
            row["eval/arith/avg_at_k"] = (
                0.3 + 0.4 * step / steps * (1.2 if arm == "sao" else 1) + 0.05 * rng.random()
            )
        rows.append(row)
    return rows


def _timeline(steps: int, seed: int, t0: float = 1.8e9) -> list[dict]:
    """timeline.jsonl of one synthetic async run: PER_STEP trajectories a step, up to 2 versions stale."""
    rng = np.random.default_rng(seed)
    lines = []
    for step in range(1, steps + 1):
        version = step - 1
        trajs = []
        for i in range(PER_STEP + 2):
            start = t0 + step - 1.5 + 0.05 * i + 0.3 * rng.random()
            oldest = max(0, version - int(rng.integers(0, 3)))
            trajs.append(
                [
                    round(start, 3),
                    round(start + 0.4 + rng.random(), 3),
                    oldest,
                    version,
                    30,
                    int(i < PER_STEP),
                ]
            )
        lines.append(
            {"step": step, "consumed_at": t0 + step + 0.2, "learner_version": version, "trajs": trajs}
        )
    return lines


def write_final_eval(run: Path, arm: str, seed: int, n_problems: int, k: int) -> None:
    """evals/final/arith.{jsonl,summary.json} of one run: problem p is solved with probability
    rising with p (harder first), sao a little more often, each (seed, sample) drawn."""
    rng = np.random.default_rng(zlib.crc32(f"final-{arm}-{seed}".encode()))
    p_P = np.linspace(0.1, 0.9, n_problems) + (0.08 if arm == "sao" else 0.0) + rng.normal(0, 0.03)
    records = [
        {"problem_id": f"arith-eval0-{i:06d}", "sample_index": j, "correct": bool(rng.random() < p_P[i])}
        for i in range(n_problems)
        for j in range(k)
    ]
    final = run / "evals" / "final"
    final.mkdir(parents=True)
    write_jsonl(final / "arith.jsonl", records)
    summary = {
        "benchmark": "arith",
        "version": 2,
        "k": k,
        "n_problems": n_problems,
        "avg_at_k": float(np.mean([r["correct"] for r in records])),
        "provenance": {"data_hash": "h", "sampling": {"k": k}, "seed": 0},
    }
    (final / "arith.summary.json").write_text(json.dumps(summary))


def write_comparison(
    out: Path,
    arms=("sao", "grpo", "ppo"),
    seeds=(0, 1),
    steps: int = 40,
    eval_every: int = 10,
    timeline: bool = True,
    final_eval: tuple[int, int] | None = None,
    flops: bool = False,
) -> Path:
    """A synthetic comparison directory (see the module docstring); returns `out`. With
    `final_eval=(n_problems, k)` each run also has its final evaluation on arith; with `flops`
    its metrics count model FLOPs."""
    spec = {
        "task": "arith",
        "arms": [{"name": a, "algo": a} for a in arms],
        "seeds": list(seeds),
        "budget": {"kind": "trajectories", "amount": PER_STEP * steps},
        "eval": {"benchmarks": ["arith"], "every": eval_every, "k": 2, "limit": 20},
    }
    (out / "status").mkdir(parents=True)
    (out / "comparison.json").write_text(json.dumps(spec))
    for arm in arms:
        for seed in seeds:
            run = out / "runs" / f"{arm_slug(arm)}-s{seed}"
            run.mkdir(parents=True)
            (run / "config.json").write_text(json.dumps({"algo": arm, "seed": seed, "task": "arith"}))
            (run / "env.json").write_text(json.dumps({"git_commit": "0" * 40}))
            write_jsonl(run / "metrics.jsonl", _metrics(arm, seed, steps, eval_every, flops))
            if timeline:
                write_jsonl(run / "timeline.jsonl", _timeline(steps, seed))
            if final_eval is not None:
                write_final_eval(run, arm, seed, *final_eval)
            (out / "status" / f"{arm_slug(arm)}-s{seed}.json").write_text(json.dumps({"state": "finished"}))
    return out


def write_drift_run(
    out: Path, algo: str, preset: str | None = None, steps: int = 30, phase_every: int = 10, seed: int = 0
) -> Path:
    """A plain run directory of the drifting task: style share drops at each phase switch and recovers."""
    rng = np.random.default_rng(seed + len(algo))
    out.mkdir(parents=True)
    (out / "config.json").write_text(
        json.dumps({"algo": algo, "algo_preset": preset, "seed": seed, "task": "drift"})
    )
    rows = []
    for step in range(1, steps + 1):
        phase, into = divmod(step - 1, phase_every)
        style = min(1.0, 0.3 + 0.07 * into * (1.5 if algo == "sao" else 1) + 0.05 * rng.random())
        rows.append(
            {
                "step": step,
                "reward/mean": 0.8 * style,
                "reward/style": style,
                "drift/phase": float(phase),
                f"reward/phase_{phase}": 0.8 * style,
                "budget/trajectories": 32.0 * step,
            }
        )
    write_jsonl(out / "metrics.jsonl", rows)
    return out


def final_scores_frame() -> pd.DataFrame:
    """A hand-made table of final scores in the shape the report's tables produce."""
    return pd.DataFrame(
        {
            "arm": ["sao", "grpo", "ppo"] * 2,
            "benchmark": ["arith"] * 3 + ["gsm-lite"] * 3,
            "mean": [0.62, 0.55, 0.5, 0.31, 0.27, 0.2],
            "ci_low": [0.55, 0.47, 0.41, 0.22, 0.2, 0.12],
            "ci_high": [0.69, 0.63, 0.59, 0.4, 0.34, 0.28],
            "n": [2] * 6,
        }
    )
