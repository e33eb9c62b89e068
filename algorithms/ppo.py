"""PPO with a critic and GAE; preset `vapo` is the SAO paper's "Vanilla VAPO" ablation.

Papers: Schulman et al., "Proximal Policy Optimization Algorithms" (arXiv 1707.06347),
eq. 7; GAE (arXiv 1506.02438), eq. 16; VAPO (Yue et al., arXiv 2504.05118) for the
decoupled and length-adaptive lambdas.

    A_t = GAE(gamma, lambda_policy),  R_t = GAE(gamma, lambda_critic) + V(s_t)
    r_t = pi_theta(a_t|s_t) / pi_old(a_t|s_t)
    L_policy = -mean_t min(r_t A_t, clip(r_t, 1 - clip_eps_low, 1 + clip_eps_high) A_t)
    L_value = mean_t 0.5 * max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2)

Choices where the papers are silent, and deviations:
1. gamma = 1.0; the outcome reward sits on the last action token; GAE runs over the
   action mask only (skip-observation GAE on agent trajectories, as `sao`).
2. lambda_policy = lambda_critic = 0.95 by default (standard PPO: returns = A + V). With
   `length_adaptive_lambda` the policy lambda is 1 - 1/(alpha * l), l = action tokens.
3. Advantages are whitened over all action tokens of the batch, once per batch in
   `advantages` (CleanRL whitens per minibatch); `normalize_advantages=False` turns it off.
4. Clipped value loss (value_clip 0.2; None gives plain MSE), token-mean over action tokens.
5. Policy loss aggregation token-mean; no KL-in-reward, no entropy bonus.
6. Critic: one update per policy step, no warmup, attention trained; its learning rate is
   the run field `critic_lr`, the same rule as SAO's critic (the model tier's default; the
   paper's 5e-6 for large models), so that the comparison changes one thing at a time.
7. Preset `vapo` = the paper's "Vanilla VAPO": length-adaptive policy lambda (alpha 1.5),
   critic lambda 1.0, clip-higher 0.2/0.28, no DIS. VAPO's value pretraining,
   positive-example LM loss and group sampling are not included.
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.advantages import gae, length_adaptive_lambda, masked_whiten, outcome_rewards_to_tokens
from algorithms.aggregation import AGGREGATION_MODES, check_aggregation, masked_mean
from algorithms.base import (
    MULTIPLE_UPDATES,
    ActsWhen,
    AdvantageResult,
    Algorithm,
    CriticLossInputs,
    CriticSettings,
    LossOutput,
    PolicyLossInputs,
    Trajectories,
    doc,
)
from algorithms.objectives import (
    advantage_metrics,
    clipped_policy_loss,
    clipped_value_loss,
    critic_metrics,
    mse_value_loss,
    require,
    select_tokens,
)

LENGTH_ADAPTIVE = ActsWhen(lambda c, run: c.length_adaptive_lambda, "acts only with length_adaptive_lambda")
FIXED_LAMBDA = ActsWhen(
    lambda c, run: not c.length_adaptive_lambda, "acts only without length_adaptive_lambda"
)
SEVERAL_CRITIC_UPDATES = ActsWhen(
    lambda c, run: False,
    "acts only with more than one critic update per batch: the critic's first update starts at the "
    "rollout-time values, and ppo runs one (CriticSettings.updates_per_step = 1)",
)


@dataclass(frozen=True)
class Config:
    gamma: float = doc("GAE discount factor", default=1.0)
    lambda_policy: float = doc(
        "GAE lambda of the policy advantages (unless length-adaptive)", default=0.95, acts_when=FIXED_LAMBDA
    )
    lambda_critic: float = doc("GAE lambda of the critic targets", default=0.95)
    length_adaptive_lambda: bool = doc(
        "policy lambda = 1 - 1/(alpha * l), l = action tokens (VAPO)", default=False
    )
    alpha: float = doc("alpha of the length-adaptive lambda", default=1.5, acts_when=LENGTH_ADAPTIVE)
    clip_eps_low: float = doc(
        "PPO clip lower bound 1 - clip_eps_low", default=0.2, acts_when=MULTIPLE_UPDATES
    )
    clip_eps_high: float = doc(
        "PPO clip upper bound 1 + clip_eps_high", default=0.2, acts_when=MULTIPLE_UPDATES
    )
    value_clip: float | None = doc(
        "clip of V around the rollout-time value (None = plain MSE)",
        default=0.2,
        acts_when=SEVERAL_CRITIC_UPDATES,
    )
    normalize_advantages: bool = doc("whiten advantages over the batch's action tokens", default=True)
    aggregation: str = doc(f"policy loss aggregation mode, one of {AGGREGATION_MODES}", default="token-mean")

    def __post_init__(self) -> None:
        check_aggregation(self.aggregation)


class PPO(Algorithm):
    name = "ppo"
    summary = "PPO: critic + GAE, clipped surrogate vs old policy, clipped value loss (preset 'vapo')"
    paper = 'Schulman et al., "Proximal Policy Optimization Algorithms", arXiv 1707.06347, eq. 7; GAE arXiv 1506.02438; VAPO arXiv 2504.05118'
    Config = Config
    presets = {
        "vapo": {"length_adaptive_lambda": True, "alpha": 1.5, "lambda_critic": 1.0, "clip_eps_high": 0.28},
    }
    needs = frozenset({"values", "old_logp"})
    renamed_fields = {
        "algo.eps_low": "algo.clip_eps_low",
        "algo.eps_high": "algo.clip_eps_high",
        "algo.critic_lr": "critic_lr",
    }

    @property
    def critic(self) -> CriticSettings:
        return CriticSettings(updates_per_step=1, warmup_steps=0, freeze_attention=False)

    def advantages(self, traj: Trajectories) -> AdvantageResult:
        c = self.config
        mask_B_T = traj.action_mask_B_T  # [B, T]
        values_B_T = require(traj.values_B_T, "critic values (values_B_T)", self.name)  # [B, T] obs. ignored
        rewards_B_T = outcome_rewards_to_tokens(traj.rewards_B, mask_B_T)  # [B, T]
        _, returns_B_T = gae(rewards_B_T, values_B_T, mask_B_T, c.gamma, c.lambda_critic)  # [B, T]
        lam = (
            length_adaptive_lambda(traj.action_lengths_B, c.alpha)[:, None]
            if c.length_adaptive_lambda
            else c.lambda_policy
        )
        adv_B_T, _ = gae(rewards_B_T, values_B_T, mask_B_T, c.gamma, lam)  # [B, T]
        if c.normalize_advantages:
            adv_B_T = masked_whiten(adv_B_T, mask_B_T)  # [B, T]
        return AdvantageResult(adv_B_T, returns_B_T, advantage_metrics(adv_B_T, mask_B_T))

    def policy_loss(self, inp: PolicyLossInputs) -> LossOutput:
        c = self.config
        # agg_t -min(r_t A_t, clip(r_t, 1 - clip_eps_low, 1 + clip_eps_high) A_t),  r_t = pi_theta / pi_old
        return clipped_policy_loss(
            inp,
            self.name,
            clip_eps_low=c.clip_eps_low,
            clip_eps_high=c.clip_eps_high,
            aggregation=c.aggregation,
        )  # loss [], metrics

    def critic_loss(self, inp: CriticLossInputs) -> LossOutput:
        c = self.config
        mask_B_T = inp.action_mask_B_T  # [B, T]
        values_B_T, old_values_B_T, returns_B_T = select_tokens(
            mask_B_T, inp.values_B_T, inp.old_values_B_T, inp.returns_B_T
        )  # [B, T] each
        if c.value_clip is None:
            loss = mse_value_loss(values_B_T, returns_B_T, mask_B_T)  # []
            clip_frac = 0.0
        else:
            loss, vclipped_B_T = clipped_value_loss(
                values_B_T, old_values_B_T, returns_B_T, mask_B_T, c.value_clip
            )
            clip_frac = masked_mean(vclipped_B_T.float(), mask_B_T).item()
        metrics = critic_metrics(loss, values_B_T, returns_B_T, mask_B_T)
        metrics["value/clip_frac"] = clip_frac
        return LossOutput(loss, metrics)
