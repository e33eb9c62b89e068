"""SAO: single-rollout asynchronous optimization with a value model and DIS.

Paper: Hou, Li, Tang, Dong, "Single-Rollout Asynchronous Optimization for Agentic
Reinforcement Learning", arXiv 2607.07508 (2026). One rollout per prompt; per-token
advantages from a critic; the DIS objective (eqs. 1-3), maximised:

    r_t = exp(log pi_theta(a_t|s_t) - log pi_rollout(a_t|s_t))
    f(r) = r if (1 - dis_eps_low) < r < (1 + dis_eps_high) else 0
    J = E_t[ f(r_t) * A_t * log pi_theta(a_t|s_t) ]

The band (the paper's eps_low/eps_high; fields `dis_eps_low`/`dis_eps_high`) is 0.3/5.0 for
math and 0.8/3.0 for coding (`objectives.DIS_BAND_MATH`/`DIS_BAND_CODING`, presets `math`,
`coding`). Critic: K=2 updates per policy step (TTUR), frozen attention, 10 warmup steps, targets
from GAE with lambda=1; policy advantages from GAE with VAPO's length-adaptive lambda
1 - 1/(alpha*l); skip-observation GAE on agent trajectories.

Choices where the paper is silent, and deviations:
1. f(r)*A is detached by default (`detach_coefficient`): loss = -(sg(f(r)*A) * log pi),
   so in band d loss/d log pi_t = -A_t * r_t, i.e. -A_t * grad r_t, PPO's unclipped
   gradient; out of band the gradient is exactly 0 whatever the sign of A. False keeps
   the gradient through f(r) (the literal product rule of eq. 3).
2. Aggregation: `token-mean` over all action tokens of the batch (configurable).
3. No KL-to-reference and no entropy term (the paper mentions none).
4. gamma = 1.0 (outcome rewards); the outcome reward sits on the last action token.
5. GAE runs over the ACTION mask only, so on agent trajectories the last token of action
   i links to the first token of action i+1 (skip-observation GAE); observation tokens
   get no advantage, no critic target and no loss.
6. l of the length-adaptive lambda = number of action tokens of the trajectory
   (observation tokens are not counted).
7. No advantage normalisation by default (`normalize_advantages=False`): outcome
   rewards are bounded and whitening a single-rollout batch mixes unrelated prompts.
8. Critic loss: plain MSE 0.5*(V-R)^2, token-mean over action tokens, no value clipping.
9. The 10-step warmup is read as 10 critic-only steps (policy frozen); which modules
   count as "attention" (and that norms keep training) is the trainer's choice. The critic's
   learning rate (the paper's 5e-6) is the run field `critic_lr`, like the policy's: its
   default is the model tier's, and the paper's for large models.
10. Value pretraining is not part of the plugin (no size is given).
11. Advantage granularity (App. A.1 ablation, `advantage_granularity`): `token` (the
    paper's method) or step-level, one value per agent step (a maximal run of action
    tokens), its mean token value (`step-mean`) or its last token's (`step-last`), GAE run
    over steps and each step's advantage on all its tokens. Choices: l of the policy lambda
    stays the action-token count, and the critic keeps its token-level targets (with
    lambda_critic = gamma = 1 both are the outcome on every token), so only the policy's
    advantages change. On a single-turn task a trajectory is one step.
12. "SAO w/ DIS only" (Table 1) is not defined further by the paper; the `dis-only` preset
    reads it as SAO without its two ablated value-model designs (K = 1, attention trained).
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.advantages import (
    gae,
    length_adaptive_lambda,
    masked_whiten,
    outcome_rewards_to_tokens,
    step_level_gae,
)
from algorithms.aggregation import AGGREGATION_MODES, check_aggregation
from algorithms.base import (
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
    DIS_BAND_CODING,
    DIS_BAND_MATH,
    advantage_metrics,
    critic_metrics,
    dis_policy_loss,
    mse_value_loss,
    require,
    select_tokens,
)

GRANULARITIES = ("token", "step-mean", "step-last")


@dataclass(frozen=True)
class Config:
    dis_eps_low: float = doc(
        f"DIS band: tokens with r <= 1 - dis_eps_low are dropped (math {DIS_BAND_MATH.low}, "
        f"coding {DIS_BAND_CODING.low})",
        default=DIS_BAND_MATH.low,
    )
    dis_eps_high: float = doc(
        f"DIS band: tokens with r >= 1 + dis_eps_high are dropped (math {DIS_BAND_MATH.high}, "
        f"coding {DIS_BAND_CODING.high})",
        default=DIS_BAND_MATH.high,
    )
    detach_coefficient: bool = doc(
        "stop the gradient through f(r)*A (in-band gradient = A * grad r)", default=True
    )
    aggregation: str = doc(f"loss aggregation mode, one of {AGGREGATION_MODES}", default="token-mean")
    gamma: float = doc("discount factor of GAE (unspecified in the paper)", default=1.0)
    lambda_critic: float = doc("GAE lambda of the critic targets (1.0 = Monte Carlo)", default=1.0)
    alpha: float = doc("length-adaptive policy lambda 1 - 1/(alpha * l), l = action tokens", default=1.5)
    normalize_advantages: bool = doc("whiten policy advantages over the batch's action tokens", default=False)
    critic_updates_per_step: int = doc("K critic optimizer steps per policy step (TTUR)", default=2)
    critic_warmup_steps: int = doc("critic-only steps before the policy moves", default=10)
    freeze_attention: bool = doc("freeze the critic's attention modules during RL", default=True)
    advantage_granularity: str = doc(
        f"policy advantages per token or per agent step, one of {GRANULARITIES}", default="token"
    )

    def __post_init__(self) -> None:
        check_aggregation(self.aggregation)
        if self.advantage_granularity not in GRANULARITIES:
            raise ValueError(
                f"unknown advantage_granularity {self.advantage_granularity!r}; valid: {', '.join(GRANULARITIES)}"
            )
        if not (0.0 < self.dis_eps_low <= 1.0 and self.dis_eps_high > 0.0):
            raise ValueError(
                f"need 0 < dis_eps_low <= 1 and dis_eps_high > 0, got {self.dis_eps_low}, {self.dis_eps_high}"
            )


class SAO(Algorithm):
    name = "sao"
    summary = "single rollout + critic (TTUR, frozen attention, decoupled GAE) + DIS objective"
    paper = 'Hou, Li, Tang, Dong, "Single-Rollout Asynchronous Optimization for Agentic Reinforcement Learning", arXiv 2607.07508, eqs. 1-3'
    Config = Config
    presets = {
        "math": DIS_BAND_MATH.fields(),
        "coding": DIS_BAND_CODING.fields(),
        "single-critic-update": {"critic_updates_per_step": 1},  # ablation: K = 1
        "full-parameter-critic": {"freeze_attention": False},  # ablation: attention trained
        # "SAO w/ DIS only" of Table 1, read as SAO without its two value-model designs
        "dis-only": {"critic_updates_per_step": 1, "freeze_attention": False},
        "step-average": {"advantage_granularity": "step-mean"},  # ablation: App. A.1
        "step-last": {"advantage_granularity": "step-last"},  # ablation: App. A.1
    }
    needs = frozenset({"values"})
    renamed_fields = {
        "algo.eps_low": "algo.dis_eps_low",
        "algo.eps_high": "algo.dis_eps_high",
        "algo.critic_lr": "critic_lr",
    }

    @property
    def critic(self) -> CriticSettings:
        c = self.config
        return CriticSettings(
            updates_per_step=c.critic_updates_per_step,
            warmup_steps=c.critic_warmup_steps,
            freeze_attention=c.freeze_attention,
        )

    def advantages(self, traj: Trajectories) -> AdvantageResult:
        c = self.config
        mask_B_T = traj.action_mask_B_T  # [B, T]
        values_B_T = require(traj.values_B_T, "critic values (values_B_T)", self.name)  # [B, T] obs. ignored
        rewards_B_T = outcome_rewards_to_tokens(traj.rewards_B, mask_B_T)  # [B, T] r on last action token
        _, returns_B_T = gae(rewards_B_T, values_B_T, mask_B_T, c.gamma, c.lambda_critic)  # [B, T]
        lam_B_1 = length_adaptive_lambda(traj.action_lengths_B, c.alpha)[:, None]  # [B, 1]
        if c.advantage_granularity == "token":
            adv_B_T, _ = gae(rewards_B_T, values_B_T, mask_B_T, c.gamma, lam_B_1)  # [B, T]
        else:  # one value per agent step ("step-mean" / "step-last")
            step_value = c.advantage_granularity.removeprefix("step-")
            adv_B_T, _ = step_level_gae(traj.rewards_B, values_B_T, mask_B_T, c.gamma, lam_B_1, step_value)
        if c.normalize_advantages:
            adv_B_T = masked_whiten(adv_B_T, mask_B_T)  # [B, T]
        metrics = advantage_metrics(adv_B_T, mask_B_T)
        metrics["adv/lambda_policy_mean"] = lam_B_1.mean().item()
        return AdvantageResult(adv_B_T, returns_B_T, metrics)

    def policy_loss(self, inp: PolicyLossInputs) -> LossOutput:
        c = self.config
        # agg_t[ -sg(f(r_t) * A_t) * log pi_theta(a_t|s_t) ],  r_t = pi_theta / pi_rollout
        return dis_policy_loss(
            inp,
            dis_eps_low=c.dis_eps_low,
            dis_eps_high=c.dis_eps_high,
            aggregation=c.aggregation,
            detach_coefficient=c.detach_coefficient,
        )  # loss [], metrics

    def critic_loss(self, inp: CriticLossInputs) -> LossOutput:
        mask_B_T = inp.action_mask_B_T  # [B, T]
        values_B_T, returns_B_T = select_tokens(mask_B_T, inp.values_B_T, inp.returns_B_T)  # [B, T] each
        loss = mse_value_loss(values_B_T, returns_B_T, mask_B_T)  # [] 0.5 * (V - R)^2
        return LossOutput(loss, critic_metrics(loss, values_B_T, returns_B_T, mask_B_T))
