"""DAPO: decoupled clip and dynamic sampling policy optimization.

Paper: Yu et al., "DAPO: An Open-Source LLM Reinforcement Learning System at Scale"
(arXiv 2503.14476), eq. 8 (token-level clip-higher objective), eq. 13 (overlong shaping):

    L = -(1 / sum_i |y_i|) sum_i sum_t min(r_t A_i, clip(r_t, 1 - clip_eps_low, 1 + clip_eps_high) A_i)
    A_i = group z-score of R_i = outcome_i + R_length(|y_i|)
    R_length(y) = 0                                 if |y| <= L_max - L_cache
                = ((L_max - L_cache) - |y|) / L_cache  if L_max - L_cache < |y| <= L_max
                = -1                                if |y| > L_max
    dynamic sampling: keep a group only if 0 < #correct < G

Choices where the paper is silent, and deviations:
1. L_max = the rollout limit `max_response_tokens`; L_cache = round(overlong_buffer *
   L_max) with overlong_buffer = 0.2 (the paper's 4096 of 20480 tokens); 0 disables it.
2. |y| counts every response token (actions and observations: what the limit counts).
3. The penalty (times `overlong_penalty_factor`, default 1.0 as verl) is added to the
   outcome reward before the group z-score (unbiased std, eps 1e-4, as `grpo`).
4. Dynamic sampling looks at the raw outcome rewards (before shaping) and rejects a group
   whose rewards are all equal (torch.isclose), generalising "all correct or all wrong"
   to non-binary rewards; the loop draws more groups to fill the batch.
5. Ratio against the OLD policy (one no-grad learner pass); no KL term, no entropy term.
6. token-mean over the (mini)batch the loss sees; TRL's `dapo` divides by the token count
   of the whole generation batch, identical when the loss covers the whole batch.
7. Only the soft overlong punishment; the paper's "overlong filtering" (masking the loss
   of truncated samples) is not implemented.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.advantages import broadcast_to_tokens, group_zscore
from algorithms.aggregation import AGGREGATION_MODES, check_aggregation
from algorithms.base import (
    MULTIPLE_UPDATES,
    AdvantageResult,
    Algorithm,
    LossOutput,
    PolicyLossInputs,
    Trajectories,
    doc,
)
from algorithms.objectives import advantage_metrics, clipped_policy_loss


def overlong_penalty(lengths_B: torch.Tensor, max_len: int, buffer_len: int) -> torch.Tensor:
    """DAPO eq. 13: 0 up to L_max - L_cache, linear to -1 over the buffer, -1 beyond. [B]."""
    lengths_B = lengths_B.to(torch.get_default_dtype())  # [B]
    if buffer_len <= 0:
        return -(lengths_B > max_len).to(lengths_B.dtype)  # [B] hard -1 beyond the limit
    penalty_B = ((max_len - buffer_len) - lengths_B) / buffer_len  # [B]
    return penalty_B.clamp(min=-1.0, max=0.0)  # [B]


@dataclass(frozen=True)
class Config:
    group_size: int = doc("rollouts per prompt (G)", default=8)
    clip_eps_low: float = doc(
        "PPO clip lower bound 1 - clip_eps_low", default=0.2, acts_when=MULTIPLE_UPDATES
    )
    clip_eps_high: float = doc(
        "PPO clip upper bound 1 + clip_eps_high (clip-higher)", default=0.28, acts_when=MULTIPLE_UPDATES
    )
    aggregation: str = doc(f"loss aggregation mode, one of {AGGREGATION_MODES}", default="token-mean")
    dynamic_sampling: bool = doc("reject groups whose rewards are all equal", default=True)
    overlong_buffer: float = doc("L_cache as a fraction of max_response_tokens (0 = off)", default=0.2)
    overlong_penalty_factor: float = doc("scale of the overlong penalty added to the reward", default=1.0)

    def __post_init__(self) -> None:
        check_aggregation(self.aggregation)
        if not 0.0 <= self.overlong_buffer <= 1.0:
            raise ValueError(f"overlong_buffer must be in [0, 1], got {self.overlong_buffer}")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 for group-relative advantages, got {self.group_size}")


class DAPO(Algorithm):
    name = "dapo"
    summary = "clip-higher, token-mean, dynamic sampling, overlong reward shaping (vs old policy)"
    paper = 'Yu et al., "DAPO: An Open-Source LLM Reinforcement Learning System at Scale", arXiv 2503.14476, eqs. 8, 13'
    Config = Config
    presets = {"no-shaping": {"overlong_buffer": 0.0, "overlong_penalty_factor": 0.0}}
    needs = frozenset({"old_logp"})
    renamed_fields = {"algo.eps_low": "algo.clip_eps_low", "algo.eps_high": "algo.clip_eps_high"}

    def accept_group(self, rewards_G: torch.Tensor) -> bool:
        if not self.config.dynamic_sampling:
            return True
        return not bool(torch.isclose(rewards_G, rewards_G[:1].expand_as(rewards_G)).all())

    def advantages(self, traj: Trajectories) -> AdvantageResult:
        c = self.config
        lengths_B = traj.response_mask_B_T.sum(-1)  # [B] |y_i|
        buffer_len = round(c.overlong_buffer * traj.max_response_tokens)
        penalty_B = overlong_penalty(lengths_B, traj.max_response_tokens, buffer_len)  # [B]
        outcome_B = traj.rewards_B.to(torch.promote_types(traj.rewards_B.dtype, penalty_B.dtype))  # [B]
        rewards_B = outcome_B + c.overlong_penalty_factor * penalty_B.to(outcome_B.dtype)  # [B]
        adv_B = group_zscore(rewards_B, self.group_size)  # [B]
        adv_B_T = broadcast_to_tokens(adv_B, traj.action_mask_B_T)  # [B, T]
        metrics = advantage_metrics(adv_B_T, traj.action_mask_B_T)
        metrics["reward/overlong_penalty_mean"] = penalty_B.mean().item()
        return AdvantageResult(adv_B_T, None, metrics)

    def policy_loss(self, inp: PolicyLossInputs) -> LossOutput:
        c = self.config
        # token-mean of -min(r_t A_i, clip(r_t, 1 - clip_eps_low, 1 + clip_eps_high) A_i),
        # r_t = pi_theta / pi_old
        return clipped_policy_loss(
            inp,
            self.name,
            clip_eps_low=c.clip_eps_low,
            clip_eps_high=c.clip_eps_high,
            aggregation=c.aggregation,
        )  # loss [], metrics
