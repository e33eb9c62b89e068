"""GRPO: group-relative advantages with the PPO clipped surrogate (and the paper's GRPO+DIS).

Paper: Shao et al., "DeepSeekMath" (arXiv 2402.03300), eq. 3; the SAO paper (arXiv
2607.07508) uses it as its main baseline ("vanilla GRPO", clip-higher) and as GRPO + DIS.
G rollouts per prompt; A_i = (r_i - mean(r)) / (std(r) + eps) on every action token;

    r_t = pi_theta(a_t|s_t) / pi_old(a_t|s_t)
    L = -(1/G) sum_i (1/|y_i|) sum_t [ min(r_t A_i, clip(r_t, 1-clip_eps_low, 1+clip_eps_high) A_i)
                                        - beta * KL_k3(pi_theta || pi_ref)_t ]

Choices where the papers are silent, and deviations:
1. The std is unbiased and eps = 1e-4, as TRL's GRPOTrainer (`scale_rewards="group"`);
   a group whose rewards are all equal gets advantage 0.
2. Observation tokens of agent trajectories get advantage 0 and no loss.
3. `importance="ppo-clip"` (default): ratio against the OLD policy (the learner before
   this update, one no-grad forward pass), clip 0.2/0.2. The SAO paper's vanilla GRPO is
   "clip-higher" without a value: preset `clip-higher` uses DAPO's clip_eps_high = 0.28.
4. `importance="dis"` is the paper's GRPO + DIS baseline: the ratio is taken against the
   ROLLOUT log-probs and tokens outside (1 - dis_eps_low, 1 + dis_eps_high) are dropped
   (defaults 0.3/5.0, SAO's math band `DIS_BAND_MATH`; preset `dis-coding`: the coding band
   0.8/3.0), with the detached coefficient of `sao`; `clip_eps_low`/`clip_eps_high` are then
   unused and no old-policy pass is needed.
5. Aggregation `seq-mean-token-mean` as original GRPO and TRL `loss_type="grpo"`.
6. beta = 0 by default (TRL's default); beta > 0 adds beta * k3 per token before
   aggregation, with no importance correction of the KL term (TRL's default).
7. No entropy bonus. group_size 8 (the paper: 16 prompts x 8 rollouts).
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.advantages import broadcast_to_tokens, group_zscore
from algorithms.aggregation import AGGREGATION_MODES, aggregate, check_aggregation, masked_mean
from algorithms.base import (
    ActsWhen,
    AdvantageResult,
    Algorithm,
    LossOutput,
    PolicyLossInputs,
    Trajectories,
    doc,
)
from algorithms.objectives import (
    DIS_BAND_CODING,
    DIS_BAND_MATH,
    advantage_metrics,
    clipped_policy_loss,
    dis_policy_loss,
    k3_kl,
    require,
    select_tokens,
)

IMPORTANCE_MODES = ("ppo-clip", "dis")

PPO_CLIP_ACTS = ActsWhen(
    lambda c, run: c.importance == "ppo-clip" and run.updates_per_batch > 1,
    "acts only with importance='ppo-clip' and more than one policy update per batch (minibatches > 1): "
    "with one, the ratio to the old policy is exactly 1 and the clip never binds",
)
DIS_ACTS = ActsWhen(lambda c, run: c.importance == "dis", "acts only with importance='dis'")


@dataclass(frozen=True)
class Config:
    group_size: int = doc("rollouts per prompt (G)", default=8)
    importance: str = doc(
        "'ppo-clip': clip vs the old policy; 'dis': SAO's DIS vs rollout log-probs", default="ppo-clip"
    )
    clip_eps_low: float = doc(
        "PPO clip: lower bound 1 - clip_eps_low (importance='ppo-clip' only)",
        default=0.2,
        acts_when=PPO_CLIP_ACTS,
    )
    clip_eps_high: float = doc(
        "PPO clip: upper bound 1 + clip_eps_high; 0.28 = clip-higher (ppo-clip only)",
        default=0.2,
        acts_when=PPO_CLIP_ACTS,
    )
    dis_eps_low: float = doc(
        "DIS band: drop tokens with r <= 1 - dis_eps_low (importance='dis' only)",
        default=DIS_BAND_MATH.low,
        acts_when=DIS_ACTS,
    )
    dis_eps_high: float = doc(
        "DIS band: drop tokens with r >= 1 + dis_eps_high (importance='dis' only)",
        default=DIS_BAND_MATH.high,
        acts_when=DIS_ACTS,
    )
    beta: float = doc("weight of the k3 KL to the reference policy (0 = no reference pass)", default=0.0)
    aggregation: str = doc(
        f"loss aggregation mode, one of {AGGREGATION_MODES}", default="seq-mean-token-mean"
    )

    def __post_init__(self) -> None:
        if self.importance not in IMPORTANCE_MODES:
            raise ValueError(f"unknown importance {self.importance!r}; valid: {', '.join(IMPORTANCE_MODES)}")
        check_aggregation(self.aggregation)
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 for group-relative advantages, got {self.group_size}")


class GRPO(Algorithm):
    name = "grpo"
    summary = "group z-score advantages + PPO clip vs old policy (or DIS vs rollout: preset 'dis')"
    paper = 'Shao et al., "DeepSeekMath", arXiv 2402.03300, eq. 3 (GRPO+DIS: arXiv 2607.07508)'
    Config = Config
    presets = {
        "clip-higher": {"clip_eps_high": 0.28},  # the paper's vanilla GRPO baseline
        "dis": {"importance": "dis"},  # the paper's GRPO + DIS baseline
        "dis-coding": {"importance": "dis", **DIS_BAND_CODING.fields()},  # GRPO + DIS, coding band
    }
    renamed_fields = {"algo.eps_low": "algo.clip_eps_low", "algo.eps_high": "algo.clip_eps_high"}

    @property
    def needs(self) -> frozenset[str]:
        needs = {"old_logp"} if self.config.importance == "ppo-clip" else set()
        if self.config.beta > 0:
            needs.add("ref_logp")
        return frozenset(needs)

    def advantages(self, traj: Trajectories) -> AdvantageResult:
        adv_B = group_zscore(traj.rewards_B, self.group_size)  # [B] (r - mean_G) / (std_G + 1e-4)
        adv_B_T = broadcast_to_tokens(adv_B, traj.action_mask_B_T)  # [B, T]
        return AdvantageResult(adv_B_T, None, advantage_metrics(adv_B_T, traj.action_mask_B_T))

    def policy_loss(self, inp: PolicyLossInputs) -> LossOutput:
        c = self.config
        mask_B_T = inp.action_mask_B_T  # [B, T]
        if c.importance == "dis":
            # agg_t[ -sg(f(r_t) * A_i) * log pi_theta ],  r_t = pi_theta / pi_rollout
            out = dis_policy_loss(
                inp, dis_eps_low=c.dis_eps_low, dis_eps_high=c.dis_eps_high, aggregation=c.aggregation
            )
        else:
            # agg_t -min(r_t A_i, clip(r_t, 1 - clip_eps_low, 1 + clip_eps_high) A_i),  r_t = pi_theta / pi_old
            out = clipped_policy_loss(
                inp,
                self.name,
                clip_eps_low=c.clip_eps_low,
                clip_eps_high=c.clip_eps_high,
                aggregation=c.aggregation,
            )
        if c.beta > 0:
            # + beta * agg_t KL_k3(pi_theta || pi_ref)_t (aggregation is linear: same as adding per token)
            ref_B_T = require(inp.ref_logp_B_T, "reference log-probs (ref_logp)", self.name)  # [B, T]
            logp_B_T, ref_B_T = select_tokens(mask_B_T, inp.logp_B_T, ref_B_T)  # [B, T] each
            kl_B_T = k3_kl(logp_B_T, ref_B_T)  # [B, T]
            out.loss = out.loss + c.beta * aggregate(kl_B_T, mask_B_T, c.aggregation)  # []
            out.metrics["loss/policy"] = out.loss.detach().item()
            out.metrics["policy/ref_kl"] = masked_mean(kl_B_T.detach(), mask_B_T).item()
        return out
