"""Checks of what a plugin returns, run by the learner on every call and by `bench algos --check`.

A result of the wrong type or shape is a `PluginOutputError` whose one line names the plugin,
the method and the fix, instead of a failure deep inside the learner. Non-finite values are
not errors here: the learner skips and counts a step whose loss is not finite (`nan_patience`),
so these functions return a description of them, which the learner reports with the skip.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from algorithms.base import AdvantageResult, LossOutput, Trajectories
from algorithms.registry import RegistryError


class PluginOutputError(RegistryError):
    """A plugin method returned something the loop cannot use (wrong type or shape); a
    RegistryError, so the command line prints it as one line (exit 2)."""


def plugin_label(algo: Any) -> str:
    """`algorithm 'sao' (algorithms.sao.SAO)`: how messages name a plugin."""
    cls = type(algo)
    return f"algorithm {getattr(algo, 'name', cls.__name__)!r} ({cls.__module__}.{cls.__qualname__})"


def _fail(algo: Any, method: str, what: str) -> PluginOutputError:
    return PluginOutputError(f"{plugin_label(algo)}: {method}() {what}")


def _check_tensor(algo: Any, method: str, name: str, x: Any, shape: tuple[int, ...]) -> None:
    """`x` is a floating tensor of `shape`, or a PluginOutputError naming `method` and `name`."""
    if not isinstance(x, torch.Tensor):
        raise _fail(algo, method, f"returned {name} of type {type(x).__name__}; it must be a torch.Tensor")
    if tuple(x.shape) != shape:
        raise _fail(
            algo,
            method,
            f"returned {name} of shape {list(x.shape)}; it must be {list(shape)} ([B, T], like the "
            "action mask)",
        )
    if not x.is_floating_point():
        raise _fail(algo, method, f"returned {name} of dtype {x.dtype}; it must be a floating tensor")


def _check_metrics(algo: Any, method: str, metrics: Any) -> None:
    """Metrics are a dict of name -> number (anything `float()` accepts)."""
    if not isinstance(metrics, dict):
        raise _fail(algo, method, f"returned metrics of type {type(metrics).__name__}; they must be a dict")
    for key, value in metrics.items():
        try:
            float(value)
        except (TypeError, ValueError):
            raise _fail(
                algo,
                method,
                f"returned metric {key!r} = {value!r}, which is not a number (use float(...) or .item())",
            ) from None


def _nonfinite(algo: Any, method: str, name: str, x: torch.Tensor, mask_B_T: torch.Tensor) -> str | None:
    bad = (~torch.isfinite(x.detach())) & (mask_B_T > 0)
    count = int(bad.sum())
    return (
        f"{plugin_label(algo)}: {method}() returned non-finite {name} on {count} action tokens"
        if count
        else None
    )


def check_advantage_result(algo: Any, result: Any, traj: Trajectories) -> str | None:
    """Check what `algo.advantages(traj)` returned: PluginOutputError for a wrong type or shape
    (advantages, and returns when the algorithm has a critic, are [B, T] floating tensors);
    returns a description of non-finite values on action tokens, or None."""
    if not isinstance(result, AdvantageResult):
        raise _fail(
            algo, "advantages", f"returned {type(result).__name__}; it must return an AdvantageResult"
        )
    shape = tuple(traj.action_mask_B_T.shape)
    _check_tensor(algo, "advantages", "advantages_B_T", result.advantages_B_T, shape)
    if result.returns_B_T is None and getattr(algo, "critic", None) is not None:
        raise _fail(
            algo,
            "advantages",
            "returned no returns_B_T, but the algorithm has a critic: return its "
            "regression targets as AdvantageResult(advantages_B_T, returns_B_T)",
        )
    if result.returns_B_T is not None:
        _check_tensor(algo, "advantages", "returns_B_T", result.returns_B_T, shape)
    _check_metrics(algo, "advantages", result.metrics)
    for name, x in (("advantages_B_T", result.advantages_B_T), ("returns_B_T", result.returns_B_T)):
        problem = None if x is None else _nonfinite(algo, "advantages", name, x, traj.action_mask_B_T)
        if problem:
            return problem
    return None


def check_loss_output(algo: Any, method: str, out: Any) -> str | None:
    """Check what `algo.policy_loss` / `algo.critic_loss` (`method`) returned: PluginOutputError
    unless it is a LossOutput holding a scalar (shape []) tensor and number metrics; returns a
    description of a non-finite loss, or None."""
    if not isinstance(out, LossOutput):
        raise _fail(
            algo, method, f"returned {type(out).__name__}; it must return a LossOutput(loss, metrics)"
        )
    loss = out.loss
    if not isinstance(loss, torch.Tensor):
        raise _fail(
            algo, method, f"returned a loss of type {type(loss).__name__}; it must be a scalar torch.Tensor"
        )
    if loss.dim() != 0:
        raise _fail(
            algo,
            method,
            f"returned a loss of shape {list(loss.shape)}; it must be a scalar (shape []): reduce "
            "per-token losses with algorithms.aggregation.aggregate",
        )
    _check_metrics(algo, method, out.metrics)
    value = float(loss.detach())
    return (
        None
        if math.isfinite(value)
        else f"{plugin_label(algo)}: {method}() returned a non-finite loss ({value})"
    )
