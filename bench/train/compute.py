"""Model FLOPs of a training step: what `--budget flops=N` counts and `budget/flops` records.

The passes a step makes, each counted by `bench.models.flops` (PaLM's convention: matmuls only,
2 FLOPs per multiply-add, a backward twice its forward, dense attention) over the real lengths of
the step's sequences:

- generation: every episode taken from the rollouts (trained on, or discarded as stale, filtered
  or failed: generating them cost the same), each engine request as the engine ran it, a prefill
  of its prompt and one decode per further token (`Trajectory.requests`);
- the policy update: a forward and a backward over every trained sequence (prompt + response),
  whatever the number of minibatches (they split the rows); none in a critic-warmup step;
- no-grad passes where the algorithm needs them: the old policy's log-probs when they need their
  own pass (`old_logp` with more than one minibatch; with one, the update's forward gives them)
  and the frozen reference policy's (`ref_logp`), one forward each;
- the critic: K updates (`CriticSettings.updates_per_step`), each a forward and a backward of the
  value model (value head; with `freeze_attention` the attention projections get no weight
  gradient, as `flops.backward_flops` counts it). The values the advantages use are the first
  update's forward, so there is no separate value pass.

Not counted: a second forward of a batch above the learner's token budget (`learner_chunk_tokens`:
the gradient through the model outputs is taken chunk by chunk after a no-grad pass; like
activation recomputation it is not model work); the engine's re-prefill of in-flight sequences
after a weight update; in-training evaluation; a learner pass skipped for a non-finite loss
counts as run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.errors import UsageError
from bench.models.flops import Head, forward_flops, generation_flops, train_step_flops
from bench.models.shapes import DecoderShape


@dataclass(frozen=True)
class StepFlops:
    """The model FLOPs of one step, by part (module docstring)."""

    generation: int = 0
    policy: int = 0  # forward + backward of the policy update
    no_grad: int = 0  # old-policy and reference forwards
    critic: int = 0  # K critic updates

    @property
    def total(self) -> int:
        """Every part added up."""
        return self.generation + self.policy + self.no_grad + self.critic

    def as_metrics(self) -> dict[str, float]:
        """The step's `budget/step_*flops` metrics (the loop adds them to the cumulative counts)."""
        return {
            "budget/step_flops": float(self.total),
            "budget/step_generation_flops": float(self.generation),
            "budget/step_policy_flops": float(
                self.policy + self.no_grad
            ),  # the update and its no-grad passes
            "budget/step_critic_flops": float(self.critic),
        }


def episode_flops(shape: DecoderShape, trajectories: Sequence[Any]) -> int:
    """Generation FLOPs of finished episodes: each of their engine requests (prompt, new tokens)."""
    requests = [r for t in trajectories for r in t.requests]
    if not requests:
        return 0
    prompts, new = zip(*requests, strict=True)
    return generation_flops(shape, prompts, new)


def learner_flops(
    shape: DecoderShape,
    lengths: Sequence[int],
    *,
    needs: frozenset[str],
    critic: Any | None,
    minibatches: int,
    policy_updated: bool,
) -> StepFlops:
    """FLOPs of one learner step over sequences of `lengths` tokens (prompt + response): the
    policy update (unless `policy_updated` is False: a critic-warmup step), its no-grad passes,
    and `critic` (`CriticSettings` or None) updates (module docstring)."""
    policy = no_grad = critic_flops = 0
    if policy_updated:
        policy = train_step_flops(shape, lengths)
        separate_old = "old_logp" in needs and min(minibatches, len(lengths)) > 1
        passes = int(separate_old) + int("ref_logp" in needs)
        no_grad = passes * forward_flops(shape, lengths)
    if critic is not None:
        one_update = train_step_flops(
            shape, lengths, head=Head.VALUE, frozen_attention=critic.freeze_attention
        )
        critic_flops = critic.updates_per_step * one_update
    return StepFlops(policy=policy, no_grad=no_grad, critic=critic_flops)


def step_flops(
    shape: DecoderShape | None,
    learner: Any,
    trained: Sequence[Any],
    generated: Sequence[Any],
    policy_updated: bool,
) -> StepFlops | None:
    """The FLOPs of one loop step: `generated` episodes (every one taken from the rollouts) and a
    `learner` step on the `trained` ones; None where the model's shape is unknown (`shape` None:
    an architecture `bench.models.shapes` does not read)."""
    if shape is None:
        return None
    lengths = [len(t.prompt_ids) + len(t.response_ids) for t in trained]
    learner_part = learner_flops(
        shape,
        lengths,
        needs=learner.algo.needs,
        critic=learner.algo.critic,
        minibatches=learner.minibatches,
        policy_updated=policy_updated,
    )
    generation = episode_flops(shape, generated)
    return StepFlops(generation, learner_part.policy, learner_part.no_grad, learner_part.critic)


def model_shape(policy: Any) -> DecoderShape | None:
    """The decoder shape FLOPs are counted with, or None for an architecture without one (its
    FLOPs are then not counted, and a run with a FLOPs budget stops at its start)."""
    from bench.models.shapes import ShapeError, decoder_shape

    try:
        return decoder_shape(policy)
    except ShapeError:
        return None


def check_flops_countable(config: Any, policy: Any) -> None:
    """A run with a FLOPs budget (`max_flops`) of a model whose shape is unknown cannot stop at
    it: a one-line UsageError at the run's start."""
    if config.max_flops is not None and model_shape(policy) is None:
        from bench.models.shapes import ARCHITECTURES

        raise UsageError(
            f"max_flops: the FLOPs of {config.model} are not counted (an architecture other than "
            f"{', '.join(ARCHITECTURES)}); use another budget (trajectories, tokens, minutes)"
        )
