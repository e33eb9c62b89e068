"""Online drift: a task whose reward rule changes in phases on a schedule, with per-phase metrics.

The SAO paper's online setting (arXiv 2607.07508, Fig. 5): a style preference that shifts during training
(cute -> chuunibyou -> classical) with reward = quality x style in {0, 1}; the prompt never
says which style is wanted, so the policy has to notice the shift from rewards alone and
re-adapt (SAO recovers faster than a running-mean baseline after each shift).

`DriftingTask(base, phases, phase_every)` does this to any task:

- Schedule, in trajectories: the i-th problem drawn with `sample_problem` (i = 0, 1, ...
  counted by the wrapper) starts trajectory t = i * n, where n is the rollouts per problem the
  training loop announced (`begin_training`: the algorithm's group size; 1 until then), and
  belongs to phase `(t // phase_every) % len(phases)` (with `cycle=False` the last phase
  stays once reached). So every algorithm gets the same amount of data per phase: at 64
  trajectories per step a phase of 2560 lasts 40 steps of SAO (one rollout per problem) and
  of GRPO (8) alike. The loop draws problems one at a time, in order, from one producer
  thread, so the schedule follows training progress. The phase is stored in
  `Problem.meta["phase"]` (and the draw index in `meta["draw"]`); a requeued problem keeps
  the phase it was drawn in. The count lives in the task object, per process; a resumed run
  continues it from the trajectories trained on before (steps done x trajectories per step;
  trajectories in flight at the checkpoint and dropped ones are not counted).
- Reward: the episode runs as the base task's env; when it ends, the phase's rule looks at
  the final assistant turn and the reward becomes base reward x `phase.accepts(final turn)`.
  Prompts and problem keys are the base task's, identical in every phase: the preference is
  latent.
- Metrics: each finished episode reports `info["metrics"]["reward/phase_<k>"] = reward`
  (k = its phase), so the loop logs one reward curve per phase, plus `reward/quality` (the
  base reward), `reward/style` (rule followed) and `drift/phase`.

`drift` (registered) is the embedded example: `arith` chains whose required answer label
changes between phases: `Answer: 17` (phase 0) and `Result: 17` (phase 1). Its base checkpoint
is cloned from demonstrations that use `Answer` 30% of the time and `Result` 70%, so the
pretrained model writes both and RL can shift towards whichever the current phase rewards
(`DriftTask` says why the mix is uneven).
"""

from __future__ import annotations

import dataclasses
import functools
import random
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from envs.arith import ArithTask
from envs.base import Env, Message, Problem, SingleTurnEnv, StepResult, Task
from envs.math.graders import GradeResult, grade_integer
from envs.splits import Split


@dataclass(frozen=True)
class Phase:
    """One phase of a drifting reward: a `name` and the rule the final turn must follow."""

    name: str
    accepts: Callable[[str], bool]
    """Final assistant turn -> whether it follows this phase's (latent) preference."""


class DriftEnv(Env):
    """The base task's episode, re-graded on its last step by the phase's rule (module docstring)."""

    def __init__(self, inner: Env, phase_index: int, phase: Phase):
        """Wrap the base env `inner` for an episode of phase `phase_index`."""
        self.inner, self.phase_index, self.phase = inner, phase_index, phase
        self.observation_role = inner.observation_role  # tool-using bases render as "tool"

    async def reset(self) -> list[Message]:
        """The base env's initial messages (nothing reveals the phase)."""
        return await self.inner.reset()

    async def step(self, action: str) -> StepResult:
        """The base env's step; when it ends the episode, reward = base reward x rule(action)."""
        result = await self.inner.step(action)
        if not result.done:
            return result
        quality = float(result.reward)
        style = bool(self.phase.accepts(action))
        reward = quality if style else 0.0
        metrics = {
            **(result.info.get("metrics") or {}),
            f"reward/phase_{self.phase_index}": reward,
            "reward/quality": quality,
            "reward/style": float(style),
            "drift/phase": float(self.phase_index),
        }
        info = {
            **result.info,
            "phase": self.phase_index,
            "phase_name": self.phase.name,
            "quality": quality,
            "style_ok": style,
            "metrics": metrics,
        }
        return StepResult(observation=None, reward=reward, done=True, info=info)

    async def close(self) -> None:
        """Close the base env."""
        await self.inner.close()


class DriftingTask(Task):
    """Any task with a reward rule that changes in phases every `phase_every` trajectories.

    `eval_problems` are the base task's held-out problems, all in phase `eval_phase` (default
    0): a fixed, deterministic set. Adaptation to the drift is read from the training metrics
    `reward/phase_<k>`, as the paper's online figure reads training reward. Problems without
    a `phase` in their meta (e.g. from a benchmark file) are graded in phase `eval_phase`.
    """

    name: ClassVar[str] = "drifting"
    summary: ClassVar[str] = "a task whose reward rule changes in phases (online drift)"

    def __init__(
        self,
        base: Task,
        phases: Sequence[Phase],
        phase_every: int,
        cycle: bool = True,
        eval_phase: int = 0,
    ):
        """Wrap `base`; `phases` in schedule order, each lasting `phase_every` trajectories."""
        if not phases:
            raise ValueError("a drifting task needs at least one phase")
        if phase_every < 1:
            raise ValueError(f"phase_every must be >= 1, got {phase_every}")
        if not 0 <= eval_phase < len(phases):
            raise ValueError(f"eval_phase must be in [0, {len(phases) - 1}], got {eval_phase}")
        self.base, self.phases = base, tuple(phases)
        self.phase_every, self.cycle, self.eval_phase = phase_every, cycle, eval_phase
        # episode rules are the base task's (instance attributes shadow the class defaults)
        self.max_new_tokens, self.max_turns = base.max_new_tokens, base.max_turns
        self.stop, self.default_runtime = tuple(base.stop), base.default_runtime
        self.rollouts_per_problem = 1
        self._drawn = 0
        self._lock = threading.Lock()  # draws come from one producer thread; be safe anyway

    @property
    def drawn(self) -> int:
        """How many problems `sample_problem` has drawn so far (the schedule's clock)."""
        return self._drawn

    def begin_training(self, rollouts_per_problem: int, trajectories_done: int = 0) -> None:
        """Each drawn problem is played `rollouts_per_problem` times (the schedule advances that
        many trajectories per draw); the clock starts after `trajectories_done`, rounded up to
        a whole problem."""
        if rollouts_per_problem < 1:
            raise ValueError(f"rollouts per problem must be >= 1, got {rollouts_per_problem}")
        if trajectories_done < 0:
            raise ValueError(f"trajectories_done must be >= 0, got {trajectories_done}")
        with self._lock:
            self.rollouts_per_problem = rollouts_per_problem
            self._drawn = -(-trajectories_done // rollouts_per_problem)

    def phase_of(self, draw: int) -> int:
        """The phase of the `draw`-th problem drawn (0-based): that of its first trajectory."""
        block = draw * self.rollouts_per_problem // self.phase_every
        return block % len(self.phases) if self.cycle else min(block, len(self.phases) - 1)

    def sample_problem(self, rng: random.Random) -> Problem:
        """The base task's next problem, tagged with its draw index and phase in `meta`."""
        with self._lock:
            draw = self._drawn
            self._drawn += 1
        problem = self.base.sample_problem(rng)
        return _tagged(problem, self.phase_of(draw), draw)

    def eval_problems(self, n: int, seed: int = 0, split: str = Split.TEST) -> list[Problem]:
        """The base task's held-out problems, all in phase `eval_phase` (class docstring); the
        base task's splits keep them out of `sample_problem`'s draws."""
        return [_tagged(p, self.eval_phase) for p in self.base.eval_problems(n, seed, split)]

    def make_env(self, problem: Problem) -> Env:
        """The base env, re-graded by the rule of the problem's phase."""
        k = int(problem.meta.get("phase", self.eval_phase))
        return DriftEnv(self.base.make_env(problem), k, self.phases[k])

    def demonstrations(self, rng: random.Random, n: int) -> list[list[Message]]:
        """The base task's demonstrations (they should cover every phase's preference)."""
        return self.base.demonstrations(rng, n)


def _tagged(problem: Problem, phase: int, draw: int | None = None) -> Problem:
    """`problem` with its phase (and draw index) added to `meta`; key and prompt unchanged."""
    extra = {"phase": phase} if draw is None else {"phase": phase, "draw": draw}
    return dataclasses.replace(problem, meta={**problem.meta, **extra})


# ------------------------------------------------------------------- the `drift` example

LABELS = ("Answer", "Result")
"""The answer labels of `drift`, in phase order."""

_LABELLED = re.compile(r"^(Answer|Result):[ \t]*(\S.*?)[ \t]*$", re.MULTILINE)


def last_label(text: str) -> tuple[str, str] | None:
    """(label, value) of the last `Answer: X` or `Result: X` line of `text`, or None."""
    found = _LABELLED.findall(text)
    return found[-1] if found else None


def grade_either_label(completion: str, answer: str) -> GradeResult:
    """Quality of a `drift` answer: the value on the last labelled line, whichever the label,
    graded by `grade_integer`."""
    found = last_label(completion)
    if found is None:
        return GradeResult(False, None, "no-answer")
    return grade_integer(f"Answer: {found[1]}", answer)


def _has_label(text: str, label: str) -> bool:
    found = last_label(text)
    return found is not None and found[0] == label


def label_phase(label: str) -> Phase:
    """The phase that wants the final answer labelled `label` (the last labelled line counts)."""
    return Phase(name=label.lower(), accepts=functools.partial(_has_label, label=label))


class LabelledArithTask(ArithTask):
    """`arith` that accepts either label (`Answer: N` or `Result: N`) and demonstrates both.

    Each demonstration's final line uses `Answer` with probability `answer_share`, else
    `Result`; the scratchpad noise is arith's.
    """

    name = "arith-labelled"
    summary = "arith, answered as 'Answer: N' or 'Result: N'"

    def __init__(self, answer_share: float = 0.5, **arith_args):
        """`arith_args` go to `ArithTask`."""
        if not 0.0 <= answer_share <= 1.0:
            raise ValueError(f"answer_share must be in [0, 1], got {answer_share}")
        super().__init__(**arith_args)
        self.answer_share = answer_share

    def make_env(self, problem: Problem) -> Env:
        """A single-turn episode graded by `grade_either_label` (the label is the phase's business)."""
        return SingleTurnEnv(problem, grade_either_label)

    def demonstrations(self, rng: random.Random, n: int) -> list[list[Message]]:
        """Arith's noisy demonstrations, relabelled `Result` with probability 1 - answer_share."""
        demos = super().demonstrations(rng, n)
        for demo in demos:
            if rng.random() >= self.answer_share:
                head, _, value = demo[-1]["content"].rpartition("Answer: ")
                demo[-1] = {"role": "assistant", "content": f"{head}Result: {value}"}
        return demos


class DriftTask(DriftingTask):
    """`drift`: arith whose required answer label alternates `Answer` / `Result` every
    `phase_every` trajectories; reward = correct AND labelled as the current phase wants.

    Defaults, chosen from runs of the tiny model (README, "drift"):
    - phase_every 2560: 40 steps at 64 trajectories per step, for every algorithm. A policy
      gradient moves a label used with share p at a rate proportional to p(1 - p): in 40 steps
      SAO and GRPO move the wanted label by 0.1-0.4, while the other one stays common enough
      to come back in the next phase. With 20-step phases nothing moved visibly; with 75-
      and 150-step phases the first label saturated (0.9+) and the second then took the
      whole phase to climb from 0.03-0.06 to 0.15-0.17.
    - answer_share 0.3: the base writes `Result:` 70% of the time, so the first phase starts
      as every later one does, from the other label's preference, instead of from an even mix
      that it would push to saturation.
    Eval problems are in phase 0 (`Answer:`, the convention of arith and `grade_integer`).
    `answer_share` sets the base checkpoint's mix of labels; the other arguments go to
    `ArithTask`.
    """

    name = "drift"
    summary = "arith whose required answer label (Answer:/Result:) shifts in phases; online drift"
    default_runtime = "none"
    max_new_tokens = ArithTask.max_new_tokens
    max_turns = 1
    stop = ()
    episode_only_args = ("phase_every", "cycle", "eval_phase")
    demonstrations_version = ArithTask.demonstrations_version  # its demonstrations are arith's

    def __init__(
        self,
        phase_every: int = 2560,
        cycle: bool = True,
        eval_phase: int = 0,
        answer_share: float = 0.3,
        demo_error_rate: float = 0.15,
        max_operands: int = 12,
        p_more: float = 0.35,
    ):
        """See the class docstring."""
        base = LabelledArithTask(
            answer_share=answer_share,
            demo_error_rate=demo_error_rate,
            max_operands=max_operands,
            p_more=p_more,
            # the demonstration mix of the drift results in REPRODUCE.md: the task's own
            demo_p_more=p_more,
        )
        super().__init__(
            base, [label_phase(label) for label in LABELS], phase_every, cycle=cycle, eval_phase=eval_phase
        )
