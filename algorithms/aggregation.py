"""Loss aggregation: how per-token losses become one scalar. One function, named modes.

- `token-mean`: every token in the batch weighs the same (DAPO, TRL's `bnpo`/`dapo`).
- `seq-mean-token-mean`: mean over each sequence's tokens, then over sequences (original
  GRPO, TRL's `grpo`); long sequences' tokens weigh less.
- `seq-mean-token-sum-norm`: sum over all tokens divided by B * a fixed length (Dr.GRPO,
  TRL's `dr_grpo`); removes the length bias of the per-sequence mean.
"""

from __future__ import annotations

import torch

AGGREGATION_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def check_aggregation(mode: str) -> None:
    """Raise ValueError naming the valid modes unless `mode` is one (for plugin configs'
    `__post_init__`, so a bad `--set algo.aggregation=...` is a one-line error)."""
    if mode not in AGGREGATION_MODES:
        raise ValueError(f"unknown aggregation {mode!r}; valid: {', '.join(AGGREGATION_MODES)}")


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of `x` over positions where `mask` is 1 (0 when the mask is empty)."""
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def aggregate(
    loss_B_T: torch.Tensor, mask_B_T: torch.Tensor, mode: str, norm_length: int | None = None
) -> torch.Tensor:
    """Reduce a per-token loss to a scalar with the named aggregation mode.

    `norm_length` is the fixed length of `seq-mean-token-sum-norm` (defaults to T).
    """
    if mode == "token-mean":
        return masked_mean(loss_B_T, mask_B_T)
    if mode == "seq-mean-token-mean":
        per_seq_B = (loss_B_T * mask_B_T).sum(-1) / mask_B_T.sum(-1).clamp(min=1.0)  # [B]
        return per_seq_B.mean()
    if mode == "seq-mean-token-sum-norm":
        length = norm_length if norm_length is not None else loss_B_T.shape[-1]
        return (loss_B_T * mask_B_T).sum() / (loss_B_T.shape[0] * length)
    raise ValueError(f"unknown aggregation mode {mode!r}; valid modes: {', '.join(AGGREGATION_MODES)}")
