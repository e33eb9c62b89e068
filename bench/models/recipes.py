"""How the embedded tiny model is trained on each task: its warm-start (pretraining) recipe and
its policy learning rate in RL.

These are facts about the tiny model, not about the tasks, so they live here and a user's own
task needs none of them: a task without an entry gets `DEFAULT`. What each value was chosen
from (the runs, their commands and scores) is in REPRODUCE.md; the short why stays beside it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TinyRecipe:
    """The tiny model's recipe on one task."""

    pretrain_steps: int = 1000
    """Optimizer steps of the warm-start on the task's demonstrations (`bench pretrain`)."""
    pretrain_batch_size: int = 64
    """Transcripts per warm-start step; long transcripts want smaller batches."""
    policy_lr: float | None = None
    """The RL policy learning rate of small models (such as the tiny one) on this task, for every
    algorithm alike; None: the small-model default (`bench.train.policy_setup.SMALL_LRS`)."""


RECIPE_VERSION = 2
"""Version of the warm-start recipe (model shape, data, optimiser): bump it when one changes, so
every cached base checkpoint is rebuilt."""

PRECISIONS = ("fp32", "bf16")
"""Precisions of the warm-start's forward passes (`bench.models.pretrain.pretrain`); recipes use fp32."""

DEFAULT = TinyRecipe()

RECIPES: dict[str, TinyRecipe] = {
    "arith": DEFAULT,
    "drift": DEFAULT,  # the same base recipe as arith, whose demonstrations it reuses
    # fewer steps left a base that could not yet copy a file name from the prompt; transcripts are
    # ~7x arith's, so 16 per step keeps a step near arith's token count; at the small-model
    # default policy rate a seed collapsed (REPRODUCE.md, SWE on CPU)
    "swe": TinyRecipe(pretrain_steps=1500, pretrain_batch_size=16, policy_lr=5e-5),
    # at the small-model default policy rate vanilla GRPO collapsed (REPRODUCE.md, agent task)
    "agent": TinyRecipe(pretrain_steps=1000, policy_lr=5e-5),
}
"""Task name -> its tiny-model recipe (tasks not listed use `DEFAULT`)."""


def recipe_for(task: str) -> TinyRecipe:
    """The tiny-model recipe of `task` (`DEFAULT` for tasks without one)."""
    return RECIPES.get(task, DEFAULT)
