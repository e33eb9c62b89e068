"""Plain REINFORCE with a batch-mean baseline: the worked example of algorithms/README.md.

Loaded from outside the package: `bench algos --plugin reinforce_plugin` with this folder on
PYTHONPATH, or through the `bench.algorithms` entry-point group of an installed package.
Choices: 1. single rollout; 2. advantage = reward - batch mean reward; 3. no importance
correction (treats rollouts as on-policy); 4. token-mean aggregation.

Check it: `PYTHONPATH=examples/plugins bench algos --check reinforce --plugin reinforce_plugin`.
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.advantages import broadcast_to_tokens
from algorithms.aggregation import aggregate, masked_mean
from algorithms.base import AdvantageResult, Algorithm, LossOutput, PolicyLossInputs, Trajectories, doc
from algorithms.objectives import select_tokens


@dataclass(frozen=True)
class Config:
    baseline: str = doc(
        "'batch-mean' subtracts the batch's mean reward; 'none' uses raw rewards", default="batch-mean"
    )


class Reinforce(Algorithm):
    name = "reinforce"
    summary = "plain REINFORCE with a batch-mean baseline (example plugin)"
    paper = 'Williams, "Simple Statistical Gradient-Following Algorithms", Machine Learning 8 (1992)'
    Config = Config

    def advantages(self, traj: Trajectories) -> AdvantageResult:
        rewards_B = traj.rewards_B  # [B]
        if self.config.baseline == "batch-mean":
            rewards_B = rewards_B - rewards_B.mean()  # [B]
        adv_B_T = broadcast_to_tokens(rewards_B, traj.action_mask_B_T)  # [B, T]
        return AdvantageResult(adv_B_T)

    def policy_loss(self, inp: PolicyLossInputs) -> LossOutput:
        mask_B_T = inp.action_mask_B_T  # [B, T]
        # zero padding and observation tokens first: they may hold anything, even NaN
        logp_B_T, adv_B_T, entropy_B_T = select_tokens(
            mask_B_T, inp.logp_B_T, inp.advantages_B_T, inp.entropy_B_T
        )
        loss_B_T = -adv_B_T * logp_B_T  # [B, T]  -A_t * log pi(a_t|s_t)
        loss = aggregate(loss_B_T, mask_B_T, "token-mean")  # []
        metrics = {"loss/policy": loss.item()}
        if entropy_B_T is not None:
            metrics["policy/entropy"] = masked_mean(entropy_B_T, mask_B_T).item()
        return LossOutput(loss, metrics)
