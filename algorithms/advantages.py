"""Shared advantage math for every algorithm plugin (leaf module: torch and stdlib only).

Shape suffixes follow `algorithms.base`: `_B` one entry per trajectory, `_T` one per
response token; groups are contiguous blocks of `group_size` trajectories.

- Group baselines: `group_zscore` (GRPO, TRL's `scale_rewards="group"`), `group_center`
  (Dr.GRPO), `batch_zscore`, `leave_one_out` (RLOO).
- Token placement: `broadcast_to_tokens` (one value on every masked token) and
  `outcome_rewards_to_tokens` (the outcome reward on the last masked token, for GAE).
- Critic advantages: `gae`, which runs the recursion only over masked positions, linking
  each to the next masked position of its row. With a contiguous mask this is ordinary
  token-level GAE; with an agent trajectory's action mask it is SAO's skip-observation GAE.
  `length_adaptive_lambda` gives VAPO's per-sequence policy lambda. `step_level_gae` (with
  `action_steps`) is the step-level variant of SAO's App. A.1 ablation: one value per step.
- `masked_whiten`: normalisation over masked positions.
- `RunningMeanBaseline`: the paper's single-rollout running-mean ablation baseline.

Degenerate cases are defined rather than NaN: a z-score over a single element (group size
1, or a batch of 1) has std 0, so its advantage is 0.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import torch
from torch import Tensor

RUNNING_MEAN_SCOPES = ("prompt", "global")


def _float(x: Tensor) -> Tensor:
    """`x` as a floating tensor (integer/bool inputs become the default float dtype)."""
    return x if x.is_floating_point() else x.to(torch.get_default_dtype())


def _grouped(rewards_B: Tensor, group_size: int) -> Tensor:
    """View a [B] reward vector as [B // group_size, group_size], checking the shapes."""
    if rewards_B.dim() != 1:
        raise ValueError(f"rewards_B must be 1-D, got shape {tuple(rewards_B.shape)}")
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if rewards_B.numel() % group_size != 0:
        raise ValueError(f"batch of {rewards_B.numel()} is not a whole number of groups of {group_size}")
    return _float(rewards_B).reshape(-1, group_size)  # [N, G]


def _std(x: Tensor, dim: int) -> Tensor:
    """Unbiased std along `dim`; 0 (not NaN) when that dimension has a single element."""
    if x.shape[dim] < 2:
        return torch.zeros_like(x.sum(dim=dim))
    return x.std(dim=dim)


def group_zscore(rewards_B: Tensor, group_size: int, eps: float = 1e-4) -> Tensor:
    """GRPO advantages: (r - group mean) / (group std + eps), one value per trajectory.

    Groups are contiguous blocks of `group_size`. The std is unbiased (torch.std's default),
    as in TRL's GRPOTrainer with `scale_rewards="group"`; a group whose rewards are all equal
    gets 0. With `group_size == 1` every advantage is 0. Returns [B].
    """
    r_N_G = _grouped(rewards_B, group_size)  # [N, G]
    mean_N = r_N_G.mean(dim=1, keepdim=True)  # [N, 1]
    std_N = _std(r_N_G, dim=1).unsqueeze(1)  # [N, 1]
    return ((r_N_G - mean_N) / (std_N + eps)).reshape(-1)  # [B]


def group_center(rewards_B: Tensor, group_size: int) -> Tensor:
    """Dr.GRPO advantages: r - group mean (no std scaling). Returns [B]."""
    r_N_G = _grouped(rewards_B, group_size)  # [N, G]
    return (r_N_G - r_N_G.mean(dim=1, keepdim=True)).reshape(-1)  # [B]


def batch_zscore(rewards_B: Tensor, eps: float = 1e-4) -> Tensor:
    """(r - batch mean) / (batch std + eps), unbiased std; 0 for a batch of one. Returns [B]."""
    r_1_B = _grouped(rewards_B, max(rewards_B.numel(), 1))  # [1, B]
    mean_1 = r_1_B.mean(dim=1, keepdim=True)  # [1, 1]
    std_1 = _std(r_1_B, dim=1).unsqueeze(1)  # [1, 1]
    return ((r_1_B - mean_1) / (std_1 + eps)).reshape(-1)  # [B]


def leave_one_out(rewards_B: Tensor, group_size: int) -> Tensor:
    """RLOO advantages: r_i - mean of the other G-1 members of its group. Returns [B].

    Raises ValueError when `group_size < 2` (there is no other member to average).
    """
    if group_size < 2:
        raise ValueError(f"leave_one_out needs group_size >= 2, got {group_size}")
    r_N_G = _grouped(rewards_B, group_size)  # [N, G]
    others_N_G = (r_N_G.sum(dim=1, keepdim=True) - r_N_G) / (group_size - 1)  # [N, G]
    return (r_N_G - others_N_G).reshape(-1)  # [B]


def broadcast_to_tokens(values_B: Tensor, mask_B_T: Tensor) -> Tensor:
    """Put each trajectory's value on every token where the mask is 1, 0 elsewhere. [B, T]."""
    return values_B[:, None] * mask_B_T  # [B, T]


def outcome_rewards_to_tokens(rewards_B: Tensor, mask_B_T: Tensor) -> Tensor:
    """Place each outcome reward on the LAST position where the mask is 1, 0 elsewhere.

    A row whose mask is empty is all zeros. The output has the rewards' dtype (the default
    float dtype for integer rewards). Returns [B, T].
    """
    rewards_B = _float(rewards_B)  # [B]
    valid_B_T = mask_B_T > 0  # [B, T]
    T = mask_B_T.shape[-1]
    out_B_T = torch.zeros(mask_B_T.shape, dtype=rewards_B.dtype, device=rewards_B.device)  # [B, T]
    if T == 0:
        return out_B_T
    last_B = T - 1 - valid_B_T.flip(-1).to(torch.uint8).argmax(dim=-1)  # [B] last valid index
    has_B = valid_B_T.any(dim=-1)  # [B]
    vals_B = torch.where(has_B, rewards_B, torch.zeros_like(rewards_B))  # [B]
    out_B_T.scatter_(1, last_B[:, None], vals_B[:, None])  # [B, T]
    return out_B_T


def length_adaptive_lambda(lengths_B: Tensor, alpha: float = 1.5) -> Tensor:
    """VAPO's length-adaptive GAE lambda: 1 - 1/(alpha * l), clamped to [0, 1]; l = 0 -> 0.

    `lengths_B` are response (action) lengths. Use `[:, None]` on the result to pass it to
    `gae` as a per-sequence lambda. Returns [B].
    """
    l_B = _float(lengths_B)  # [B]
    lam_B = 1.0 - 1.0 / (alpha * l_B)  # [B] (-inf at l = 0, replaced below)
    lam_B = torch.where(l_B > 0, lam_B, torch.zeros_like(lam_B))  # [B]
    return lam_B.clamp(0.0, 1.0)  # [B]


def gae(
    rewards_B_T: Tensor,
    values_B_T: Tensor,
    mask_B_T: Tensor,
    gamma: float | Tensor,
    lam: float | Tensor,
    dones_B_T: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation over the masked positions of each row.

    Each position t with mask 1 links to the NEXT position with mask 1 in the same row,
    skipping mask-0 positions: `delta_t = r_t + gamma_t * V(next) - V(t)` and
    `A_t = delta_t + gamma_t * lam_t * A(next)`. After a row's last valid position, and at
    any valid t with `dones_B_T[t] == 1` (an episode boundary), V(next) = A(next) = 0.
    With a contiguous mask this is plain token-level GAE; with an agent trajectory's action
    mask it is SAO's skip-observation GAE (the last token of action i links to the first
    token of action i+1).

    Rewards, values and dones at mask-0 positions are ignored, so rewards must sit on valid
    positions (`outcome_rewards_to_tokens` with the same mask does this). `gamma` and `lam`
    are floats or tensors broadcastable to [B, T] (e.g. a per-sequence [B, 1] lambda); the
    ones at position t are used for the link from t. Computed without gradient in the
    values' dtype. Returns `(advantages_B_T, returns_B_T)`, `returns = advantages + values`
    on valid positions; both are 0 where the mask is 0.
    """
    with torch.no_grad():
        dtype, device = _float(values_B_T).dtype, values_B_T.device
        B, T = mask_B_T.shape
        # Time-major copies so that each step reads one contiguous row.
        v_T_B = values_B_T.detach().to(dtype).t().contiguous()  # [T, B]
        r_T_B = rewards_B_T.detach().to(dtype).t().contiguous()  # [T, B]
        valid_T_B = (mask_B_T > 0).t().contiguous()  # [T, B]
        gamma_B_T = torch.as_tensor(gamma, dtype=dtype, device=device).detach().broadcast_to(B, T)  # [B, T]
        lam_B_T = torch.as_tensor(lam, dtype=dtype, device=device).detach().broadcast_to(B, T)  # [B, T]
        g_T_B = gamma_B_T.t().contiguous()  # [T, B]
        gl_T_B = g_T_B * lam_B_T.t()  # [T, B] gamma * lambda
        if dones_B_T is not None:
            keep_T_B = (dones_B_T <= 0).t().contiguous()  # [T, B] False where the link is cut

        adv_T_B = torch.zeros(T, B, dtype=dtype, device=device)  # [T, B]
        next_v_B = torch.zeros(B, dtype=dtype, device=device)  # [B] V of the next valid position
        next_a_B = torch.zeros(B, dtype=dtype, device=device)  # [B] A of the next valid position
        zero_B = torch.zeros(B, dtype=dtype, device=device)  # [B]
        for t in range(T - 1, -1, -1):
            nv_B, na_B = next_v_B, next_a_B  # [B], [B]
            if dones_B_T is not None:
                nv_B = torch.where(keep_T_B[t], nv_B, zero_B)  # [B]
                na_B = torch.where(keep_T_B[t], na_B, zero_B)  # [B]
            delta_B = r_T_B[t] + g_T_B[t] * nv_B - v_T_B[t]  # [B]
            a_B = delta_B + gl_T_B[t] * na_B  # [B]
            valid_B = valid_T_B[t]  # [B]
            adv_T_B[t] = torch.where(valid_B, a_B, zero_B)  # [B]
            next_v_B = torch.where(valid_B, v_T_B[t], next_v_B)  # [B]
            next_a_B = torch.where(valid_B, a_B, next_a_B)  # [B]

        adv_B_T = adv_T_B.t().contiguous()  # [B, T]
        valid_B_T = valid_T_B.t()  # [B, T]
        ret_B_T = torch.where(valid_B_T, adv_B_T + v_T_B.t(), torch.zeros_like(adv_B_T))  # [B, T]
    return adv_B_T, ret_B_T


STEP_VALUES = ("mean", "last")


def action_steps(mask_B_T: Tensor) -> tuple[Tensor, Tensor]:
    """The agent steps of each row: every maximal run of mask-1 positions is one step (one
    action between two observations). Returns `(step_B_T, n_steps_B)`: the 0-based step index
    of every masked position (-1 elsewhere) and the number of steps per row."""
    valid_B_T = mask_B_T > 0  # [B, T]
    prev_B_T = torch.zeros_like(valid_B_T)  # [B, T] the previous position is valid
    prev_B_T[:, 1:] = valid_B_T[:, :-1]
    starts_B_T = valid_B_T & ~prev_B_T  # [B, T] first token of each step
    step_B_T = torch.where(valid_B_T, starts_B_T.long().cumsum(1) - 1, -1)  # [B, T]
    return step_B_T, starts_B_T.sum(1)  # [B, T], [B]


def step_level_gae(
    rewards_B: Tensor,
    values_B_T: Tensor,
    mask_B_T: Tensor,
    gamma: float | Tensor,
    lam: float | Tensor,
    step_value: str = "mean",
) -> tuple[Tensor, Tensor]:
    """Step-level GAE, the ablation of SAO's App. A.1: one value per agent step instead of one
    per token, the recursion run over steps, and each step's advantage put on all its tokens.

    A step's value is the mean of its tokens' values (`step_value="mean"`) or its last token's
    (`"last"`); the outcome reward sits on the last step. `gamma`/`lam` are floats or [B, 1]
    tensors (per trajectory). Computed without gradient. Returns `(advantages_B_T,
    returns_B_T)` on the action tokens, 0 elsewhere; a row with no action token gets 0.
    """
    if step_value not in STEP_VALUES:
        raise ValueError(f"unknown step_value {step_value!r}; valid: {', '.join(STEP_VALUES)}")
    with torch.no_grad():
        dtype = _float(values_B_T).dtype
        B = mask_B_T.shape[0]
        valid_B_T = mask_B_T > 0  # [B, T]
        step_B_T, n_steps_B = action_steps(mask_B_T)  # [B, T], [B]
        S = max(int(n_steps_B.max()) if B else 0, 1)
        index_B_T = step_B_T.clamp(min=0)  # [B, T] (non-action positions add 0 to step 0)
        v_B_T = values_B_T.detach().to(dtype)  # [B, T]
        if step_value == "mean":
            kept_B_T = valid_B_T
        else:  # the last token of each step: valid and followed by an invalid position (or the end)
            next_B_T = torch.zeros_like(valid_B_T)  # [B, T]
            next_B_T[:, :-1] = valid_B_T[:, 1:]
            kept_B_T = valid_B_T & ~next_B_T  # [B, T]
        zeros_B_S = torch.zeros(B, S, dtype=dtype, device=mask_B_T.device)  # [B, S]
        sums_B_S = zeros_B_S.scatter_add(1, index_B_T, torch.where(kept_B_T, v_B_T, 0.0))  # [B, S]
        counts_B_S = zeros_B_S.scatter_add(1, index_B_T, kept_B_T.to(dtype))  # [B, S]
        v_B_S = sums_B_S / counts_B_S.clamp(min=1)  # [B, S]
        step_mask_B_S = torch.arange(S, device=mask_B_T.device)[None, :] < n_steps_B[:, None]  # [B, S]
        r_B_S = outcome_rewards_to_tokens(rewards_B, step_mask_B_S).to(dtype)  # [B, S] r on the last step
        adv_B_S, ret_B_S = gae(r_B_S, v_B_S, step_mask_B_S, gamma, lam)  # [B, S] each
        adv_B_T = torch.where(valid_B_T, adv_B_S.gather(1, index_B_T), 0.0)  # [B, T]
        ret_B_T = torch.where(valid_B_T, ret_B_S.gather(1, index_B_T), 0.0)  # [B, T]
    return adv_B_T, ret_B_T


def masked_whiten(x_B_T: Tensor, mask_B_T: Tensor, eps: float = 1e-8, shift_mean: bool = True) -> Tensor:
    """Normalise `x` with the mean and variance of its masked positions: (x - mean) / sqrt(var + eps).

    As in TRL/verl, the variance is unbiased (Bessel-corrected; a plain 0 with a single
    masked element) and `shift_mean=False` adds the mean back. Unlike them, positions where
    the mask is 0 are set to 0 (advantages are zero outside action tokens); an empty mask
    gives all zeros. Returns [B, T].
    """
    valid_B_T = mask_B_T > 0  # [B, T]
    x_B_T = _float(x_B_T)  # [B, T]
    xm_B_T = torch.where(valid_B_T, x_B_T, torch.zeros_like(x_B_T))  # [B, T] padding may hold NaN
    n = valid_B_T.sum()  # [] number of masked elements
    mean = xm_B_T.sum() / n.clamp(min=1)  # []
    centered_B_T = torch.where(valid_B_T, x_B_T - mean, torch.zeros_like(x_B_T))  # [B, T]
    var = (centered_B_T**2).sum() / (n - 1).clamp(min=1)  # [] unbiased
    out_B_T = centered_B_T * torch.rsqrt(var + eps)  # [B, T]
    if not shift_mean:
        out_B_T = out_B_T + mean  # [B, T]
    return torch.where(valid_B_T, out_B_T, torch.zeros_like(out_B_T))  # [B, T]


class RunningMeanBaseline:
    """The paper's single-rollout ablation baseline: advantage = r - mean of recent rewards.

    `scope="prompt"`: the baseline is the mean of the last `window` rewards of the same
    prompt (paper: window 8). `scope="global"`: the mean of the last `window` rewards overall
    (the paper's online task: window 128).

    `advantages` uses only history from BEFORE the batch (a trajectory never baselines
    against itself, nor against other members of its own batch), then records the batch.
    Choice (unspecified by the paper): with `scope="prompt"`, a prompt seen for the first
    time uses the mean of the last `window` rewards overall if there are any, else 0.0;
    with `scope="global"` an empty history also gives 0.0.
    """

    def __init__(self, window: int = 8, scope: str = "prompt") -> None:
        """Keep the last `window` rewards per prompt (`scope="prompt"`) or overall (`"global"`)."""
        if scope not in RUNNING_MEAN_SCOPES:
            raise ValueError(f"unknown scope {scope!r}; valid scopes: {', '.join(RUNNING_MEAN_SCOPES)}")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = int(window)
        self.scope = scope
        self._global: deque[float] = deque(maxlen=self.window)
        self._per_prompt: dict[str, deque[float]] = {}

    def _global_mean(self) -> float:
        return sum(self._global) / len(self._global) if self._global else 0.0

    def baseline(self, prompt_key: str) -> float:
        """The baseline the next trajectory of `prompt_key` would get (no recording)."""
        if self.scope == "prompt":
            hist = self._per_prompt.get(prompt_key)
            if hist:
                return sum(hist) / len(hist)
        return self._global_mean()

    def advantages(self, prompt_keys: list[str], rewards_B: Tensor) -> Tensor:
        """r - baseline for each trajectory (history before this batch), then record the
        batch's rewards in order. Returns [B] in the rewards' (float) dtype."""
        rewards_B = _float(rewards_B).detach()  # [B]
        if rewards_B.dim() != 1 or len(prompt_keys) != rewards_B.numel():
            raise ValueError(
                f"need one prompt key per reward: {len(prompt_keys)} keys, rewards shape {tuple(rewards_B.shape)}"
            )
        base = [self.baseline(k) for k in prompt_keys]
        base_B = torch.tensor(base, dtype=rewards_B.dtype, device=rewards_B.device)  # [B]
        for key, r in zip(prompt_keys, rewards_B.tolist()):
            self._global.append(float(r))
            if self.scope == "prompt":
                self._per_prompt.setdefault(key, deque(maxlen=self.window)).append(float(r))
        return rewards_B - base_B  # [B]

    def state_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable state: settings and reward histories."""
        return {
            "window": self.window,
            "scope": self.scope,
            "global": list(self._global),
            "per_prompt": {k: list(v) for k, v in self._per_prompt.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the histories saved by `state_dict`. This instance keeps its own window
        and scope; longer saved histories keep only their most recent `window` rewards."""
        self._global = deque((float(r) for r in state.get("global", [])), maxlen=self.window)
        self._per_prompt = {
            str(k): deque((float(r) for r in v), maxlen=self.window)
            for k, v in state.get("per_prompt", {}).items()
        }
