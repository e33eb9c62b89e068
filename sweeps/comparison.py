"""What a comparison is: arms x seeds at one matched budget, every run's checkpoint evaluated
the same way (`comparison.json`; the shared parts, arms and budgets, are `sweeps.spec`'s)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from algorithms.fields import doc
from results.experiments import SPEC_FILE, seed_run_name
from sweeps.errors import ExperimentError
from sweeps.spec import Arm, ExperimentSpec


@dataclass(frozen=True)
class EvalPlan:
    """How every run's checkpoints are evaluated (the same for every arm and seed)."""

    benchmarks: tuple[str, ...] = doc(
        "benchmarks every run's selected checkpoint is evaluated on (default: the task's own benchmark "
        "when there is one)",
        flag="--eval-bench",
        metavar="NAME[,NAME]",
        default=(),
    )
    every: int = doc(
        "also evaluate during training every N steps (curves vs trajectories and time; 0: no)",
        flag="--eval-every",
        metavar="N",
        default=0,
    )
    k: int = doc("samples per problem", flag="--eval-k", metavar="K", default=4)
    limit: int | None = doc(
        "first N problems of each benchmark", flag="--eval-limit", metavar="N", default=None
    )
    seed: int = doc(
        "evaluation seed, the same for every run so samples pair across arms",
        flag="--eval-seed",
        metavar="S",
        default=0,
    )
    select: str | None = doc(
        "which checkpoint is evaluated, fixed before the runs: 'final' (the default) or 'best-on=BENCH' "
        "(the in-training best on BENCH, a benchmark that is not reported)",
        flag="--select",
        metavar="RULE",
        default=None,
    )

    def layer(self) -> dict[str, Any]:
        """The run config layer of in-training evaluation: the reported benchmarks when `every`
        is set, the selection benchmark, and every evaluated checkpoint kept when selecting."""
        in_training = [b for b in self.benchmarks if self.every] + (
            [select_bench(self.select)] if self.select else []
        )
        evals = {
            "eval_every": self.every,
            "eval_bench": ",".join(dict.fromkeys(in_training)),
            "eval_k": self.k,
            "eval_limit": self.limit,
            "eval_seed": self.seed,
        }
        if self.select:  # every evaluated checkpoint must be kept to be selectable
            evals.update(checkpoint_every=self.every, keep_checkpoints=0)
        return evals


@dataclass(frozen=True, kw_only=True)
class ComparisonSpec(ExperimentSpec):
    """A whole comparison; `comparison.json` in its output directory."""

    SPEC_FILE: ClassVar[str] = SPEC_FILE
    FINGERPRINT_CHARS: ClassVar[int] = 16
    NOUN: ClassVar[str] = "comparison"
    SEEDS_EXTEND: ClassVar[bool] = True

    seeds: tuple[int, ...] = doc(
        "seeds of every arm: N means 0..N-1, or a comma list",
        flag="--seeds",
        metavar="N|S,S,...",
        default=(0, 1, 2),
    )
    eval: EvalPlan = EvalPlan()
    tuning: dict[str, Any] | None = doc(
        "arms = the sweeps' algorithms with their best trials' parameters, run on fresh seeds (after the "
        "ones tuned on); several sweeps must share trials, budget, seeds and objective; the report states "
        "the tuning budget",
        flag="--params-from-sweep",
        metavar="SWEEP_DIR[,DIR]",
        default=None,
    )

    def run_names(self) -> list[str]:
        """`<arm>-s<seed>` of every run, arm-major (the order workers take them in)."""
        return [self.run_name(arm, seed) for arm in self.arms for seed in self.seeds]

    @staticmethod
    def run_name(arm: Arm, seed: int) -> str:
        """The run's name: its key in the study and its directory under `runs/`."""
        return seed_run_name(arm.slug, seed)

    def arm_and_seed(self, run_name: str) -> tuple[Arm, int]:
        """Inverse of `run_name`."""
        for arm in self.arms:
            for seed in self.seeds:
                if self.run_name(arm, seed) == run_name:
                    return arm, seed
        raise ExperimentError(f"run {run_name!r} is not part of this comparison")

    def config_layers(self, arm: Arm, seed: int) -> list[dict[str, Any]]:
        """The config layers of one run, lowest first (`ExperimentSpec.run_layers`)."""
        return self.run_layers(arm, seed, self.eval.layer())

    @classmethod
    def _nested_from_json(cls, values: dict[str, Any]) -> dict[str, Any]:
        plan = values["eval"]
        return {**values, "eval": EvalPlan(**{**plan, "benchmarks": tuple(plan["benchmarks"])})}


def select_bench(select: str) -> str:
    """`best-on=BENCH` -> BENCH."""
    return select.partition("=")[2]


def parse_select(text: str | None, reported: tuple[str, ...], every: int) -> str | None:
    """Check `--select`: `final` (None) or `best-on=BENCH` with BENCH not among the reported
    benchmarks (selecting on a test set would bias the comparison) and in-training evaluation on."""
    if text in (None, "final"):
        return None
    kind, sep, bench = text.partition("=")
    if kind != "best-on" or not sep or not bench:
        raise ExperimentError(f"--select {text!r}: expected 'final' or 'best-on=BENCH'")
    if bench in reported:
        raise ExperimentError(
            f"--select {text}: {bench} is also a reported benchmark; select on a benchmark that is not "
            "reported (selecting on the test set biases the comparison)"
        )
    if not every:
        raise ExperimentError(f"--select {text} needs in-training evaluation: give --eval-every N")
    return text
