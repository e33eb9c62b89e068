"""Per-step metrics of the loop: what an accepted batch looked like, and its timeline line
(the progress bar: `bench.train.progress`)."""

from __future__ import annotations

import statistics

import torch

from bench.process_memory import peak_rss_gib
from bench.rollout.producer import Group


def batch_metrics(groups: list[Group], version: int) -> dict[str, float]:
    """Reward, length and staleness statistics of an accepted batch, the number of its episodes
    whose env failed (`info["env_error"]`, `bench.rollout.episode.run_episode`), plus the means of
    the metrics that episodes report in `info["metrics"]` (a dict of metric name -> number)."""
    trajs = [t for g in groups for t in g.trajectories]
    rewards = [t.reward for t in trajs]
    staleness = [version - v for t in trajs for v in t.versions if v >= 0]
    lengths = [sum(t.action_mask) for t in trajs]
    # envs may report their own per-episode metrics (e.g. the drift wrapper's reward/phase_k,
    # tool-call counts): each is averaged over the trajectories that report it
    reported: dict[str, list[float]] = {}
    for t in trajs:
        for key, value in (t.info.get("metrics") or {}).items():
            reported.setdefault(key, []).append(float(value))
    return {
        **{key: statistics.fmean(values) for key, values in sorted(reported.items())},
        "reward/mean": statistics.fmean(rewards),
        "reward/std": statistics.pstdev(rewards),
        "rollout/tokens": float(sum(len(t.response_ids) for t in trajs)),
        "rollout/action_tokens_mean": statistics.fmean(lengths),
        "rollout/thinking_tokens_mean": statistics.fmean(t.thinking_tokens for t in trajs),
        "rollout/truncated_frac": statistics.fmean(float(t.truncated) for t in trajs),
        "rollout/turns_mean": statistics.fmean(t.turns for t in trajs),
        "rollout/env_failed": float(sum("env_error" in t.info for t in trajs)),
        "staleness/mean": statistics.fmean(staleness) if staleness else 0.0,
        "staleness/max": float(max(staleness, default=0)),
    }


def logp_mismatch(logp_B_T: torch.Tensor, rollout_logp_B_T: torch.Tensor, mask_B_T: torch.Tensor) -> dict:
    """How far the learner's log-probs are from the engine's on the action tokens: the mean and
    max of |log pi_learner - log pi_engine| (the |log r| of the DIS band, r = pi_learner /
    pi_engine). It holds the engine's numerics (e.g. bf16 sampling against a float32 learner)
    and, for tokens sampled by an older policy version, that policy's change since; in sync
    mode with `weight_sync_every` 1 every token is fresh and it is numerics alone."""
    gap_B_T = (logp_B_T.detach() - rollout_logp_B_T).abs() * mask_B_T  # [B, T]
    n = mask_B_T.sum()
    if n == 0:
        return {"policy/logp_mismatch_mean": 0.0, "policy/logp_mismatch_max": 0.0}
    return {
        "policy/logp_mismatch_mean": float(gap_B_T.sum() / n),
        "policy/logp_mismatch_max": float(gap_B_T.max()),
    }


def timeline_record(step: int, version: int, trained: list[Group], discarded: list[Group]) -> dict:
    """One line of the run's timeline.jsonl: when each trajectory a step took was generated
    and when the learner consumed it, with its policy versions (the overlap figure's data).

    `trajs` rows: [start, finish] (Unix seconds), [oldest, newest] policy version of its
    tokens, its action tokens, and 1 when trained on or 0 when discarded (stale, filtered)."""
    import time

    rows = []
    for groups, used in ((trained, 1), (discarded, 0)):
        for t in (t for g in groups for t in g.trajectories):
            versions = [v for v in t.versions if v >= 0] or [0]
            rows.append(
                [
                    round(t.started_at, 3),
                    round(t.started_at + t.seconds, 3),
                    min(versions),
                    max(versions),
                    int(sum(t.action_mask)),
                    used,
                ]
            )
    return {"step": step, "consumed_at": round(time.time(), 3), "learner_version": version, "trajs": rows}


def memory_metrics(engine_stats: dict[str, float]) -> dict[str, float]:
    """Peak memory so far in GiB: this learner process's resident set, the engine child's
    (`peak_rss_gib` of its stats, where it runs in its own process) and the CUDA allocator's on a
    GPU. Shared pages count in both processes' figures (`bench.process_memory`)."""
    metrics = {}
    learner = peak_rss_gib()
    if learner is not None:
        metrics["memory/learner_peak_rss_gib"] = learner
    if "peak_rss_gib" in engine_stats:
        metrics["memory/engine_peak_rss_gib"] = float(engine_stats["peak_rss_gib"])
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        metrics["memory/cuda_peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return metrics
