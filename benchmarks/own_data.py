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
from envs.splits import Split

OWN_DATA_K = 4
"""Default samples per problem of an own-data benchmark (as the embedded benchmarks)."""


def _math_sampling() -> SamplingDefaults:
    """The default sampling of `math` and `math-val`: the math task's output length, k = OWN_DATA_K."""
    from envs.math.tasks import MathTask

    return SamplingDefaults(temperature=1.0, top_p=1.0, max_new_tokens=MathTask.max_new_tokens, k=OWN_DATA_K)


def math_held_out(task_args: dict[str, Any]) -> BenchmarkSpec:
    """`math`: the test rows of the `math` task built with `task_args` (every one of them, in
    the order `eval_problems` gives), version 1; BenchmarkDataError naming the task's complaint
    (a dataset not found, a column not there, a bad argument)."""
    return _math_rows("math", task_args, Split.TEST)


def math_validation(task_args: dict[str, Any]) -> BenchmarkSpec:
    """`math-val`: the validation rows (task.validation_fraction), for tuning; as `math_held_out`."""
    return _math_rows("math-val", task_args, Split.VALIDATION)


def _math_rows(name: str, task_args: dict[str, Any], split: Split) -> BenchmarkSpec:
    """The `split` rows of the `math` task built with `task_args`, as the benchmark `name`."""
    from benchmarks.embedded import task_benchmark
    from envs.config_names import describe_config
    from envs.math.tasks import MathTask

    try:
        task = MathTask(**task_args)
        n = len(task.eval_problems(10**9, split=split))
    except (TypeError, ValueError) as exc:
        raise BenchmarkDataError(f"benchmark '{name}': {exc}") from None
    share = task.eval_fraction if split is Split.TEST else task.validation_fraction
    return task_benchmark(
        "math",
        n=n,
        name=name,
        split=split,
        task_args=task_args,
        version=1,
        description=f"the math task's {split} rows ({describe_config(task_args)}): {n} rows, "
        f"{share:g} of them by content hash, disjoint from training by content",
        grader=task.grader,  # checks every reference answer when loading; the episode grades
        sampling=_math_sampling(),
        episode=True,
        built=task,  # the dataset is read once, here
    )


def math_description(name: str) -> dict[str, Any]:
    """What `bench benchmarks` lists for `math` or `math-val` (their rows are a run's: nothing
    is loaded)."""
    rows = (
        "held-out rows (task.eval_fraction"
        if name == "math"
        else "validation rows, for tuning (task.validation_fraction > 0"
    )
    return {
        "name": name,
        "version": 1,
        "description": f"your dataset's {rows}, by content hash; disjoint from training): in a math "
        f"run (--eval-bench {name}), of a run (bench eval --model RUN_DIR --bench {name}) or of any "
        f"dataset (bench eval --bench {name} --data SOURCE); multi-turn with task.tools=python",
        "source": "a math run's task.dataset, or --data SOURCE (a file, dataset directory or cached hub name)",
        "license": "the dataset's",
        "sampling": _math_sampling().as_dict(),
        "turns": "single",
    }
