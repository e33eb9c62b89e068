"""`bench algos --check NAME`: a conformance check of an algorithm plugin that needs no pytest.

For the default config and every preset it builds random batches as the loop does (groups
contiguous, right padding, observation tokens inside agent-like rows) and puts NaN and inf in
every position the action mask excludes, then checks:

1. the class: `name`, `summary`, a frozen `Config` dataclass whose fields have help text
   (`doc(...)`), presets that build, `group_size` >= 1, `needs` within OPTIONAL_INPUTS, and
   `values` declared exactly when there is a critic;
2. `advantages`: with only the declared needs supplied, an AdvantageResult whose advantages
   (and returns, with a critic) are [B, T] and finite on action tokens;
3. `policy_loss` (and `critic_loss` with a critic): with only the declared needs supplied, a
   finite scalar; its gradient (w.r.t. `logp_B_T`, resp. `values_B_T`) is finite, zero on every
   masked position and non-zero on some action token; garbage on masked positions does not
   change the loss;
4. `accept_group` returns a bool;
5. `state_dict` survives torch.save/torch.load, and a fresh instance that loads it computes the
   same advantages as the original.

`check_algorithm` returns one line per failure, each naming the plugin, the config, the method
and what to fix; `bench algos --check` prints them. Plugin authors can call it from their tests.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from typing import Any

import torch

from algorithms.base import OPTIONAL_INPUTS, CriticLossInputs, PolicyLossInputs, Trajectories
from algorithms.outputs import PluginOutputError, check_advantage_result, check_loss_output

T = 12  # response tokens per row of the random batches
SELECT_HINT = "pass every per-token input through algorithms.objectives.select_tokens(mask, ...) first"


class Failure(Exception):
    """One failed check: the method and what to fix (prefixed with plugin and config when printed)."""


def _garbage_like(x_B_T: torch.Tensor, mask_B_T: torch.Tensor) -> torch.Tensor:
    """`x_B_T` with NaN, inf and -inf (in turn) on every position where the mask is 0."""
    junk = torch.tensor([float("nan"), float("inf"), float("-inf")], dtype=x_B_T.dtype)
    fill_B_T = junk[torch.arange(x_B_T.numel()) % 3].reshape(x_B_T.shape)
    return torch.where(mask_B_T > 0, x_B_T, fill_B_T)


def random_trajectories(group_size: int, with_values: bool, seed: int) -> Trajectories:
    """A batch as the loop builds it: groups of `group_size` contiguous, right padding, rewards
    that differ within each group, observation tokens (response, not action) in every other row,
    critic values (0 outside action tokens, as the learner gives them) when `with_values`."""
    g = torch.Generator().manual_seed(seed)
    prompts = max(2, 4 // group_size)
    B = prompts * group_size
    lengths_B = torch.randint(4, T + 1, (B,), generator=g)
    lengths_B[0] = T
    response_B_T = (torch.arange(T)[None, :] < lengths_B[:, None]).float()  # [B, T]
    action_B_T = response_B_T.clone()
    action_B_T[::2, 1:3] = 0.0  # tool output inside agent-like rows
    rewards_B = (torch.rand(B, generator=g) > 0.5).float()
    first, second = (slice(0, None, group_size), slice(1, None, group_size)) if group_size > 1 else (0, 1)
    rewards_B[first], rewards_B[second] = 1.0, 0.0  # rewards differ within each group (and the batch)
    values_B_T = (torch.randn(B, T, generator=g) * 0.5) * action_B_T if with_values else None
    return Trajectories(
        rewards_B, action_B_T, response_B_T, [f"p{b // group_size}" for b in range(B)], T, values_B_T
    )


def _supplied(needs: frozenset[str]) -> str:
    return "only its declared needs supplied: " + (", ".join(sorted(needs)) or "none")


def _call(method: str, needs: frozenset[str], fn: Callable[[], Any]) -> Any:
    """Call a plugin method; an exception becomes a Failure that says what was supplied."""
    try:
        return fn()
    except PluginOutputError as exc:
        raise Failure(str(exc).split(": ", 1)[1]) from None
    except Exception as exc:  # noqa: BLE001 - any error of the plugin is a finding
        raise Failure(
            f"{method}() raised {type(exc).__name__}: {exc} (with {_supplied(needs)}; declare every optional "
            "input the method reads in `needs`)"
        ) from None


def _loss_and_grad(
    method: str,
    algo: Any,
    make_inputs: Callable[[torch.Tensor], Any],
    x_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
) -> tuple[float, torch.Tensor]:
    """(loss, gradient w.r.t. the differentiable input) of `method` on `make_inputs(leaf)`."""
    leaf = x_B_T.clone().requires_grad_(True)
    out = _call(method, algo.needs, lambda: getattr(algo, method)(make_inputs(leaf)))
    _call(method, algo.needs, lambda: check_loss_output(algo, method, out))
    if not out.loss.requires_grad:
        raise Failure(
            f"{method}() returned a loss without a gradient: it must be computed from the input tensors"
        )
    out.loss.backward()
    grad = leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)
    return float(out.loss.detach()), grad


def _check_loss(
    method: str,
    algo: Any,
    make_inputs: Callable[[torch.Tensor, bool], Any],
    x_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
    wrt: str,
) -> None:
    """The loss checks of item 3, for the loss method `method` differentiated w.r.t. `wrt`."""
    clean, _ = _loss_and_grad(method, algo, lambda leaf: make_inputs(leaf, False), x_B_T, mask_B_T)
    if clean != clean or abs(clean) == float("inf"):
        raise Failure(f"{method}() returned a non-finite loss ({clean}) on a clean batch")
    dirty_x = _garbage_like(x_B_T, mask_B_T)
    dirty, grad = _loss_and_grad(method, algo, lambda leaf: make_inputs(leaf, True), dirty_x, mask_B_T)
    if dirty != dirty or abs(dirty) == float("inf"):
        raise Failure(
            f"{method}() returned {dirty} when padding and observation tokens hold NaN/inf: {SELECT_HINT}"
        )
    if abs(dirty - clean) > 1e-5 * max(1.0, abs(clean)):
        raise Failure(f"{method}() changed ({clean} -> {dirty}) when masked positions changed: {SELECT_HINT}")
    if not torch.isfinite(grad).all():
        raise Failure(f"{method}() has a non-finite gradient w.r.t. {wrt}: {SELECT_HINT}")
    if (grad[mask_B_T == 0] != 0).any():
        raise Failure(
            f"{method}() sends gradient through masked tokens of {wrt} (padding or observations): "
            f"{SELECT_HINT}, and aggregate with the action mask"
        )
    if not (grad[mask_B_T > 0] != 0).any():
        raise Failure(
            f"{method}() gives no gradient w.r.t. {wrt} on any action token: the loss must depend on it"
        )


def _policy_inputs(algo: Any, traj: Trajectories, advantages_B_T: torch.Tensor, seed: int):
    """(make_inputs(leaf, dirty), clean log-probs) for `policy_loss`, with only the declared needs."""
    g = torch.Generator().manual_seed(seed + 1)
    mask_B_T = traj.action_mask_B_T
    logp_B_T = (-0.05 - 2.0 * torch.rand(mask_B_T.shape, generator=g)) * mask_B_T
    rollout_B_T = logp_B_T + 0.01 * torch.randn(mask_B_T.shape, generator=g) * mask_B_T
    ref_B_T = logp_B_T + 0.05 * torch.randn(mask_B_T.shape, generator=g) * mask_B_T
    entropy_B_T = torch.rand(mask_B_T.shape, generator=g) * mask_B_T
    adv_B_T = advantages_B_T.detach() * mask_B_T

    def make(leaf: torch.Tensor, dirty: bool) -> PolicyLossInputs:
        def d(x):
            return _garbage_like(x, mask_B_T) if dirty else x

        return PolicyLossInputs(
            logp_B_T=leaf,
            rollout_logp_B_T=d(rollout_B_T),
            advantages_B_T=d(adv_B_T),
            action_mask_B_T=mask_B_T,
            old_logp_B_T=d(logp_B_T) if "old_logp" in algo.needs else None,  # as the learner: no update yet
            ref_logp_B_T=d(ref_B_T) if "ref_logp" in algo.needs else None,
            entropy_B_T=d(entropy_B_T),
            max_response_tokens=traj.max_response_tokens,
        )

    return make, logp_B_T


def _check_state_round_trip(cls: type, config: Any, seed: int) -> None:
    algo = cls(config)
    algo.advantages(random_trajectories(algo.group_size, "values" in algo.needs, seed + 2))
    state = _call("state_dict", algo.needs, algo.state_dict)
    if not isinstance(state, dict):
        raise Failure(f"state_dict() returned {type(state).__name__}; it must return a dict")
    buffer = io.BytesIO()
    try:
        torch.save(state, buffer)
    except Exception as exc:  # noqa: BLE001
        raise Failure(
            f"state_dict() cannot be saved with torch.save ({exc}): keep tensors, numbers, "
            "strings, lists and dicts in it"
        ) from None
    buffer.seek(0)
    fresh = cls(config)
    _call(
        "load_state_dict", fresh.needs, lambda: fresh.load_state_dict(torch.load(buffer, weights_only=False))
    )
    traj = random_trajectories(algo.group_size, "values" in algo.needs, seed + 3)
    a = algo.advantages(traj).advantages_B_T * traj.action_mask_B_T
    b = fresh.advantages(traj).advantages_B_T * traj.action_mask_B_T
    if not torch.allclose(a, b, equal_nan=True):
        raise Failure(
            "state_dict()/load_state_dict(): a fresh instance loaded with the saved state computes "
            "different advantages; save (and restore) all state that advantages() reads"
        )


def _check_class(cls: type) -> list[str]:
    """Item 1 for the class itself (config-independent)."""
    problems = []
    if not isinstance(getattr(cls, "name", None), str) or not cls.name:
        problems.append("class: set `name`, the registry name (a string)")
    if not getattr(cls, "summary", ""):
        problems.append("class: set `summary`, the one line `bench algos` prints")
    config_cls = getattr(cls, "Config", None)
    if not (isinstance(config_cls, type) and dataclasses.is_dataclass(config_cls)):
        return [*problems, "class: set `Config` to a @dataclass(frozen=True) of the algorithm's settings"]
    if not config_cls.__dataclass_params__.frozen:
        problems.append("Config: make it @dataclass(frozen=True) (a run's config must not change)")
    for f in dataclasses.fields(config_cls):
        if not f.metadata.get("help"):
            problems.append(
                f'Config.{f.name}: no help text; declare it with doc("what it does", default=...)'
            )
    return problems


def _check_config(cls: type, config: Any, seed: int) -> None:
    """Items 1-5 for one config (the default or a preset)."""
    algo = cls(config)
    needs, critic = frozenset(algo.needs), algo.critic
    if not needs <= OPTIONAL_INPUTS:
        raise Failure(
            f"needs: {', '.join(sorted(needs - OPTIONAL_INPUTS))} cannot be supplied; valid: "
            f"{', '.join(sorted(OPTIONAL_INPUTS))}"
        )
    if ("values" in needs) != (critic is not None):
        raise Failure(
            "needs/critic: declare `values` in needs exactly when `critic` returns CriticSettings "
            "(critic values are what the critic computes)"
        )
    if not isinstance(algo.group_size, int) or algo.group_size < 1:
        raise Failure(f"group_size: must be an int >= 1, got {algo.group_size!r}")
    traj = random_trajectories(algo.group_size, "values" in needs, seed)
    mask_B_T = traj.action_mask_B_T
    result = _call("advantages", needs, lambda: algo.advantages(traj))
    problem = _call("advantages", needs, lambda: check_advantage_result(algo, result, traj))
    if problem:
        raise Failure(problem.split(": ", 1)[1])
    accepted = _call("accept_group", needs, lambda: algo.accept_group(traj.rewards_B[: algo.group_size]))
    if not isinstance(accepted, bool | torch.Tensor) or (
        isinstance(accepted, torch.Tensor) and accepted.numel() != 1
    ):
        raise Failure(f"accept_group() returned {accepted!r}; it must return a bool")
    make_policy, logp_B_T = _policy_inputs(algo, traj, result.advantages_B_T, seed)
    _check_loss("policy_loss", algo, make_policy, logp_B_T, mask_B_T, "logp_B_T")
    if critic is not None:
        returns_B_T = result.returns_B_T.detach() * mask_B_T
        old_B_T = traj.values_B_T

        def make_critic(leaf: torch.Tensor, dirty: bool) -> CriticLossInputs:
            d = (lambda x: _garbage_like(x, mask_B_T)) if dirty else (lambda x: x)
            return CriticLossInputs(leaf, d(old_B_T), d(returns_B_T), mask_B_T)

        _check_loss("critic_loss", algo, make_critic, old_B_T + 0.1 * mask_B_T, mask_B_T, "values_B_T")
    _check_state_round_trip(cls, config, seed)


def check_algorithm(cls: type, name: str | None = None, seed: int = 0) -> list[str]:
    """Run the conformance checks on algorithm class `cls` (registered as `name`); one line per
    failure, e.g. "reinforce (default): policy_loss() ...", or [] when it conforms."""
    label = name or getattr(cls, "name", cls.__name__)
    who = f"{label} ({cls.__module__}.{cls.__qualname__})"
    problems = _check_class(cls)
    if problems and any(p.startswith("class:") for p in problems):
        return [f"{who}: {p}" for p in problems]
    configs: dict[str, Any] = {}
    for preset in ["default", *getattr(cls, "presets", {})]:
        try:
            configs[preset] = cls.make_config(None if preset == "default" else preset)
        except Exception as exc:  # noqa: BLE001 - any error of the plugin is a finding
            problems.append(f"[{preset}] Config: building it raised {type(exc).__name__}: {exc}")
    for preset, config in configs.items():
        try:
            _check_config(cls, config, seed)
        except Failure as failure:
            problems.append(f"[{preset}] {failure}")
    return [f"{who}: {p}" for p in problems]
