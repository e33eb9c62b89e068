"""Checkpoint evaluation: sample k completions per benchmark problem, grade them, summarise.

`evaluate(model, tokenizer, spec, ...)` is the core of `bench eval` and of periodic evals in
the training loop, so it knows nothing of the command line: it takes an in-memory model,
returns an `EvalResult` (one record per sample plus a summary with provenance) and prints
nothing but an optional progress bar. `write_eval` stores a result as `<bench>.jsonl` and
`<bench>.summary.json`.

How a sample is produced:
- prompt: `render_prompt(tokenizer, [{"role": "user", "content": <spec-formatted problem>}])`;
- sampling: the benchmark's defaults (`spec.sampling`) unless overridden; `max_new_tokens` is
  further capped by the model's context (`max_position_embeddings`): a prompt that leaves no
  room for a single token is not generated and is recorded as finish reason
  `prompt-too-long` (graded on the empty completion, i.e. wrong);
- seed: `derive_seed(seed, problem_id, sample_index)`, so a sample does not depend on batching,
  on `limit` or on the other problems;
- generation goes through the engine protocol (`bench.engines`): requests are submitted as
  slots free up (at most `engine_slots` in flight) and the engine is stepped until every
  sample is done, so a record's `seconds` is its own generation time (admission to finish).

Scores (`benchmarks.stats`): avg@k is the mean over problems of the fraction of the problem's
k samples that are correct (the per-problem Pass@1 estimate; the paper's metric, "mean of k
runs"); pass@1 and pass@k use the unbiased estimator. The normal-approximation CI and the
bootstrap CI are over problems (per-problem Pass@1).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.chat import render_prompt
from bench.engines.base import Engine, GenerationRequest, SamplingParams, make_engine
from bench.errors import UsageError
from bench.seeding import derive_seed
from benchmarks import stats
from benchmarks.base import BenchmarkSpec
from envs.base import Problem

SAMPLING_KEYS = ("temperature", "top_p", "max_new_tokens")
"""Sampling settings a caller may override; the rest of `spec.sampling` (`k`) is an argument."""

PROMPT_TOO_LONG = "prompt-too-long"
"""Finish reason of a sample whose prompt fills the model's whole context (nothing generated)."""

FALLBACK_PREFIX = "fallback"
"""Grader methods starting with this are string fallbacks (`envs.math.graders`)."""


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
    if temperature < 0:
        raise UsageError(f"temperature must be >= 0, got {temperature}")
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
) -> EvalResult:
    """Sample `k` completions for each problem of `spec`, grade them and summarise (module docstring).

    - `k`: samples per problem (None: the benchmark's default `spec.sampling.k`).
    - `limit`, `data_path`: passed to `spec.load` (first `limit` problems; a local data file).
    - `problems`: already loaded problems (skips `spec.load`; `data_path` then only feeds provenance).
    - `sampling`: overrides of temperature / top_p / max_new_tokens (`resolve_sampling`).
    - `engine`: "torch" | "vllm" (built on `model` for this call and closed afterwards), or an
      idle `Engine` to reuse (left open). The model's train/eval mode is restored on return.
    - `model_id`: what to record as the model in provenance (default: the model's
      `name_or_path`).

    Raises EvalNotImplementedError (no grader and no episode task), BenchmarkDataError (data unavailable or
    malformed) and UsageError (bad settings) before generating anything.
    """
    check_supported(spec)
    k = spec.sampling.k if k is None else k
    if not isinstance(k, int) or k < 1:
        raise UsageError(f"k must be an integer >= 1, got {k}")
    if limit is not None and limit < 1:
        raise UsageError(f"limit must be >= 1, got {limit}")
    if engine_slots < 1:
        raise UsageError(f"engine_slots must be >= 1, got {engine_slots}")
    params = resolve_sampling(spec, sampling)
    problems = list(spec.load(data_path, limit) if problems is None else problems)
    if not problems:
        raise UsageError(f"benchmark '{spec.name}': no problems to evaluate")

    if spec.episode_task is not None:
        return _evaluate_episodes(model, tokenizer, spec, problems, k, params, engine, seed, engine_slots,
                                  progress, data_path, limit, model_id)  # fmt: skip
    prompts = [render_prompt(tokenizer, [{"role": "user", "content": p.prompt}]) for p in problems]
    context = int(getattr(getattr(model, "config", None), "max_position_embeddings", 0) or 0)
    requests = []
    for i, (problem, prompt_ids) in enumerate(zip(problems, prompts)):
        room = params.max_new_tokens if not context else min(params.max_new_tokens, context - len(prompt_ids))
        sample_params = params if room == params.max_new_tokens else _with_budget(params, room)
        for j in range(k):
            requests.append(
                GenerationRequest(f"{i}/{j}", prompt_ids, sample_params, derive_seed(seed, problem.key, j))
            )

    start = time.perf_counter()
    outputs = _generate(model, tokenizer, engine, requests, engine_slots, progress, f"eval {spec.name}")
    wall = time.perf_counter() - start

    records = []
    for request in requests:
        i, j = (int(x) for x in request.request_id.split("/"))
        records.append(_grade(spec, problems[i], j, request, tokenizer, *outputs[request.request_id]))
    engine_name = engine if isinstance(engine, str) else type(engine).__name__
    provenance = _provenance(spec, problems, data_path, params, k, limit, engine_name, seed, model, model_id)
    summary = summarize(records, spec, k, provenance, seed=seed, wall_seconds=wall, problems=problems)
    return EvalResult(records=records, summary=summary, problems=problems)


def _evaluate_episodes(
    model, tokenizer, spec, problems, k, params, engine, seed, slots, progress, data_path, limit, model_id
) -> EvalResult:
    """`evaluate` for multi-turn benchmarks: each sample is an episode of `spec.episode_task()`."""
    from bench.evaluate_episodes import evaluate_episodes

    task = spec.episode_task(problems)
    start = time.perf_counter()
    records = evaluate_episodes(model, tokenizer, task, problems, k, params, engine, seed, slots, progress,
                                f"eval {spec.name}")  # fmt: skip
    wall = time.perf_counter() - start
    records = [{"benchmark": spec.name, **r} for r in records]
    engine_name = engine if isinstance(engine, str) else type(engine).__name__
    params = SamplingParams(params.temperature, params.top_p, params.max_new_tokens, tuple(task.stop))
    provenance = _provenance(spec, problems, data_path, params, k, limit, engine_name, seed, model, model_id)
    provenance["episode_task"] = {"name": task.name, "max_turns": task.max_turns}
    summary = summarize(records, spec, k, provenance, seed=seed, wall_seconds=wall, problems=problems)
    return EvalResult(records=records, summary=summary, problems=list(problems))


def _with_budget(params: SamplingParams, budget: int) -> SamplingParams:
    """`params` with `max_new_tokens` lowered to `budget` (may be <= 0: nothing to generate)."""
    return SamplingParams(params.temperature, params.top_p, budget, params.stop)


def _generate(
    model: Any,
    tokenizer: Any,
    engine: str | Engine,
    requests: list[GenerationRequest],
    slots: int,
    progress: bool,
    desc: str,
) -> dict[str, tuple[list[int], str, float]]:
    """request_id -> (generated token ids, finish reason, seconds), through the engine protocol."""
    out: dict[str, tuple[list[int], str, float]] = {}
    pending = []
    for r in requests:
        if r.sampling.max_new_tokens <= 0:
            out[r.request_id] = ([], PROMPT_TOO_LONG, 0.0)
        else:
            pending.append(r)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(requests), initial=len(out), desc=desc, unit="sample", dynamic_ncols=True)
    if not pending:
        if bar is not None:
            bar.close()
        return out

    owned = isinstance(engine, str)
    was_training = bool(getattr(model, "training", False))
    eng: Engine = make_engine(engine, model, tokenizer, max_batch_size=slots) if owned else engine  # type: ignore[arg-type]
    try:
        if eng.has_work():
            raise RuntimeError("evaluate() needs an idle engine; other requests are in flight")
        queue = list(reversed(pending))  # pop() from the end = submission in request order
        started: dict[str, float] = {}
        while queue or started:
            # keep at most `slots` requests in the engine, so submission time ~ admission time
            while queue and len(started) < slots:
                r = queue.pop()
                eng.submit(r)
                started[r.request_id] = time.perf_counter()
            for c in eng.step():
                out[c.request_id] = (
                    list(c.token_ids),
                    c.finish_reason,
                    time.perf_counter() - started.pop(c.request_id),
                )
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        if owned:
            eng.close()
        if hasattr(model, "train"):
            model.train(was_training)
    return out


def _grade(
    spec: BenchmarkSpec,
    problem: Problem,
    sample_index: int,
    request: GenerationRequest,
    tokenizer: Any,
    token_ids: list[int],
    finish_reason: str,
    seconds: float,
) -> dict[str, Any]:
    """One eval record: the decoded completion and the grader's verdict."""
    completion = tokenizer.decode(token_ids, skip_special_tokens=True)
    verdict = spec.grader(completion, problem.answer)  # type: ignore[misc]  # check_supported: not None
    return {
        "benchmark": spec.name,
        "problem_id": problem.key,
        "sample_index": sample_index,
        "seed": request.seed,
        "completion": completion,
        "answer": problem.answer,
        "extracted": verdict.extracted,
        "correct": bool(verdict.correct),
        "grader_method": verdict.method,
        "prompt_tokens": len(request.prompt_ids),
        "tokens": len(token_ids),
        "seconds": round(seconds, 6),
        "finish_reason": finish_reason,
    }


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
    from bench.rundir import environment_info

    env = environment_info(seed)
    if model_id is None:
        model_id = getattr(model, "name_or_path", None) or getattr(
            getattr(model, "config", None), "_name_or_path", None
        )
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


def _finite(x: float) -> float | None:
    """x, or None when it is NaN or infinite (so the summary is strict JSON)."""
    return x if math.isfinite(x) else None


def _pass_rate_ci95(pass1: Sequence[float]) -> tuple[float | None, list[float | None]]:
    """(standard error, normal 95% CI clipped to [0, 1]) of a mean pass rate; None where undefined."""
    normal = stats.mean_stderr_ci(pass1, bounds=(0.0, 1.0))
    return _finite(normal["stderr"]), [_finite(normal["ci_low"]), _finite(normal["ci_high"])]


def summarize(
    records: Sequence[Mapping[str, Any]],
    spec: BenchmarkSpec,
    k: int,
    provenance: Mapping[str, Any],
    seed: int = 0,
    wall_seconds: float | None = None,
    problems: Sequence[Problem] = (),
) -> dict[str, Any]:
    """The summary of an eval from its records (every problem must have exactly `k` samples);
    with `spec.breakdown` set, `problems` supply the meta values avg@k is split by."""
    by_problem: dict[str, list[bool]] = {}
    for r in records:
        by_problem.setdefault(r["problem_id"], []).append(bool(r["correct"]))
    if any(len(v) != k for v in by_problem.values()):
        raise ValueError(f"summarize: every problem needs {k} samples")
    correct = list(by_problem.values())
    pass1 = stats.per_problem_pass1(correct)
    stderr, ci95 = _pass_rate_ci95(pass1)
    boot = stats.bootstrap_ci(pass1, seed=seed)
    ks = sorted({1, k})
    pass_at = {
        str(kk): float(sum(stats.pass_at_k(k, sum(c), kk) for c in correct) / len(correct)) for kk in ks
    }
    methods = Counter(r["grader_method"] for r in records)
    tokens = [int(r["tokens"]) for r in records]
    return {
        "benchmark": spec.name,
        "version": spec.version,
        "n_problems": len(correct),
        "k": k,
        "n_samples": len(records),
        "n_correct": int(sum(map(sum, correct))),
        "avg_at_k": stats.avg_at_k(correct),
        "pass_at_k": pass_at,
        "stderr": stderr,
        "ci95": ci95,
        "bootstrap_ci95": [boot["ci_low"], boot["ci_high"]],
        "grader_methods": dict(sorted(methods.items())),
        "n_string_fallback": sum(n for m, n in methods.items() if m.startswith(FALLBACK_PREFIX)),
        "finish_reasons": dict(sorted(Counter(r["finish_reason"] for r in records).items())),
        "mean_tokens": sum(tokens) / len(tokens),
        "total_tokens": sum(tokens),
        "wall_seconds": wall_seconds,
        **({"breakdown": breakdown(by_problem, spec.breakdown, problems)} if spec.breakdown else {}),
        "provenance": dict(provenance),
    }


def breakdown(by_problem: Mapping[str, list[bool]], key: str, problems: Sequence[Problem]) -> dict[str, Any]:
    """avg@k, its 95% CI and the number of problems per value of `problem.meta[key]` (values
    in ascending order; problems without the key are grouped under "none"), so a score can be
    read per difficulty or category: where a model improves, not only by how much."""
    value_of = {p.key: p.meta.get(key) for p in problems}
    groups: dict[Any, list[list[bool]]] = {}
    for problem_id, correct in by_problem.items():
        groups.setdefault(value_of.get(problem_id), []).append(correct)

    def order(value: Any) -> tuple[int, Any]:
        return (0, value) if isinstance(value, int | float) else (1, str(value))

    out = {}
    for value in sorted(groups, key=order):
        out["none" if value is None else str(value)] = {
            "n_problems": len(groups[value]),
            "avg_at_k": stats.avg_at_k(groups[value]),
            "ci95": _pass_rate_ci95(stats.per_problem_pass1(groups[value]))[1],
        }
    return {"key": key, "groups": out}


def eval_metrics(summary: Mapping[str, Any]) -> dict[str, float | None]:
    """Flat metrics of a summary under the `eval/<benchmark>/` namespace (for metrics.jsonl),
    with avg@k per breakdown value as `eval/<benchmark>/<key>=<value>/avg_at_k`."""
    ns = f"eval/{summary['benchmark']}/"
    k = summary["k"]
    return {
        ns + "avg_at_k": summary["avg_at_k"],
        ns + "pass_at_1": summary["pass_at_k"]["1"],
        ns + f"pass_at_{k}": summary["pass_at_k"][str(k)],
        ns + "ci95_low": summary["ci95"][0],
        ns + "ci95_high": summary["ci95"][1],
        ns + "mean_tokens": summary["mean_tokens"],
        **{
            f"{ns}{summary['breakdown']['key']}={value}/avg_at_k": group["avg_at_k"]
            for value, group in summary.get("breakdown", {}).get("groups", {}).items()
        },
    }


def write_eval(out_dir: str | Path, result: EvalResult) -> tuple[Path, Path]:
    """Write `<out_dir>/<bench>.jsonl` (records) and `<out_dir>/<bench>.summary.json`, each atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    records_path = out / f"{result.benchmark}.jsonl"
    summary_path = out / f"{result.benchmark}.summary.json"
    lines = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in result.records)
    for path, text in (
        (records_path, lines),
        (summary_path, json.dumps(result.summary, indent=2, default=str) + "\n"),
    ):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return records_path, summary_path
