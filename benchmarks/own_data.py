"""`math`: a run's own dataset as a benchmark, the rows its `math` task holds out.

The `math` task (`envs.math.tasks`) trains on the user's dataset and holds out a share of its
rows by content hash (`task.eval_fraction`, a tenth by default): training never draws them.
This benchmark is those rows, each sample played as an episode of the task built with the same
arguments, so a checkpoint is asked, rendered (string prompt or chat messages, system prompt,
Python tool) and graded exactly as its rollouts were. Its problems depend on the task's
arguments, so it is built from them (`benchmarks.registry.get("math", task_args)`): a run's
config (in-training evaluation, `bench compare`'s final one, `bench eval --model RUN_DIR`), or
`bench eval --data SOURCE` (any layout the task recognises), which lets any other model, the
base model first, be scored on the same held-out rows.
"""

from __future__ import annotations

from typing import Any

from benchmarks.base import BenchmarkDataError, BenchmarkSpec, SamplingDefaults

OWN_DATA_K = 4
"""Default samples per problem of an own-data benchmark (as the embedded benchmarks)."""


def math_held_out(task_args: dict[str, Any]) -> BenchmarkSpec:
    """The held-out rows of the `math` task built with `task_args` (every one of them, in the
    order `eval_problems` gives), version 1; BenchmarkDataError naming the task's complaint
    (a dataset not found, a column not there, a bad argument)."""
    from benchmarks.embedded import task_benchmark
    from envs.config_names import describe_config
    from envs.math.tasks import MathTask

    try:
        task = MathTask(**task_args)
    except (TypeError, ValueError) as exc:
        raise BenchmarkDataError(f"benchmark 'math': {exc}") from None
    n = len(task.held_out)
    return task_benchmark(
        "math",
        n=n,
        name="math",
        task_args=task_args,
        version=1,
        description=f"the math task's held-out rows ({describe_config(task_args)}): {n} rows, "
        f"eval_fraction {task.eval_fraction:g} by content hash, disjoint from training by content",
        grader=task.grader,  # checks every reference answer when loading; the episode grades
        sampling=SamplingDefaults(
            temperature=1.0, top_p=1.0, max_new_tokens=MathTask.max_new_tokens, k=OWN_DATA_K
        ),
        episode=True,
    )


def math_description() -> dict[str, Any]:
    """What `bench benchmarks` lists for `math` (its rows are the run's: nothing is loaded)."""
    from envs.math.tasks import MathTask

    return {
        "name": "math",
        "version": 1,
        "description": "your dataset's held-out rows (task.eval_fraction, by content hash; disjoint "
        "from training): in a math run (--eval-bench math), of a run (bench eval --model RUN_DIR "
        "--bench math) or of any dataset (bench eval --bench math --data SOURCE); multi-turn with "
        "task.tools=python",
        "source": "a math run's task.dataset, or --data SOURCE (a file, dataset directory or cached hub name)",
        "license": "the dataset's",
        "sampling": SamplingDefaults(
            temperature=1.0, top_p=1.0, max_new_tokens=MathTask.max_new_tokens, k=OWN_DATA_K
        ).as_dict(),
        "turns": "single",
    }
