"""Dr.GRPO: GRPO done right (no std scaling, no length normalisation).

Paper: Liu et al., "Understanding R1-Zero-Like Training: A Critical Perspective"
(arXiv 2503.20783), eq. 3 / Sec. 3.2:

    A_i = R_i - mean_G(R)                         (no division by the group std)
    L = -(1 / (G * L_norm)) sum_i sum_t min(r_t A_i, clip(r_t, 1 - eps, 1 + eps) A_i)

with a constant L_norm instead of 1/|y_i|, which removes GRPO's length and difficulty
biases. TRL's `loss_type="dr_grpo"` divides by B * max_completion_length.

Choices where the paper is silent, and deviations:
1. L_norm = the rollout limit `max_response_tokens` (as TRL) that the loop supplies with
   the loss inputs, unless the `norm_length` field sets it; the padded length T of the
   batch when neither is given (e.g. in hand-made test batches).
2. Ratio against the OLD policy, per token, clip 0.2/0.2; no KL (beta = 0 as the paper),
   no entropy term.
3. Observation tokens of agent trajectories get advantage 0 and no loss; they still count
   in the constant normaliser (it does not depend on the data).
4. group_size 8, like `grpo`, so that the two differ only in the paper's two fixes.
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.advantages import broadcast_to_tokens, group_center
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
        "PPO clip lower bound 1 - clip_eps_low", default=0.2, acts_when=MULTIPLE_UPDATES
    )
    clip_eps_high: float = doc(
        "PPO clip upper bound 1 + clip_eps_high", default=0.2, acts_when=MULTIPLE_UPDATES
    )
    aggregation: str = doc(
        f"loss aggregation mode, one of {AGGREGATION_MODES}", default="seq-mean-token-sum-norm"
    )
    norm_length: int | None = doc("constant L_norm (None = max_response_tokens of the run)", default=None)

    def __post_init__(self) -> None:
        check_aggregation(self.aggregation)
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 for group-relative advantages, got {self.group_size}")


class DrGRPO(Algorithm):
    name = "dr-grpo"
    summary = "GRPO without std scaling and with a constant length normaliser (vs old policy)"
    paper = (
        'Liu et al., "Understanding R1-Zero-Like Training: A Critical Perspective", arXiv 2503.20783, eq. 3'
    )
    Config = Config
    presets: dict = {}
    needs = frozenset({"old_logp"})
    renamed_fields = {"algo.eps_low": "algo.clip_eps_low", "algo.eps_high": "algo.clip_eps_high"}

    def advantages(self, traj: Trajectories) -> AdvantageResult:
        adv_B = group_center(traj.rewards_B, self.group_size)  # [B] R_i - mean_G(R)
        adv_B_T = broadcast_to_tokens(adv_B, traj.action_mask_B_T)  # [B, T]
        return AdvantageResult(adv_B_T, None, advantage_metrics(adv_B_T, traj.action_mask_B_T))

    def norm_length(self, inp: PolicyLossInputs) -> int:
        """L_norm: the config, else the loop's rollout limit, else the padded length T."""
        for length in (self.config.norm_length, inp.max_response_tokens):
            if length is not None:
                return int(length)
        return inp.logp_B_T.shape[-1]

    def policy_loss(self, inp: PolicyLossInputs) -> LossOutput:
        c = self.config
        # (1 / (B * L_norm)) sum_i sum_t -min(r_t A_i, clip(r_t, 1 - clip_eps_low, 1 + clip_eps_high) A_i)
        return clipped_policy_loss(
            inp,
            self.name,
            clip_eps_low=c.clip_eps_low,
            clip_eps_high=c.clip_eps_high,
            aggregation=c.aggregation,
            norm_length=self.norm_length(inp),
        )  # loss [], metrics
