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
    others return no metrics and wait for it at their next collective."""
    from bench.config import eval_benchmarks
    from bench.eval.evaluate import evaluate
    from benchmarks import registry as bench_registry
    from benchmarks.scoring import eval_metrics
    from results.evals import write_eval

    t0 = time.perf_counter()
    sharded_or_lora = learner.models.sharded or lora.is_lora(learner.policy)  # LoRA hook: a merged copy
    policy = unsharded_policy_copy(learner.models) if sharded_or_lora else learner.policy
    if not learner.dist.is_main:
        return {}
    metrics: dict[str, Any] = {}
    for name in eval_benchmarks(config):
        result = evaluate(
            policy,
            tokenizer,
            bench_registry.get(name),
            k=config.eval_k,
            limit=config.eval_limit,
            sampling={"temperature": config.temperature, "top_p": config.top_p},
            seed=config.seed if config.eval_seed is None else config.eval_seed,
            progress=False,
            engine_slots=config.engine_slots,
            model_id=f"{run.path}@step{learner.step}",
        )
        write_eval(run.path / "evals" / f"step_{learner.step:06d}", result.records, result.summary)
        metrics.update(eval_metrics(result.summary))
    metrics["time/eval_s"] = time.perf_counter() - t0
    return metrics
