"""GSPO: group sequence policy optimization (a sequence-level importance ratio).

Paper: Zheng et al., "Group Sequence Policy Optimization" (arXiv 2507.18071), eqs. 5-7:

    s_i = (pi_theta(y_i|x) / pi_old(y_i|x))^(1/|y_i|) = exp(mean_t log r_t)
    A_i = (R_i - mean_G(R)) / std_G(R)
    L = -(1/G) sum_i min(s_i A_i, clip(s_i, 1 - clip_eps_low, 1 + clip_eps_high) A_i)

TRL implements it as `importance_sampling_level="sequence"` with `loss_type="grpo"`.

Choices where the paper is silent, and deviations:
1. clip_eps_low = 3e-4, clip_eps_high = 4e-4 (the paper's setting; TRL's recommended values).
2. Advantages as `grpo` (unbiased std, eps 1e-4); observation tokens get 0 and do not
   enter the mean of log r_t (|y_i| counts action tokens only).
3. The gradient flows through s_i into every token of y_i (GSPO, not GSPO-token).
4. Aggregation `seq-mean-token-mean`: the per-sequence loss is placed on every action
   token and averaged per sequence, which equals the paper's (1/G) sum_i.
5. Ratio against the OLD policy; no KL (beta = 0), no entropy term; group_size 8.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Config:
    group_size: int = doc("rollouts per prompt (G)", default=8)
    clip_eps_low: float = doc(
        "sequence-ratio clip lower bound 1 - clip_eps_low", default=3e-4, acts_when=MULTIPLE_UPDATES
    )
    clip_eps_high: float = doc(
        "sequence-ratio clip upper bound 1 + clip_eps_high", default=4e-4, acts_when=MULTIPLE_UPDATES
    )
    aggregation: str = doc(
        f"loss aggregation mode, one of {AGGREGATION_MODES}", default="seq-mean-token-mean"
    )

    def __post_init__(self) -> None:
        check_aggregation(self.aggregation)
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 for group-relative advantages, got {self.group_size}")


class GSPO(Algorithm):
    name = "gspo"
    summary = "group z-score advantages + clipped sequence-level ratio exp(mean_t log r_t)"
    paper = 'Zheng et al., "Group Sequence Policy Optimization", arXiv 2507.18071, eqs. 5-7'
    Config = Config
    presets: dict = {}
    needs = frozenset({"old_logp"})
    renamed_fields = {"algo.eps_low": "algo.clip_eps_low", "algo.eps_high": "algo.clip_eps_high"}

    def advantages(self, traj: Trajectories) -> AdvantageResult:
        adv_B = group_zscore(traj.rewards_B, self.group_size)  # [B]
        adv_B_T = broadcast_to_tokens(adv_B, traj.action_mask_B_T)  # [B, T]
        return AdvantageResult(adv_B_T, None, advantage_metrics(adv_B_T, traj.action_mask_B_T))

    def policy_loss(self, inp: PolicyLossInputs) -> LossOutput:
        c = self.config
        # (1/G) sum_i -min(s_i A_i, clip(s_i, 1 - clip_eps_low, 1 + clip_eps_high) A_i),
        # s_i = exp(mean_t log r_t)
        return clipped_policy_loss(
            inp,
            self.name,
            clip_eps_low=c.clip_eps_low,
            clip_eps_high=c.clip_eps_high,
            aggregation=c.aggregation,
            ratio_level="sequence-mean",
        )  # loss [], metrics
