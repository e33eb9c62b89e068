"""Checkpoint evaluation: sample k episodes per benchmark problem, grade them, summarise.

`evaluate(model, tokenizer, spec, ...)` is the core of `bench eval` and of periodic evals in
the training loop, so it knows nothing of the command line: it takes an in-memory model,
returns an `EvalResult` (one record per sample plus a summary with provenance) and prints
nothing but an optional progress bar. `results.evals.write_eval` stores a result as
`<bench>.jsonl` and `<bench>.summary.json`.

One path for every benchmark: each sample is an episode played by the training loop's own
`bench.rollout.episode.run_episode` (`bench.eval.episodes`). A single-turn benchmark is a
one-turn episode of `benchmarks.base.GradedTask` (its grader grades the one answer); a
multi-turn one (agent, SWE) is an episode of its `episode_task`, graded by the task's env.
- prompt: `render_prompt(tokenizer, env.reset())`, i.e. the spec-formatted problem as a user
  message for single-turn benchmarks, after a system message when `system_prompt` is given
  (a run's `task.system_prompt`: its checkpoints are asked as its rollouts were);
- sampling: the benchmark's defaults (`spec.sampling`) unless overridden; `max_new_tokens` is
  further capped by the model's context (`max_position_embeddings`): a prompt that leaves no
  room for a single token is not generated and is recorded as finish reason
  `prompt-too-long` (graded on the empty completion, i.e. wrong);
- seed: sample j of problem p is episode seed `derive_seed(seed, p, j)`, so a sample does not
  depend on batching, on `limit` or on the other problems;
- at most `engine_slots` episodes run at once, through the engine protocol (`bench.engines`).

Scores: `benchmarks.scoring` (avg@k, pass@k, confidence intervals, breakdowns).

With a `results.evals.EvalStore` (as `bench eval` passes), every record is stored as its
sample finishes; an evaluation killed midway resumes from the stored samples when started again
with the same `eval_settings`, and since a sample's seed depends only on (seed, problem,
sample index), the resumed evaluation's records equal an uninterrupted one's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.engines.base import Engine, SamplingParams
from bench.errors import UsageError
from bench.eval.episodes import play_samples
from benchmarks.base import BenchmarkSpec, GradedTask, data_hash
from benchmarks.scoring import summarize
from envs.base import Problem, SystemPromptedEnv
from results.evals import EvalStore

SAMPLING_KEYS = ("temperature", "top_p", "max_new_tokens")
"""Sampling settings a caller may override; the rest of `spec.sampling` (`k`) is an argument."""


class EvalNotImplementedError(UsageError):
    """The benchmark exists but this harness cannot evaluate it yet (the message says what is missing)."""


@dataclass
class EvalResult:
    """What `evaluate` returns: one record per (problem, sample) in problem order, and the summary."""

    records: list[dict[str, Any]]
    summary: dict[str, Any]
    problems: list[Problem] = field(default_factory=list, repr=False)

    @property
    def benchmark(self) -> str:
        """The benchmark's name."""
        return self.summary["benchmark"]


def check_supported(spec: BenchmarkSpec) -> None:
    """Raise EvalNotImplementedError when `spec` cannot be evaluated in-process (no grader here)."""
    if spec.grader is None and spec.episode_task is None:
        raise EvalNotImplementedError(
            f"benchmark '{spec.name}' has no in-process grader (it is graded by an external harness), "
            "and no evaluation route for it is implemented yet"
        )


def resolve_sampling(
    spec: BenchmarkSpec, sampling: Mapping[str, Any] | SamplingParams | None
) -> SamplingParams:
    """The sampling settings of an eval: `spec.sampling` with the non-None overrides applied.

    `sampling` is a mapping with any of `temperature`, `top_p`, `max_new_tokens` (None values
    keep the benchmark's default) or a `SamplingParams` (its stop strings are kept).
    """
    stop: tuple[str, ...] = ()
    if isinstance(sampling, SamplingParams):
        stop = sampling.stop
        overrides: dict[str, Any] = {k: getattr(sampling, k) for k in SAMPLING_KEYS}
    else:
        overrides = dict(sampling or {})
        unknown = sorted(set(overrides) - set(SAMPLING_KEYS))
        if unknown:
            raise UsageError(
                f"unknown sampling setting(s) {', '.join(unknown)}; valid: {', '.join(SAMPLING_KEYS)}"
            )
    values = {
        k: spec.sampling.as_dict()[k] if overrides.get(k) is None else overrides[k] for k in SAMPLING_KEYS
    }
    temperature, top_p, max_new = (
        float(values["temperature"]),
        float(values["top_p"]),
        values["max_new_tokens"],
    )
    if not (math.isfinite(temperature) and temperature >= 0):
        raise UsageError(f"temperature must be a finite number >= 0, got {temperature}")
    if not 0 < top_p <= 1:
        raise UsageError(f"top_p must be in (0, 1], got {top_p}")
    if int(max_new) != max_new or max_new < 1:
        raise UsageError(f"max_new_tokens must be an integer >= 1, got {max_new}")
    return SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=int(max_new), stop=stop)


def evaluate(
    model: Any,
    tokenizer: Any,
    spec: BenchmarkSpec,
    *,
    k: int | None = None,
    limit: int | None = None,
    data_path: str | Path | None = None,
    sampling: Mapping[str, Any] | SamplingParams | None = None,
    engine: str | Engine = "torch",
    seed: int = 0,
    progress: bool = True,
    engine_slots: int = 64,
    problems: Sequence[Problem] | None = None,
    model_id: str | None = None,
    store: EvalStore | None = None,
    system_prompt: str | None = None,
) -> EvalResult:
    """Sample `k` completions for each problem of `spec`, grade them and summarise (module docstring).

    - `k`: samples per problem (None: the benchmark's default `spec.sampling.k`).
    - `limit`, `data_path`: passed to `spec.load` (first `limit` problems; a local data file).
    - `problems`: already loaded problems (skips `spec.load`; `data_path` then only feeds provenance).
    - `sampling`: overrides of temperature / top_p / max_new_tokens (`resolve_sampling`).
    - `engine`: "torch" | "vllm" (built on `model` for this call and closed afterwards), or an
      idle `Engine` to reuse (left open). The model's train/eval mode is restored on return.
    - `model_id`: what to record as the model in provenance (default: its `name_or_path`).
    - `store`: where records stream to as they finish (module docstring); a finished
      evaluation of the same settings in it is returned without generating anything.
    - `system_prompt`: a system message before every problem (a run's `task.system_prompt`).

    Raises EvalNotImplementedError (no grader and no episode task), BenchmarkDataError (data unavailable or
    malformed) and UsageError (bad settings) before generating anything.
    """
    if engine_slots < 1:
        raise UsageError(f"engine_slots must be >= 1, got {engine_slots}")
    k, params, problems, task = plan_eval(spec, k, limit, sampling, problems, data_path, system_prompt)

    engine_name = engine if isinstance(engine, str) else type(engine).__name__
    model_id = model_id or _model_name(model)
    settings = eval_settings(spec, problems, params, k, limit, engine_name, seed, model_id, system_prompt)
    done: list[dict[str, Any]] = []
    if store is not None:
        finished = store.finished(settings)
        if finished is not None:
            return EvalResult(records=finished[0], summary=finished[1], problems=problems)
        done = store.resume(settings)
    start = time.perf_counter()
    try:
        played = play_samples(
            model,
            tokenizer,
            spec,
            task,
            problems,
            k,
            params,
            engine,
            seed,
            engine_slots,
            progress,
            skip={(r["problem_id"], r["sample_index"]) for r in done},
            on_record=store.add if store is not None else None,
        )
    finally:
        if store is not None:
            store.close()
    wall = time.perf_counter() - start
    order = {p.key: i for i, p in enumerate(problems)}
    records = sorted([*done, *played], key=lambda r: (order[r["problem_id"]], r["sample_index"]))
    provenance = _provenance(spec, problems, data_path, params, k, limit, engine_name, seed, model, model_id)
    provenance["system_prompt"] = system_prompt
    if spec.episode_task is not None:
        provenance["episode_task"] = {"name": task.name, "max_turns": task.max_turns}
    summary = summarize(records, spec, k, provenance, seed=seed, wall_seconds=wall, problems=problems)
    summary["settings"] = settings
    summary["resumed_samples"] = len(done)
    if store is not None:
        store.finish(records, summary)
    return EvalResult(records=records, summary=summary, problems=problems)


def plan_eval(
    spec: BenchmarkSpec,
    k: int | None,
    limit: int | None,
    sampling: Mapping[str, Any] | SamplingParams | None,
    problems: Sequence[Problem] | None = None,
    data_path: str | Path | None = None,
    system_prompt: str | None = None,
) -> tuple[int, SamplingParams, list[Problem], Any]:
    """(k, sampling, problems, episode task) of an evaluation, checked (see `evaluate`'s
    arguments); UsageError / EvalNotImplementedError / BenchmarkDataError before any work."""
    check_supported(spec)
    k = spec.sampling.k if k is None else k
    if not isinstance(k, int) or k < 1:
        raise UsageError(f"k must be an integer >= 1, got {k}")
    if limit is not None and limit < 1:
        raise UsageError(f"limit must be >= 1, got {limit}")
    params = resolve_sampling(spec, sampling)
    problems = list(spec.load(data_path, limit) if problems is None else problems)
    if not problems:
        raise UsageError(f"benchmark '{spec.name}': no problems to evaluate")
    task = spec.episode_task(problems) if spec.episode_task is not None else GradedTask(spec)
    if system_prompt is not None:
        task = _SystemPromptedTask(task, system_prompt)
    return k, replace(params, stop=tuple(dict.fromkeys((*params.stop, *task.stop)))), problems, task


def eval_settings(
    spec: BenchmarkSpec,
    problems: Sequence[Problem],
    params: SamplingParams,
    k: int,
    limit: int | None,
    engine: str,
    seed: int,
    model_id: str | None,
    system_prompt: str | None = None,
) -> dict[str, Any]:
    """What makes two evaluations the same one: model, benchmark version and data, k, seed,
    sampling, limit, engine and system prompt (only when one is given, so the settings of
    evaluations without one read as before). An interrupted evaluation resumes only under equal
    settings, and a finished one is only replaced under other settings with `--overwrite`."""
    prompt = {} if system_prompt is None else {"system_prompt": system_prompt}
    return {
        **prompt,
        "model": model_id,
        "benchmark": spec.name,
        "version": spec.version,
        "data_hash": data_hash(problems),
        "k": k,
        "seed": seed,
        "sampling": {
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_new_tokens": params.max_new_tokens,
            "stop": list(params.stop),
        },
        "limit": limit,
        "engine": engine,
    }


class _SystemPromptedTask:
    """`task` whose episodes open with `system_prompt` (`envs.base.SystemPromptedEnv`); every
    other attribute is the task's."""

    def __init__(self, task: Any, system_prompt: str):
        self.task, self.system_prompt = task, system_prompt

    def __getattr__(self, name: str) -> Any:
        return getattr(self.task, name)

    def make_env(self, problem: Problem) -> SystemPromptedEnv:
        """The task's env for `problem`, its initial messages given the system prompt."""
        return SystemPromptedEnv(self.task.make_env(problem), self.system_prompt)


def _model_name(model: Any) -> str | None:
    """The model's `name_or_path` (its directory or hub id), as transformers records it."""
    return getattr(model, "name_or_path", None) or getattr(
        getattr(model, "config", None), "_name_or_path", None
    )


def _provenance(
    spec: BenchmarkSpec,
    problems: Sequence[Problem],
    data_path: str | Path | None,
    params: SamplingParams,
    k: int,
    limit: int | None,
    engine: str,
    seed: int,
    model: Any,
    model_id: str | None,
) -> dict[str, Any]:
    """Benchmark version, data hash and source, sampling, engine, seed, model, git commit, environment."""
    from bench.provenance import environment_info

    env = environment_info(seed)
    return {
        **spec.provenance(problems, data_path),
        "limit": limit,
        "sampling": {
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_new_tokens": params.max_new_tokens,
            "stop": list(params.stop),
            "k": k,
        },
        "engine": engine,
        "seed": seed,
        "per_sample_seed": "derive_seed(seed, problem_id, sample_index)",
        "model": model_id or None,
        "model_context": int(getattr(getattr(model, "config", None), "max_position_embeddings", 0) or 0)
        or None,
        "git_commit": env["git_commit"],
        "git_dirty": env["git_dirty"],
        "environment": env,
    }
