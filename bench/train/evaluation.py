"""Evaluation inside a training run: the policy of the current step on the run's benchmarks,
through the same code as `bench eval`."""

from __future__ import annotations

import time
from typing import Any

from bench.config import RunConfig
from bench.models import lora
from bench.train.learner import Learner
from bench.train.models import unsharded_policy_copy
from results.rundir import RunDir


def evaluate_during_training(
    config: RunConfig, learner: Learner, tokenizer: Any, run: RunDir
) -> dict[str, Any]:
    """Evaluate the current policy on the configured benchmarks (the `bench eval` code path);
    records go to evals/step_NNNNNN/, the returned metrics into metrics.jsonl. Every rank calls
    it (a sharded policy is gathered into a plain copy, a collective); rank 0 evaluates, the
    others return no metrics and wait for it at their next collective.

    A run on inference servers (`engine=http`) evaluates there, on the run's own engine: the
    servers already hold the current policy (the loop pushes it first when `weight_sync_every` left them behind),
    and a generation-only client of them (`HTTPEngine(pushes_weights=False)`) samples beside the
    run's rollouts, so no policy copy is gathered and nothing generates on the learner."""
    if config.engine == "http":
        return _evaluate_on_servers(config, learner, tokenizer, run)
    t0 = time.perf_counter()
    sharded_or_lora = learner.models.sharded or lora.is_lora(learner.policy)  # LoRA hook: a merged copy
    policy = unsharded_policy_copy(learner.models) if sharded_or_lora else learner.policy
    if not learner.dist.is_main:
        return {}
    return _evaluate(config, learner, run, policy, tokenizer, "torch", t0)


def _evaluate_on_servers(config: RunConfig, learner: Learner, tokenizer: Any, run: RunDir) -> dict[str, Any]:
    """`evaluate_during_training` on the run's inference servers (rank 0; the others return {})."""
    from bench.config_values import rollout_urls
    from bench.engines.http_engine import HTTPEngine

    if not learner.dist.is_main:
        return {}
    t0 = time.perf_counter()
    engine = HTTPEngine(
        rollout_urls(config),
        learner.policy,
        tokenizer,
        max_batch_size=config.engine_slots,
        pushes_weights=False,
    )
    engine.version = learner.version  # what the servers hold: the loop pushed it before evaluating
    try:
        return _evaluate(config, learner, run, learner.policy, tokenizer, engine, t0)
    finally:
        engine.close()


def _evaluate(
    config: RunConfig, learner: Learner, run: RunDir, model: Any, tokenizer: Any, engine: Any, t0: float
) -> dict[str, Any]:
    """Each configured benchmark through `bench.eval.evaluate.evaluate` on `engine` (a name, or
    an idle engine to reuse); records under evals/step_NNNNNN/, summary metrics returned."""
    from bench.config import eval_benchmarks
    from bench.eval.evaluate import evaluate
    from benchmarks import registry as bench_registry
    from benchmarks.scoring import eval_metrics
    from results.evals import write_eval

    metrics: dict[str, Any] = {}
    for name in eval_benchmarks(config):
        result = evaluate(
            model,
            tokenizer,
            bench_registry.get(name, config.task_args),  # `math`: this run's held-out rows
            k=config.eval_k,
            limit=config.eval_limit,
            # sampled as the rollouts are (a run's max_new_tokens unset: the benchmark's own)
            sampling={
                "temperature": config.temperature,
                "top_p": config.top_p,
                "max_new_tokens": config.max_new_tokens,
            },
            seed=config.seed if config.eval_seed is None else config.eval_seed,
            progress=False,
            engine=engine,
            engine_slots=config.engine_slots,
            model_id=f"{run.path}@step{learner.step}",
            system_prompt=config.task_args.get("system_prompt") or None,  # asked as the rollouts were
        )
        write_eval(run.path / "evals" / f"step_{learner.step:06d}", result.records, result.summary)
        metrics.update(eval_metrics(result.summary))
    metrics["time/eval_s"] = time.perf_counter() - t0
    return metrics
