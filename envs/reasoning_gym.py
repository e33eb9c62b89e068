"""`rg:<dataset>`: any reasoning-gym dataset as a task, graded by the dataset's own verifier.

reasoning-gym (the `rg` extra) generates verifiable problems procedurally: item `i` of a dataset
built with seed `s` comes from `Random(s + i)`. Task arguments (`--set task.ARG=VALUE`) are the
dataset's own config fields (e.g. `--task rg:basic_arithmetic --set task.max_terms=3`; unknown
ones get a did-you-mean over the dataset's fields), plus:

- `size` (default 100,000): the training pool, items 0..size-1 of the training stream;
- `system_prompt`: a system message before every prompt (needs a chat template).

A config has a benchmark of its own (`envs.config_names`): `rg:chain_sum@max_digits=1@max_terms=2`,
so a run at an easy setting is evaluated on held-out problems of that setting. A config with a
list value (e.g. basic_arithmetic's `operators`) or a system prompt cannot be written in a name
and has none.

Prompt: the dataset's question, a blank line, then `ANSWER_INSTRUCTION` (reasoning-gym's own
`<answer>` tag convention). Grading: the text after any thinking (`strip_thinking`), its last
`<answer>...</answer>` (reasoning-gym's `extract_answer`), scored by `dataset.score_answer`
(partial credit in [0, 1] where the dataset gives it); the reward is that score, `correct` is a
score of 1.

Train/eval disjointness, by construction twice over: (1) separate seed streams, training items
from seed `TRAIN_SEED` (indices < size), evaluation items from seed `EVAL_SEED + eval seed`, so
no generator state is shared while size < EVAL_SEED; (2) a content split (`envs.splits`) on the
question text, since two seeds can generate the same question in a small space: training draws
reject every question in the test or validation bucket, evaluation keeps only those of its
bucket, so no evaluated question is ever trained on, whatever the seeds.
"""

from __future__ import annotations

import difflib
import random
from typing import Any, ClassVar

from envs.base import Env, GradeResult, Problem, SingleTurnEnv, StepResult, Task
from envs.config_names import CONFIG_MARK, config_name
from envs.math.graders import strip_thinking
from envs.splits import ContentSplit, Split, held_out_split

PREFIX = "rg:"
TRAIN_SEED = 0
EVAL_SEED = 10**9
"""Seed of the evaluation stream (plus the eval seed); training indices stay below it."""
ANSWER_INSTRUCTION = "Give your final answer within <answer></answer> tags."
TEST_SHARE, VALIDATION_SHARE = 0.1, 0.1
MAX_EVAL_SCAN = 200_000
"""Items of the evaluation stream scanned at most for one held-out set."""


class ReasoningGymError(ValueError):
    """An unknown reasoning-gym dataset, a bad config field, or reasoning-gym not installed."""


def dataset_names() -> list[str]:
    """reasoning-gym's registered dataset names (imports reasoning-gym: seconds)."""
    try:
        import reasoning_gym
    except ImportError:
        raise ReasoningGymError(
            "rg:<dataset> tasks need reasoning-gym, which is not installed: pip install 'rl-bench[rg]'"
        ) from None
    return sorted(reasoning_gym.factory.DATASETS)


def _config_fields(dataset: str) -> list[str]:
    """The config fields of a reasoning-gym dataset (without `seed` and `size`, which the task sets)."""
    import dataclasses

    import reasoning_gym

    config_cls = reasoning_gym.factory.DATASETS[dataset][1]
    return [f.name for f in dataclasses.fields(config_cls) if f.name not in ("seed", "size")]


class VerifiedEnv(SingleTurnEnv):
    """A one-turn episode scored by a reasoning-gym verifier `score(answer, entry) -> [0, 1]`: the
    reward is the score of the last `<answer>` after any thinking (0 without one)."""

    def __init__(self, problem: Problem, score: Any, system_prompt: str | None = None):
        """Wrap `problem` (its `meta["entry"]` is the dataset item the verifier reads)."""
        super().__init__(
            problem, lambda completion, answer: GradeResult(False, None, "unused"), system_prompt
        )
        self.score = score

    async def step(self, action: str) -> StepResult:
        """Score `action`; the episode ends here."""
        from reasoning_gym.utils import extract_answer

        if self.done:
            raise RuntimeError(f"episode for problem {self.problem.key!r} is already done")
        self.done = True
        extracted = extract_answer(strip_thinking(action))
        score = float(self.score(extracted, self.problem.meta["entry"])) if extracted is not None else 0.0
        info = {"correct": score == 1.0, "extracted": extracted, "method": "reasoning-gym", "score": score}
        return StepResult(observation=None, reward=score, done=True, info=info)


class ReasoningGymTask(Task):
    """One reasoning-gym dataset (class attribute `dataset`, set by `envs.registry` for
    `rg:<dataset>`); see the module docstring for arguments, prompt, grading and the split."""

    name: ClassVar[str] = "rg"
    dataset: ClassVar[str] = ""
    summary = "any reasoning-gym dataset (--task rg:<name>), graded by its own verifier"
    max_new_tokens = 512
    max_turns = 1
    stop = ()

    def __init__(self, size: int = 100_000, system_prompt: str | None = None, **config: Any):
        """Build the training and evaluation generators; bad names or values: ReasoningGymError."""
        valid = dataset_names()
        if self.dataset not in valid:
            close = difflib.get_close_matches(self.dataset, valid, n=1)
            hint = f"did you mean 'rg:{close[0]}'? " if close else ""
            raise ReasoningGymError(
                f"unknown reasoning-gym dataset {self.dataset!r}; {hint}available: {', '.join(valid)}"
            )
        fields = _config_fields(self.dataset)
        for key in config:
            if key not in fields:
                close = difflib.get_close_matches(key, fields, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ReasoningGymError(
                    f"task.{key}: not a config field of reasoning-gym's {self.dataset}{hint}; valid: "
                    f"size, system_prompt, {', '.join(fields)}"
                )
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size < EVAL_SEED:
            raise ReasoningGymError(f"size must be an integer in [1, {EVAL_SEED}); got {size!r}")
        self.size, self.system_prompt, self.config = size, system_prompt or None, dict(config)
        self.split = ContentSplit(f"rg-{self.dataset}-v1", TEST_SHARE, VALIDATION_SHARE)
        self.train_data = self._make(TRAIN_SEED, size)

    def _make(self, seed: int, size: int) -> Any:
        import reasoning_gym

        try:
            return reasoning_gym.create_dataset(self.dataset, seed=seed, size=size, **self.config)
        except (TypeError, ValueError, AssertionError) as exc:
            raise ReasoningGymError(f"rg:{self.dataset} config {self.config}: {exc}") from None

    def _problem(self, data: Any, index: int, stream: str) -> Problem:
        entry = data[index]
        return Problem(
            key=f"rg-{self.dataset}-{stream}-{index}",
            prompt=f"{entry['question']}\n\n{ANSWER_INSTRUCTION}",
            answer=str(entry["answer"]),
            meta={"question": entry["question"], "entry": entry},
        )

    def sample_problem(self, rng: random.Random) -> Problem:
        """A training item (uniform over the pool), never one of a held-out bucket."""
        return self.split.draw_in(
            Split.TRAIN,
            lambda: self._problem(self.train_data, rng.randrange(self.size), "train"),
            lambda p: p.meta["question"],
        )

    def eval_problems(self, n: int, seed: int = 0, split: str = Split.TEST) -> list[Problem]:
        """The first `n` distinct questions of the `split` bucket in the evaluation stream of `seed`."""
        bucket = held_out_split(split)
        data = self._make(EVAL_SEED + seed, MAX_EVAL_SCAN)
        out, seen = [], set()
        for index in range(MAX_EVAL_SCAN):
            problem = self._problem(data, index, f"eval{seed}")
            question = problem.meta["question"]
            if question not in seen and self.split.of(question) is bucket:
                seen.add(question)
                out.append(problem)
                if len(out) == n:
                    break
        return out

    def make_env(self, problem: Problem) -> Env:
        """One turn scored by the dataset's verifier (partial credit as the reward)."""
        return VerifiedEnv(problem, self.train_data.score_answer, self.system_prompt)

    @classmethod
    def benchmark_name(cls, task_args: dict[str, Any]) -> str:
        """The held-out problems' benchmark at this config (`config_name`; `size` changes only the
        training pool); a config a name cannot carry (a list value, a system prompt) has a name
        no benchmark answers to, so its runs name their evaluation with --eval-bench."""
        config = {k: v for k, v in task_args.items() if k != "size"}
        unnamed = f"{PREFIX}{cls.dataset}{CONFIG_MARK}custom"
        if "system_prompt" in config:
            return unnamed
        return config_name(f"{PREFIX}{cls.dataset}", config) or unnamed
