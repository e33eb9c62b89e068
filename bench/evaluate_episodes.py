"""Evaluation of multi-turn benchmarks: each sample is a whole episode of the benchmark's task.

The same episode code as training (`bench.rollout.run_episode`, `EngineWorker`), so a tool
call, an observation or a truncation is handled identically in both. Each (problem, sample)
is one episode with seed `derive_seed(seed, problem_id, sample_index)`; at most `slots`
episodes run at once (their env calls, e.g. sandboxed tests, overlap). A sample is correct
when the episode's final reward is > 0 (the env's own grading: the answer for `agent`,
SWE-bench's resolved rule for SWE).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bench.engines.base import Engine, SamplingParams, make_engine
from bench.rollout import EngineWorker, Trajectory, run_episode
from bench.seeding import derive_seed
from envs.base import Problem

EPISODE_METHOD = "episode"
"""`grader_method` of episode records (the env graded the episode)."""


def evaluate_episodes(
    model: Any,
    tokenizer: Any,
    task: Any,
    problems: Sequence[Problem],
    k: int,
    params: SamplingParams,
    engine: str | Engine,
    seed: int,
    slots: int,
    progress: bool,
    desc: str,
) -> list[dict[str, Any]]:
    """One record per (problem, sample), in problem order: the episode's transcript and verdict."""
    owned = isinstance(engine, str)
    was_training = bool(getattr(model, "training", False))
    eng: Engine = make_engine(engine, model, tokenizer, max_batch_size=slots) if owned else engine  # type: ignore[arg-type]
    if not owned and eng.has_work():
        raise RuntimeError("evaluate() needs an idle engine; other requests are in flight")
    params = replace(params, stop=tuple(dict.fromkeys((*params.stop, *task.stop))))
    context = int(getattr(getattr(model, "config", None), "max_position_embeddings", 0) or 0) or 2048
    worker = EngineWorker(eng)
    try:
        trajectories = asyncio.run(
            _play_all(worker, tokenizer, task, problems, k, params, seed, slots, context, progress, desc)
        )
    finally:
        worker.close()
        if owned:
            eng.close()
        if hasattr(model, "train"):
            model.train(was_training)
    records = []
    for (i, j), traj in trajectories:
        records.append(_record(problems[i], j, derive_seed(seed, problems[i].key, j), traj, tokenizer))
    return records


async def _play_all(worker, tokenizer, task, problems, k, params, seed, slots, context, progress, desc):
    """Play every (problem, sample) episode, at most `slots` at a time."""
    gate = asyncio.Semaphore(slots)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(problems) * k, desc=desc, unit="episode", dynamic_ncols=True)

    async def one(i: int, j: int) -> tuple[tuple[int, int], Trajectory]:
        problem = problems[i]
        async with gate:
            traj = await run_episode(
                worker, tokenizer, task.make_env(problem), params, derive_seed(seed, problem.key, j),
                task.max_turns, context, problem.key, group_id=i,
            )  # fmt: skip
        if bar is not None:
            bar.update(1)
        return (i, j), traj

    try:
        return await asyncio.gather(*(one(i, j) for i in range(len(problems)) for j in range(k)))
    finally:
        if bar is not None:
            bar.close()


def _record(
    problem: Problem, sample_index: int, seed: int, traj: Trajectory, tokenizer: Any
) -> dict[str, Any]:
    """The eval record of one episode (same keys as single-turn records, plus turns and reward)."""
    info = dict(traj.info)
    extracted = info.get("extracted", info.get("patch"))
    return {
        "problem_id": problem.key,
        "sample_index": sample_index,
        "seed": seed,
        "completion": tokenizer.decode(traj.response_ids, skip_special_tokens=True),
        "answer": problem.answer,
        "extracted": extracted,
        "correct": bool(info.get("correct", traj.reward > 0)),
        "grader_method": EPISODE_METHOD,
        "prompt_tokens": len(traj.prompt_ids),
        "tokens": int(sum(traj.action_mask)),
        "observation_tokens": len(traj.response_ids) - int(sum(traj.action_mask)),
        "turns": traj.turns,
        "reward": traj.reward,
        "seconds": round(traj.seconds, 6),
        "finish_reason": "truncated" if traj.truncated else "done",
        "info": {k: v for k, v in info.items() if k not in ("patch", "extracted")},
    }
