"""Running mean: single rollout, a running-mean reward baseline and SAO's DIS objective.

The SAO paper's (arXiv 2607.07508) critic-free ablation: one rollout per prompt, the
baseline is the mean of the last 8 rewards of the same prompt (the 128 most recent
rewards overall in the online-learning task), and the policy loss is DIS (eqs. 1-3):

    A_i = R_i - mean(last `window` rewards of prompt_i)   on every action token of y_i
    L = -mean_t sg(f(r_t) * A_i) * log pi_theta(a_t|s_t),  f as in `sao`

Choices where the paper is silent, and deviations:
1. The baseline uses only rewards recorded BEFORE the current batch; the batch's rewards
   are recorded after its advantages are computed (so calling `advantages` twice on one
   batch records it twice).
2. A prompt seen for the first time is baselined by the recent global mean (0.0 when the
   history is empty); see `algorithms.advantages.RunningMeanBaseline`.
3. The same advantage on every action token; observation tokens get 0.
4. DIS exactly as `sao` (shared `objectives.dis_token_loss`): the math band
   (`DIS_BAND_MATH`, 0.3/5.0), coefficient detached, token-mean aggregation; no KL, no
   entropy term, no advantage normalisation.
5. The reward history is algorithm state: saved by `state_dict` with checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from algorithms.advantages import RUNNING_MEAN_SCOPES, RunningMeanBaseline, broadcast_to_tokens
from algorithms.aggregation import AGGREGATION_MODES, check_aggregation
from algorithms.base import AdvantageResult, Algorithm, LossOutput, PolicyLossInputs, Trajectories, doc
from algorithms.objectives import DIS_BAND_MATH, advantage_metrics, dis_policy_loss


@dataclass(frozen=True)
class Config:
    window: int = doc("rewards kept per baseline (paper: 8 per prompt; 128 global online)", default=8)
    scope: str = doc(
        f"baseline history per 'prompt' or 'global', one of {RUNNING_MEAN_SCOPES}", default="prompt"
    )
    dis_eps_low: float = doc(
        "DIS band: tokens with r <= 1 - dis_eps_low are dropped", default=DIS_BAND_MATH.low
    )
    dis_eps_high: float = doc(
        "DIS band: tokens with r >= 1 + dis_eps_high are dropped", default=DIS_BAND_MATH.high
    )
    detach_coefficient: bool = doc(
        "stop the gradient through f(r)*A (in-band gradient = A * grad r)", default=True
    )
    aggregation: str = doc(f"loss aggregation mode, one of {AGGREGATION_MODES}", default="token-mean")

    def __post_init__(self) -> None:
        check_aggregation(self.aggregation)
        if self.scope not in RUNNING_MEAN_SCOPES:
            raise ValueError(f"unknown scope {self.scope!r}; valid: {', '.join(RUNNING_MEAN_SCOPES)}")


class RunningMean(Algorithm):
    name = "running-mean"
    summary = "single rollout, running-mean reward baseline (no critic), DIS objective"
    paper = 'the critic-free ablation of Hou et al., "Single-Rollout Asynchronous Optimization for Agentic Reinforcement Learning", arXiv 2607.07508'
    Config = Config
    presets = {"online": {"scope": "global", "window": 128}}
    needs = frozenset()
    renamed_fields = {"algo.eps_low": "algo.dis_eps_low", "algo.eps_high": "algo.dis_eps_high"}

    def __init__(self, config: Config | None = None) -> None:
        super().__init__(config)
        self.baseline = RunningMeanBaseline(window=self.config.window, scope=self.config.scope)

    def advantages(self, traj: Trajectories) -> AdvantageResult:
        adv_B = self.baseline.advantages(traj.prompt_keys, traj.rewards_B)  # [B] R - running mean
        adv_B_T = broadcast_to_tokens(adv_B, traj.action_mask_B_T)  # [B, T]
        return AdvantageResult(adv_B_T, None, advantage_metrics(adv_B_T, traj.action_mask_B_T))

    def policy_loss(self, inp: PolicyLossInputs) -> LossOutput:
        c = self.config
        # agg_t[ -sg(f(r_t) * A_i) * log pi_theta(a_t|s_t) ],  r_t = pi_theta / pi_rollout
        return dis_policy_loss(
            inp,
            dis_eps_low=c.dis_eps_low,
            dis_eps_high=c.dis_eps_high,
            aggregation=c.aggregation,
            detach_coefficient=c.detach_coefficient,
        )  # loss [], metrics

    def state_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.baseline.load_state_dict(state.get("baseline", {}))
