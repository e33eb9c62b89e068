"""Per-token loss terms shared by the algorithm plugins, so no plugin repeats another's math.

Everything here is plain torch on `[B, T]` tensors (shape suffixes as in `algorithms.base`);
masks are float 0/1 and only positions where the mask is 1 ever contribute. Losses are
returned per token (`_B_T`) so that each plugin picks its own aggregation mode
(`algorithms.aggregation.aggregate`); metric helpers return python floats.

- input hygiene: `select_tokens` (zero everything outside the mask), `require`
- the paper's DIS bands: `DIS_BAND_MATH`, `DIS_BAND_CODING` (the one home of these numbers)
- importance ratios: `log_ratio`, `ratio`, `sequence_ratio`
- policy terms: `dis_coefficient`, `dis_token_loss` (SAO's DIS), `ppo_clip_token_loss`,
  `k3_kl`
- critic terms: `mse_value_loss`, `clipped_value_loss`, `explained_variance`
- metric dicts: `policy_metrics`, `critic_metrics`, `advantage_metrics`
- whole policy losses (per-token term, aggregation and metrics), so plugins that share an
  objective share its code: `dis_policy_loss` (sao, running-mean, grpo with DIS) and
  `clipped_policy_loss` (ppo, grpo, dapo, dr-grpo, gspo, rloo)

One name per knob: `dis_eps_low`/`dis_eps_high` is always the DIS band (tokens with r outside
(1 - dis_eps_low, 1 + dis_eps_high) are dropped), `clip_eps_low`/`clip_eps_high` always PPO's
clip range [1 - clip_eps_low, 1 + clip_eps_high]. The names before plugin API 2 (`eps_low`,
`eps_high` for both) are still accepted as keywords, with one warning.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from algorithms.aggregation import aggregate, masked_mean
from algorithms.base import LossOutput, PolicyLossInputs
from algorithms.deprecation import renamed_keywords

RATIO_LEVELS = ("token", "sequence-mean", "sequence-sum")
_DIS_NAMES = {"eps_low": "dis_eps_low", "eps_high": "dis_eps_high"}  # plugin API 1 -> 2
_CLIP_NAMES = {"eps_low": "clip_eps_low", "eps_high": "clip_eps_high"}


class DisBand(NamedTuple):
    """A DIS band: tokens whose ratio r is not inside (1 - low, 1 + high) are dropped."""

    low: float
    high: float

    def fields(self) -> dict[str, float]:
        """The band as config fields (`dis_eps_low`, `dis_eps_high`), e.g. for a preset."""
        return {"dis_eps_low": self.low, "dis_eps_high": self.high}


DIS_BAND_MATH = DisBand(0.3, 5.0)
"""The SAO paper's DIS band for math reasoning (sao's default and preset `math`, grpo's DIS
default, running-mean's default)."""
DIS_BAND_CODING = DisBand(0.8, 3.0)
"""The SAO paper's DIS band for coding agents (sao's preset `coding`, grpo's `dis-coding`)."""

# ---- input hygiene ----------------------------------------------------------------------


def select_tokens(mask_B_T: torch.Tensor, *tensors: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
    """Each tensor with every position outside the mask set to 0 (None passes through).

    Plugins call this first so that padding and observation tokens (whatever they hold,
    even inf/NaN) never reach a loss or its gradient."""
    keep_B_T = mask_B_T > 0  # [B, T] bool
    return tuple(
        None if x is None else torch.where(keep_B_T, x, torch.zeros((), dtype=x.dtype, device=x.device))
        for x in tensors
    )


def require(x: torch.Tensor | None, what: str, algo: str) -> torch.Tensor:
    """`x`, or a clear error when the loop did not supply an input the plugin needs."""
    if x is None:
        raise ValueError(f"{algo} needs {what}, but the loop supplied None (check `needs`)")
    return x


# ---- importance ratios ----------------------------------------------------------------


def log_ratio(logp_B_T: torch.Tensor, behaviour_logp_B_T: torch.Tensor) -> torch.Tensor:
    """log r_t = log pi_theta(a_t|s_t) - log mu(a_t|s_t), [B, T]."""
    return logp_B_T - behaviour_logp_B_T


def ratio(logp_B_T: torch.Tensor, behaviour_logp_B_T: torch.Tensor) -> torch.Tensor:
    """r_t = pi_theta(a_t|s_t) / mu(a_t|s_t), [B, T]."""
    return torch.exp(log_ratio(logp_B_T, behaviour_logp_B_T))


def sequence_ratio(
    logp_B_T: torch.Tensor, behaviour_logp_B_T: torch.Tensor, mask_B_T: torch.Tensor, reduce: str = "mean"
) -> torch.Tensor:
    """Sequence-level ratio, [B, 1] (broadcasts over tokens).

    `reduce="mean"`: s_i = exp(mean_t log r_t), GSPO's length-normalised ratio (TRL
    `importance_sampling_level="sequence"`). `reduce="sum"`: s_i = pi(y_i)/mu(y_i) =
    exp(sum_t log r_t), the plain sequence likelihood ratio (TRL's RLOOTrainer).
    """
    lr_B_T = log_ratio(logp_B_T, behaviour_logp_B_T) * mask_B_T  # [B, T]
    if reduce == "mean":
        lr_B = lr_B_T.sum(-1) / mask_B_T.sum(-1).clamp(min=1.0)  # [B]
    elif reduce == "sum":
        lr_B = lr_B_T.sum(-1)  # [B]
    else:
        raise ValueError(f"unknown sequence ratio reduction {reduce!r}; valid: mean, sum")
    return torch.exp(lr_B).unsqueeze(-1)  # [B, 1]


# ---- policy terms -----------------------------------------------------------------------


@renamed_keywords(**_DIS_NAMES)
def dis_coefficient(
    ratio_B_T: torch.Tensor, dis_eps_low: float, dis_eps_high: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """SAO's DIS mask: f(r) = r if (1 - dis_eps_low) < r < (1 + dis_eps_high) else 0 (strict).

    Returns (f_B_T, in_band_B_T); `in_band_B_T` is bool. The gradient of f through r is
    kept in band and is exactly zero out of band (torch.where picks a constant 0 there).
    """
    in_band_B_T = (ratio_B_T > 1.0 - dis_eps_low) & (ratio_B_T < 1.0 + dis_eps_high)  # [B, T] bool
    f_B_T = torch.where(in_band_B_T, ratio_B_T, torch.zeros_like(ratio_B_T))  # [B, T]
    return f_B_T, in_band_B_T


@renamed_keywords(**_DIS_NAMES)
def dis_token_loss(
    logp_B_T: torch.Tensor,
    rollout_logp_B_T: torch.Tensor,
    advantages_B_T: torch.Tensor,
    dis_eps_low: float,
    dis_eps_high: float,
    detach_coefficient: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token DIS loss (SAO eqs. 1-3): the negative of f(r_t) * A_t * log pi_theta(a_t|s_t).

    With `detach_coefficient` the loss is -(sg(f(r) * A) * log pi); in band its gradient is
    -A * r * grad log pi = -A * grad r, PPO's unclipped gradient, and out of band it is 0
    whatever the sign of A. Without it f(r) is differentiated too (the literal product
    rule: an extra -A * r * log pi * grad log pi term in band).
    Returns (loss_B_T, ratio_B_T, in_band_B_T).
    """
    r_B_T = ratio(logp_B_T, rollout_logp_B_T)  # [B, T] r_t vs the rollout engine
    f_B_T, in_band_B_T = dis_coefficient(r_B_T, dis_eps_low, dis_eps_high)  # [B, T], [B, T] bool
    coef_B_T = f_B_T * advantages_B_T  # [B, T] f(r_t) * A_t
    if detach_coefficient:
        coef_B_T = coef_B_T.detach()
    loss_B_T = -coef_B_T * logp_B_T  # [B, T]
    return loss_B_T, r_B_T, in_band_B_T


@renamed_keywords(**_CLIP_NAMES)
def ppo_clip_token_loss(
    ratio_B_T: torch.Tensor, advantages_B_T: torch.Tensor, clip_eps_low: float, clip_eps_high: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate per token: -min(r * A, clip(r, 1 - clip_eps_low, 1 + clip_eps_high) * A).

    `ratio_B_T` may be [B, 1] (sequence-level ratios); the result broadcasts with the
    advantages. Returns (loss, clipped) where `clipped` (bool) marks the two cases whose
    gradient is cut: (A > 0, r > 1 + clip_eps_high) and (A < 0, r < 1 - clip_eps_low).
    """
    clipped_ratio = torch.clamp(ratio_B_T, 1.0 - clip_eps_low, 1.0 + clip_eps_high)  # [B, T]
    loss = -torch.min(ratio_B_T * advantages_B_T, clipped_ratio * advantages_B_T)  # [B, T]
    clipped = ((ratio_B_T > 1.0 + clip_eps_high) & (advantages_B_T > 0)) | (
        (ratio_B_T < 1.0 - clip_eps_low) & (advantages_B_T < 0)
    )  # [B, T] bool
    return loss, clipped


def k3_kl(logp_B_T: torch.Tensor, ref_logp_B_T: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || ref) on samples from pi, per token (as TRL GRPO):
    exp(ref - logp) - (ref - logp) - 1 >= 0, [B, T]."""
    d_B_T = ref_logp_B_T - logp_B_T  # [B, T]
    return torch.exp(d_B_T) - d_B_T - 1.0


# ---- critic terms ------------------------------------------------------------------------


def mse_value_loss(
    values_B_T: torch.Tensor, returns_B_T: torch.Tensor, mask_B_T: torch.Tensor
) -> torch.Tensor:
    """0.5 * (V - R)^2, masked mean over the batch, []."""
    return masked_mean(0.5 * (values_B_T - returns_B_T) ** 2, mask_B_T)


def clipped_value_loss(
    values_B_T: torch.Tensor,
    old_values_B_T: torch.Tensor,
    returns_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
    clip: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped value loss: 0.5 * max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2),
    masked mean. Returns (loss [], clipped_B_T bool: where the clipped branch is larger)."""
    v_clipped_B_T = old_values_B_T + torch.clamp(values_B_T - old_values_B_T, -clip, clip)  # [B, T]
    unclipped_B_T = (values_B_T - returns_B_T) ** 2  # [B, T]
    clipped_sq_B_T = (v_clipped_B_T - returns_B_T) ** 2  # [B, T]
    loss = masked_mean(0.5 * torch.max(unclipped_B_T, clipped_sq_B_T), mask_B_T)  # []
    return loss, clipped_sq_B_T > unclipped_B_T


def explained_variance(values_B_T: torch.Tensor, returns_B_T: torch.Tensor, mask_B_T: torch.Tensor) -> float:
    """1 - Var(R - V) / Var(R) over masked positions (NaN when Var(R) is ~0, as CleanRL:
    a batch whose returns are all equal says nothing about the critic)."""
    v, r, m = values_B_T.detach(), returns_B_T.detach(), mask_B_T.detach()
    var_r = masked_mean((r - masked_mean(r, m)) ** 2, m)
    if var_r.item() < 1e-10:
        return float("nan")
    err = r - v
    var_err = masked_mean((err - masked_mean(err, m)) ** 2, m)
    return float(1.0 - var_err / var_r)


# ---- metric dicts ------------------------------------------------------------------------


def _frac(flag: torch.Tensor, mask_B_T: torch.Tensor) -> float:
    """Masked fraction of True entries (flag broadcastable to the mask)."""
    return masked_mean(flag.float().expand_as(mask_B_T), mask_B_T).item()


def policy_metrics(
    loss: torch.Tensor,
    logp_B_T: torch.Tensor,
    behaviour_logp_B_T: torch.Tensor,
    ratio_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
    entropy_B_T: torch.Tensor | None = None,
    clipped: torch.Tensor | None = None,
    masked: torch.Tensor | None = None,
) -> dict[str, float]:
    """The standard policy metric dict.

    `policy/approx_kl` is k3 with the importance reference as sampler: the masked mean of
    (r - 1) - log r, r = pi_theta / behaviour (CleanRL's approx_kl). `clipped` -> PPO-style
    `policy/clip_frac`; `masked` -> DIS's `policy/masked_frac` (fraction of action tokens
    outside the band, the paper's "clip ratio").
    """
    logp, beh = logp_B_T.detach(), behaviour_logp_B_T.detach()
    out = {
        "loss/policy": loss.detach().item(),
        "policy/approx_kl": masked_mean(k3_kl(beh, logp), mask_B_T).item(),
        "policy/ratio_mean": masked_mean(ratio_B_T.detach().expand_as(mask_B_T), mask_B_T).item(),
    }
    if clipped is not None:
        out["policy/clip_frac"] = _frac(clipped, mask_B_T)
    if masked is not None:
        out["policy/masked_frac"] = _frac(masked, mask_B_T)
    if entropy_B_T is not None:
        (entropy_B_T,) = select_tokens(mask_B_T, entropy_B_T.detach())
        out["policy/entropy"] = masked_mean(entropy_B_T, mask_B_T).item()
    return out


def critic_metrics(
    loss: torch.Tensor, values_B_T: torch.Tensor, returns_B_T: torch.Tensor, mask_B_T: torch.Tensor
) -> dict[str, float]:
    """value/loss (also logged as loss/value), value/explained_variance, value/mean."""
    value = loss.detach().item()
    return {
        "loss/value": value,
        "value/loss": value,
        "value/explained_variance": explained_variance(values_B_T, returns_B_T, mask_B_T),
        "value/mean": masked_mean(values_B_T.detach(), mask_B_T).item(),
    }


def advantage_metrics(advantages_B_T: torch.Tensor, mask_B_T: torch.Tensor) -> dict[str, float]:
    """adv/mean and adv/std (population) over the masked positions."""
    a = advantages_B_T.detach()
    mean = masked_mean(a, mask_B_T)
    std = masked_mean((a - mean) ** 2, mask_B_T).sqrt()
    return {"adv/mean": mean.item(), "adv/std": std.item()}


# ---- whole policy losses ---------------------------------------------------------------


@renamed_keywords(**_DIS_NAMES)
def dis_policy_loss(
    inp: PolicyLossInputs,
    *,
    dis_eps_low: float,
    dis_eps_high: float,
    aggregation: str,
    detach_coefficient: bool = True,
) -> LossOutput:
    """SAO's DIS policy loss, aggregated: agg_t[ -sg(f(r_t) * A_t) * log pi_theta(a_t|s_t) ],
    r_t against the rollout engine's log-probs (`inp.rollout_logp_B_T`), with its metrics."""
    mask_B_T = inp.action_mask_B_T  # [B, T]
    logp_B_T, rollout_B_T, adv_B_T = select_tokens(
        mask_B_T, inp.logp_B_T, inp.rollout_logp_B_T, inp.advantages_B_T
    )
    loss_B_T, r_B_T, in_band_B_T = dis_token_loss(
        logp_B_T, rollout_B_T, adv_B_T, dis_eps_low, dis_eps_high, detach_coefficient
    )  # [B, T], [B, T], [B, T] bool
    loss = aggregate(loss_B_T, mask_B_T, aggregation)  # []
    metrics = policy_metrics(
        loss, logp_B_T, rollout_B_T, r_B_T, mask_B_T, inp.entropy_B_T, masked=~in_band_B_T
    )
    return LossOutput(loss, metrics)


@renamed_keywords(**_CLIP_NAMES)
def clipped_policy_loss(
    inp: PolicyLossInputs,
    algo: str,
    *,
    clip_eps_low: float,
    clip_eps_high: float,
    aggregation: str,
    norm_length: int | None = None,
    ratio_level: str = "token",
) -> LossOutput:
    """PPO's clipped surrogate against the old policy (`inp.old_logp_B_T`, which plugin `algo`
    must declare in `needs`), aggregated:
    agg_t[ -min(r A_t, clip(r, 1 - clip_eps_low, 1 + clip_eps_high) A_t) ],
    with its metrics.

    `ratio_level`: "token" r_t = pi/pi_old per token (PPO, GRPO, DAPO); "sequence-mean"
    s_i = exp(mean_t log r_t) on every token of sequence i (GSPO); "sequence-sum"
    s_i = exp(sum_t log r_t) (TRL's RLOOTrainer).
    """
    mask_B_T = inp.action_mask_B_T  # [B, T]
    old_logp_B_T = require(inp.old_logp_B_T, "old-policy log-probs (old_logp)", algo)  # [B, T]
    logp_B_T, old_B_T, adv_B_T = select_tokens(mask_B_T, inp.logp_B_T, old_logp_B_T, inp.advantages_B_T)
    if ratio_level == "token":
        r = ratio(logp_B_T, old_B_T)  # [B, T]
    elif ratio_level in ("sequence-mean", "sequence-sum"):
        r = sequence_ratio(logp_B_T, old_B_T, mask_B_T, reduce=ratio_level.split("-")[1])  # [B, 1]
    else:
        raise ValueError(f"unknown ratio level {ratio_level!r}; valid: {', '.join(RATIO_LEVELS)}")
    loss_B_T, clipped_B_T = ppo_clip_token_loss(
        r, adv_B_T, clip_eps_low, clip_eps_high
    )  # [B, T], [B, T] bool
    loss = aggregate(loss_B_T, mask_B_T, aggregation, norm_length)  # []
    metrics = policy_metrics(loss, logp_B_T, old_B_T, r, mask_B_T, inp.entropy_B_T, clipped=clipped_B_T)
    return LossOutput(loss, metrics)
