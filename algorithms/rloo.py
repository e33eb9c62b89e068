"""RLOO: REINFORCE leave-one-out, with the PPO clipped surrogate against the old policy.

Paper: Ahmadian et al., "Back to Basics: Revisiting REINFORCE Style Optimization for
Learning from Human Feedback in LLMs" (arXiv 2402.14740), eq. 6 (Kool et al. 2019):

    A_i = R_i - (1 / (G - 1)) sum_{j != i} R_j
    L = agg -min(r A_i, clip(r, 1 - clip_eps_low, 1 + clip_eps_high) A_i)

Choices where the paper is silent, and deviations:
1. The paper's RLOO is on-policy REINFORCE; here, as in TRL's RLOOTrainer, the
   policy-gradient term is PPO's clipped surrogate against the OLD policy (identical
   gradient when nothing is stale), clip 0.2/0.2.
2. Default `ratio_level="token"`: one ratio per token, like every other clipped plugin
   here. TRL's RLOOTrainer instead clips the whole-sequence ratio exp(sum_t log r_t) and
   averages per sequence: preset `trl` (ratio_level "sequence-sum", aggregation
   "seq-mean-token-mean") reproduces it.
3. Aggregation `token-mean` by default (every action token weighs the same, as DAPO).
4. No KL-in-reward (TRL's default beta is 0.05), no advantage normalisation (TRL's
   default), no entropy term. group_size 4 (k = 4, one of the paper's settings).
5. Observation tokens of agent trajectories get advantage 0 and no loss.
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.advantages import broadcast_to_tokens, leave_one_out
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
from algorithms.objectives import RATIO_LEVELS, advantage_metrics, clipped_policy_loss


@dataclass(frozen=True)
class Config:
    group_size: int = doc("rollouts per prompt (k >= 2)", default=4)
    clip_eps_low: float = doc(
        "PPO clip lower bound 1 - clip_eps_low", default=0.2, acts_when=MULTIPLE_UPDATES
    )
    clip_eps_high: float = doc(
        "PPO clip upper bound 1 + clip_eps_high", default=0.2, acts_when=MULTIPLE_UPDATES
    )
    ratio_level: str = doc("'token' or 'sequence-sum' (TRL RLOOTrainer) or 'sequence-mean'", default="token")
    aggregation: str = doc(f"loss aggregation mode, one of {AGGREGATION_MODES}", default="token-mean")

    def __post_init__(self) -> None:
        check_aggregation(self.aggregation)
        if self.ratio_level not in RATIO_LEVELS:
            raise ValueError(f"unknown ratio_level {self.ratio_level!r}; valid: {', '.join(RATIO_LEVELS)}")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 for leave-one-out, got {self.group_size}")


class RLOO(Algorithm):
    name = "rloo"
    summary = "leave-one-out baseline + PPO clip vs old policy (preset 'trl': sequence-level ratio)"
    paper = 'Ahmadian et al., "Back to Basics: Revisiting REINFORCE Style Optimization for Learning from Human Feedback in LLMs", arXiv 2402.14740, eq. 6'
    Config = Config
    presets = {"trl": {"ratio_level": "sequence-sum", "aggregation": "seq-mean-token-mean"}}
    needs = frozenset({"old_logp"})
    renamed_fields = {"algo.eps_low": "algo.clip_eps_low", "algo.eps_high": "algo.clip_eps_high"}

    def advantages(self, traj: Trajectories) -> AdvantageResult:
        adv_B = leave_one_out(traj.rewards_B, self.group_size)  # [B] R_i - mean_{j != i} R_j
        adv_B_T = broadcast_to_tokens(adv_B, traj.action_mask_B_T)  # [B, T]
        return AdvantageResult(adv_B_T, None, advantage_metrics(adv_B_T, traj.action_mask_B_T))

    def policy_loss(self, inp: PolicyLossInputs) -> LossOutput:
        c = self.config
        # agg -min(r A_i, clip(r, 1 - clip_eps_low, 1 + clip_eps_high) A_i),  r per token (or per sequence)
        return clipped_policy_loss(
            inp,
            self.name,
            clip_eps_low=c.clip_eps_low,
            clip_eps_high=c.clip_eps_high,
            aggregation=c.aggregation,
            ratio_level=c.ratio_level,
        )  # loss [], metrics
