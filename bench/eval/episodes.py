"""Playing an evaluation's samples as episodes, and the record each one leaves.

The same episode code as training (`bench.rollout.episode.run_episode`, `EngineWorker`), so a
tool call, an observation or a truncation is handled identically in both. Each (problem,
sample) is one episode with seed `derive_seed(seed, problem_id, sample_index)`; at most `slots`
episodes run at once (their env calls, e.g. sandboxed tests, overlap).

Records: a single-turn benchmark's (graded by `spec.grader`) carry the grader's verdict and
method and the engine's finish reason; a multi-turn benchmark's (graded by its env: correct
when the final reward is > 0, the answer for `agent`, SWE-bench's resolved rule for SWE) also
carry the turns, the reward, the observation tokens and the env's info.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence
from typing import Any

from bench.engines import make_engine
from bench.engines.base import Engine, SamplingParams
from bench.rollout.episode import Trajectory, run_episode
from bench.rollout.worker import EngineWorker
from bench.seeding import derive_seed
from envs.base import Problem

EPISODE_METHOD = "episode"
"""`grader_method` of multi-turn records (the env graded the episode)."""

DEFAULT_CONTEXT = 2048
"""Context length assumed for a model whose config does not state one."""


def play_samples(
    model: Any,
    tokenizer: Any,
    spec: Any,
    task: Any,
    problems: Sequence[Problem],
    k: int,
    params: SamplingParams,
    engine: str | Engine,
    seed: int,
    slots: int,
    progress: bool,
    skip: Collection[tuple[str, int]] = (),
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """One record per (problem, sample) played, in problem order: episodes of `task` for the
    problems of benchmark `spec`, on `engine` (a name: built here and closed; an idle Engine:
    reused). Samples whose (problem key, sample index) is in `skip` are not played (an
    interrupted evaluation's finished ones); `on_record` receives each record as soon as its
    episode ends, so a caller can store it before the others finish."""
    owned = isinstance(engine, str)
    was_training = bool(getattr(model, "training", False))
    eng: Engine = make_engine(engine, model, tokenizer, max_batch_size=slots) if owned else engine  # type: ignore[arg-type]
    if not owned and eng.has_work():
        raise RuntimeError("evaluate() needs an idle engine; other requests are in flight")
    context = (
        int(getattr(getattr(model, "config", None), "max_position_embeddings", 0) or 0) or DEFAULT_CONTEXT
    )
    # a graded (single-turn) sample's only turn samples with the sample's seed itself, so its
    # records keep the seeds, and the completions, of every earlier evaluation of it
    single_turn = spec.grader is not None
    worker = EngineWorker(eng)
    try:
        todo = [(i, j) for i in range(len(problems)) for j in range(k) if (problems[i].key, j) not in skip]

        def record(i: int, j: int, traj: Trajectory) -> dict[str, Any]:
            row = sample_record(spec, problems[i], j, derive_seed(seed, problems[i].key, j), traj, tokenizer)
            if on_record is not None:
                on_record(row)
            return row

        return asyncio.run(
            _play_all(
                worker,
                tokenizer,
                task,
                problems,
                todo,
                params,
                seed,
                slots,
                context,
                single_turn,
                record,
                progress,
                f"eval {spec.name}",
            )
        )
    finally:
        worker.close()
        if owned:
            eng.close()
        if hasattr(model, "train"):
            model.train(was_training)


async def _play_all(
    worker, tokenizer, task, problems, todo, params, seed, slots, context, single_turn, record, progress, desc
) -> list[dict[str, Any]]:
    """Play the (problem index, sample index) episodes of `todo`, at most `slots` at a time;
    their records (`record(i, j, trajectory)`) in `todo`'s order."""
    gate = asyncio.Semaphore(slots)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc=desc, unit="sample", dynamic_ncols=True)

    async def one(i: int, j: int) -> dict[str, Any]:
        problem = problems[i]
        sample_seed = derive_seed(seed, problem.key, j)
        async with gate:
            traj = await run_episode(
                worker,
                tokenizer,
                task.make_env(problem),
                params,
                sample_seed,
                task.max_turns,
                context,
                problem.key,
                group_id=i,
                seed_of_turn=(lambda turn: sample_seed) if single_turn else None,
            )
        row = record(i, j, traj)
        if bar is not None:
            bar.update(1)
        return row

    try:
        return await asyncio.gather(*(one(i, j) for i, j in todo))
    finally:
        if bar is not None:
            bar.close()


def sample_record(
    spec: Any, problem: Problem, sample_index: int, seed: int, traj: Trajectory, tokenizer: Any
) -> dict[str, Any]:
    """The eval record of one played sample (module docstring)."""
    info = dict(traj.info)
    if spec.grader is not None and traj.turns == 0:  # the prompt filled the context: grade ""
        verdict = spec.grader("", problem.answer)
        info = {"correct": verdict.correct, "extracted": verdict.extracted, "method": verdict.method}
    record = {
        "benchmark": spec.name,
        "problem_id": problem.key,
        "sample_index": sample_index,
        "seed": seed,
        "completion": tokenizer.decode(traj.response_ids, skip_special_tokens=True),
        "answer": problem.answer,
        "extracted": info.get("extracted", info.get("patch")),
        "correct": bool(info.get("correct", traj.reward > 0)),
        "grader_method": info["method"] if spec.grader is not None else EPISODE_METHOD,
        "prompt_tokens": len(traj.prompt_ids),
        "tokens": int(sum(traj.action_mask)),
    }
    if spec.grader is not None:
        return {**record, "seconds": round(traj.seconds, 6), "finish_reason": traj.finish_reason}
    return {
        **record,
        "observation_tokens": len(traj.response_ids) - int(sum(traj.action_mask)),
        "turns": traj.turns,
        "reward": traj.reward,
        "seconds": round(traj.seconds, 6),
        "finish_reason": "truncated" if traj.truncated else "done",
        "info": {key: v for key, v in info.items() if key not in ("patch", "extracted")},
    }
