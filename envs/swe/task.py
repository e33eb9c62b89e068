"""`--task swe`: resolve a GitHub-style issue in a repository with the minimal tool scaffold.

Task args (`--set task.NAME=VALUE`):
- `dataset`: "swe-mini" (default; the embedded tiny repositories, `envs.swe.swe_mini`),
  "swe-synth" (an endless stream of fresh synthetic one-line bugs from the warm-start
  generator, `envs.swe.synthetic`, each drawn once: the distribution the tiny base model was
  warm-started on, so RL has rewards to learn from on a CPU; evaluation uses separate seeded
  streams, benchmark `swe-synth`) or "swe-verified" (SWE-bench Verified, read from `data`,
  a local JSON/JSONL/parquet file in the official schema; the `benchmarks` layer is where
  hub downloads live, envs never fetch data);
- `runtime`: "local" (temporary git working copy, tests in `envs.sandbox`) or "docker" (the
  official per-instance SWE-bench images); default: "local" for swe-mini and swe-synth,
  "docker" for swe-verified (whose repositories only run in their images);
- `data`: path of the instances file (required for swe-verified);
- `max_tool_calls`, `max_observation_chars`: see `envs.swe.scaffold.SweEnv`;
- `wrong_fix_rate`: share of deliberately wrong fixes in the warm-start demonstrations.

The runtime is checked for every instance at construction, so a missing Docker daemon or
`swe` extra fails at once with the fix in the message, not in the middle of a run.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

from envs.base import Env, Message, Problem, Task
from envs.splits import Split, held_out_split
from envs.swe import synthetic
from envs.swe.instance import InstanceError, SWEInstance
from envs.swe.runtime import Runtime, RuntimeUnavailable
from envs.swe.scaffold import SweEnv
from envs.tools import TOOL_STOP

DATASETS = ("swe-mini", "swe-synth", "swe-verified")  # each also the name of its benchmark
DEFAULT_DATASET = "swe-mini"
SYNTH_TRAIN_STREAM_SIZE = 10**9
"""swe-synth training bugs are drawn uniformly from this many indices of the "train" stream."""
RUNTIMES = ("local", "docker")


def load_instances_file(path: str | Path) -> list[SWEInstance]:
    """Official-schema instances from a .json (list of rows), .jsonl or .parquet file."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"data: no such file: {path}")
    try:
        if path.suffix == ".parquet":
            import pandas as pd

            rows = pd.read_parquet(path).to_dict("records")
        elif path.suffix == ".jsonl":
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        else:
            rows = json.loads(path.read_text())
        if not isinstance(rows, list) or not rows:
            raise ValueError("expected a non-empty list of instances")
        return [SWEInstance.from_row(row) for row in rows]
    except (InstanceError, KeyError, json.JSONDecodeError, ValueError) as exc:
        raise ValueError(f"data: {path}: not SWE-bench instances: {exc}") from None


def make_runtime(name: str) -> Runtime:
    """The runtime called `name` (imported lazily: docker pulls in the `swe` extra)."""
    if name == "local":
        from envs.swe.local_runtime import LocalRuntime

        return LocalRuntime()
    from envs.swe.docker_runtime import DockerRuntime

    return DockerRuntime()


def checked_runtime(name: str, instances: list[SWEInstance]) -> Runtime:
    """The runtime `name`, checked for every instance; RuntimeUnavailable becomes a ValueError
    (which reaches the CLI as a one-line error with the fix in it)."""
    runtime = make_runtime(name)
    try:
        for inst in instances:
            runtime.check(inst)
    except RuntimeUnavailable as exc:
        raise ValueError(str(exc)) from None
    return runtime


class SweTask(Task):
    """Issue -> patch with view/search/replace/run_tests/submit; reward 1 iff SWE-bench resolved.

    Warm-start recipe (`demonstrations`): scripted episodes on SYNTHETIC one-line bugs of the
    train bucket of `synthetic.SPLIT` (`envs.swe.synthetic`), never on the swe-mini instances
    used for RL and evaluation nor on a held-out swe-synth bug; a `wrong_fix_rate` share (default 0.2) of them submit a plausible wrong fix.

    Splits: swe-synth partitions its bugs by content (`synthetic.SPLIT`): training draws only
    train-bucket bugs, the `swe-synth` benchmark's come from the test bucket. swe-mini (33
    instances) and swe-verified are fixed evaluation sets, too small (or, for SWE-bench, not
    meant) to split: `eval_problems` returns their instances and `sample_problem` draws from the
    same ones, so a run trained on them is evaluated on its training instances. No reference
    comparison trains on them (the tiny model resolves no swe-mini instance; it trains on
    swe-synth, whose generator never uses a swe-mini function name).
    """

    name = "swe"
    summary = "fix a one-line bug from an issue: view/search/replace/run_tests/submit, SWE-bench grading"
    default_runtime = "local"
    max_new_tokens = 128  # one tool call per turn; a replaced line is rarely > 100 chars
    max_turns = 8
    stop = (TOOL_STOP,)
    episode_only_args = ("dataset", "runtime", "data")
    demonstrations_version = 2  # 2: bugs of the train bucket of `synthetic.SPLIT` only

    @classmethod
    def benchmark_name(cls, task_args: dict[str, Any]) -> str:
        """The dataset's benchmark: a run on synthetic bugs is evaluated on held-out ones."""
        return task_args.get("dataset", DEFAULT_DATASET)

    def __init__(
        self,
        dataset: str = DEFAULT_DATASET,
        runtime: str | None = None,
        data: str | None = None,
        max_tool_calls: int = 8,
        max_observation_chars: int = 1000,
        wrong_fix_rate: float = synthetic.WRONG_FIX_RATE,
    ):
        """See the module docstring; invalid values raise ValueError naming the field."""
        if dataset not in DATASETS:
            raise ValueError(f"dataset: invalid value {dataset!r}; valid choices: {', '.join(DATASETS)}")
        runtime = runtime or ("docker" if dataset == "swe-verified" else "local")
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime: invalid value {runtime!r}; valid choices: {', '.join(RUNTIMES)}")
        if dataset == "swe-verified" and runtime == "local":
            raise ValueError(
                "runtime: 'local' runs only swe-mini and swe-synth; swe-verified needs runtime=docker"
            )
        if dataset == "swe-synth" and runtime != "local":
            raise ValueError("runtime: swe-synth's generated repositories exist only in runtime=local")
        if int(max_tool_calls) < 1 or int(max_observation_chars) < 1:
            raise ValueError("max_tool_calls and max_observation_chars must be >= 1")
        if not 0.0 <= float(wrong_fix_rate) <= 1.0:
            raise ValueError(f"wrong_fix_rate must be in [0, 1], got {wrong_fix_rate}")
        self.dataset, self.runtime_name = dataset, runtime
        self.max_tool_calls, self.max_observation_chars = int(max_tool_calls), int(max_observation_chars)
        self.wrong_fix_rate = float(wrong_fix_rate)
        self.instances = self._load(dataset, data)
        self.by_id = {inst.instance_id: inst for inst in self.instances}
        # swe-synth has no fixed list: one generated instance stands for the stream in the check
        checked = self.instances or [synthetic.bug_for_id(synthetic.generated_id("eval0", 0)).instance]
        self.runtime = checked_runtime(runtime, checked)

    @classmethod
    def for_problems(cls, problems: list[Problem], runtime: str) -> SweTask:
        """The task over exactly these problems (their `meta` holds the official records), in
        `runtime`; what benchmarks evaluate with. Checks the runtime for every instance, so a
        missing Docker daemon fails here with the message saying what to install or start."""
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime: invalid value {runtime!r}; valid choices: {', '.join(RUNTIMES)}")
        task = cls.__new__(cls)
        task.dataset, task.runtime_name = "given", runtime
        task.max_tool_calls, task.max_observation_chars = 8, 1000
        task.wrong_fix_rate = synthetic.WRONG_FIX_RATE
        task.instances = [SWEInstance.from_row(p.meta) for p in problems]
        task.by_id = {inst.instance_id: inst for inst in task.instances}
        task.runtime = checked_runtime(runtime, task.instances)
        return task

    @staticmethod
    def _load(dataset: str, data: str | None) -> list[SWEInstance]:
        """The fixed instance list of a dataset ([] for swe-synth, which is generated)."""
        if dataset == "swe-synth":
            if data is not None:
                raise ValueError("data: only for dataset=swe-verified (swe-synth is generated)")
            return []
        if dataset == "swe-mini":
            if data is not None:
                raise ValueError("data: only for dataset=swe-verified (swe-mini is embedded)")
            from envs.swe.swe_mini import load_swe_mini

            return list(load_swe_mini())
        if data is None:
            raise ValueError(
                "data: swe-verified needs task_args.data=PATH, a local copy of the official "
                "instances (JSON/JSONL/parquet); `bench eval --bench swe-verified` downloads it"
            )
        return load_instances_file(data)

    def _problem(self, inst: SWEInstance) -> Problem:
        return Problem(
            key=inst.instance_id, prompt=inst.problem_statement, answer=inst.patch, meta=inst.to_record()
        )

    def tiny_model_note(self) -> str | None:
        """On swe-mini the tiny base resolves nothing (0 of its instances), so the reward stays 0:
        say so, and point at the synthetic bugs it was warm-started on."""
        if self.dataset != "swe-mini":
            return None
        return (
            "the tiny base model resolves none of swe-mini's instances, so its reward will stay at 0; "
            "on a CPU train it on synthetic bugs instead: --set task.dataset=swe-synth (README: SWE on CPU)"
        )

    def sample_problem(self, rng: random.Random) -> Problem:
        """A uniformly drawn instance; for swe-synth a fresh bug of the "train" stream whose
        content is in the train bucket of `synthetic.SPLIT`."""
        if self.dataset == "swe-synth":
            bug = synthetic.SPLIT.draw_in(
                Split.TRAIN,
                lambda: synthetic.bug_for_id(
                    synthetic.generated_id("train", rng.randrange(SYNTH_TRAIN_STREAM_SIZE))
                ),
                synthetic.bug_content,
            )
            return self._problem(bug.instance)
        return self._problem(self.instances[rng.randrange(len(self.instances))])

    def eval_problems(self, n: int, seed: int = 0, split: str = Split.TEST) -> list[Problem]:
        """The first `n` instances (all when n exceeds them) of a permutation seeded by
        "swe-eval-<seed>" (the fixed datasets hold out a test split only: they are evaluation
        sets, see the class docstring); for swe-synth the first `n` bugs of the "eval<seed>"
        (test) or "val<seed>" (validation) stream whose content is in that split's bucket."""
        bucket = held_out_split(split)
        if self.dataset == "swe-synth":
            stream = f"{'eval' if bucket is Split.TEST else 'val'}{seed}"
            bugs = (synthetic.bug_for_id(synthetic.generated_id(stream, i)) for i in itertools.count())
            kept = (bug for bug in bugs if synthetic.SPLIT.of(synthetic.bug_content(bug)) is bucket)
            return [self._problem(bug.instance) for bug in itertools.islice(kept, n)]
        if bucket is not Split.TEST:
            raise ValueError(f"dataset {self.dataset!r} holds out a test split only, no validation split")
        order = list(self.instances)
        random.Random(f"swe-eval-{seed}").shuffle(order)
        return [self._problem(inst) for inst in order[:n]]

    def make_env(self, problem: Problem) -> Env:
        """A `SweEnv` on the problem's instance (rebuilt from `meta` for instances not loaded here)."""
        inst = self.by_id.get(problem.key) or SWEInstance.from_row(problem.meta)
        return SweEnv(inst, self.runtime, self.max_tool_calls, self.max_observation_chars)

    def demonstrations(self, rng: random.Random, n: int) -> list[list[Message]]:
        """`n` scripted episodes on synthetic bugs (see the class docstring)."""
        pairs = synthetic.demonstrations(
            rng,
            n,
            wrong_fix_rate=self.wrong_fix_rate,
            max_tool_calls=self.max_tool_calls,
            max_observation_chars=self.max_observation_chars,
        )
        return [messages for messages, _ in pairs]
