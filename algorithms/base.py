"""The plugin contract every RL algorithm implements (built-in or external).

An algorithm is a small class: a frozen config dataclass with paper defaults, how many
rollouts it wants per prompt, which optional per-token inputs it needs, how it turns
rewards (and values) into per-token advantages, and its losses. The training loop calls
only the methods below and never branches on an algorithm's name.

Shape suffixes (the rule used everywhere in the project): `_B` one entry per trajectory,
`_G` one per member of a group, `_T` one per response token. `logp_B_T` is a [B, T]
tensor. Response tokens are everything after the prompt: model actions and, in agentic
tasks, environment observations. Padding is zero in every mask.

Token alignment: position t of any `_T` tensor refers to response token t; `values_B_T[t]`
is V(s_t), the critic's estimate *before* token t is emitted (read from the hidden state
of the previous position, the same alignment as `logp_B_T`).

This is version `algorithms.PLUGIN_API` of the contract. Forms of the previous version that are
still accepted, each with one warning naming what to change (algorithms/README.md, "Changes to
the contract"): `self.needs = ...` in `__init__`, `Trajectories(group_index_B=..., truncated_B=...)`,
`CriticSettings(lr=...)`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar, dataclass, field
from typing import Any, ClassVar

import torch

from algorithms.deprecation import warn_once
from algorithms.fields import MULTIPLE_UPDATES, ActsWhen, RunSettings, doc  # noqa: F401 - re-exported for plugins

# Optional inputs a plugin may declare in `Algorithm.needs`; the loop supplies exactly these.
#   values   -> critic values at rollout time (Trajectories.values_B_T); implies a critic
#   old_logp -> learner log-probs before this update (PolicyLossInputs.old_logp_B_T), one
#               extra no-grad forward pass per batch
#   ref_logp -> log-probs under the frozen initial policy (PolicyLossInputs.ref_logp_B_T)
OPTIONAL_INPUTS = frozenset({"values", "old_logp", "ref_logp"})


@dataclass
class Trajectories:
    """What `Algorithm.advantages` receives: B finished trajectories, groups contiguous."""

    rewards_B: torch.Tensor  # [B] float: outcome reward of each trajectory
    action_mask_B_T: torch.Tensor  # [B, T] float 0/1: model-generated (trained) tokens
    response_mask_B_T: torch.Tensor  # [B, T] float 0/1: action + observation tokens, 0 on padding
    prompt_keys: list[str]  # [B] stable id of each prompt (for per-prompt baselines)
    max_response_tokens: int  # the rollout length limit (DAPO overlong shaping, Dr.GRPO norm)
    values_B_T: torch.Tensor | None = None  # [B, T] critic V(s_t) at rollout time, when needed
    # removed in plugin API 2 (nothing read them); still accepted, ignored, with one warning
    group_index_B: InitVar[torch.Tensor | None] = None
    truncated_B: InitVar[torch.Tensor | None] = None

    def __post_init__(self, group_index_B: torch.Tensor | None, truncated_B: torch.Tensor | None) -> None:
        if isinstance(self.prompt_keys, torch.Tensor):  # plugin API 1's order: group_index_B 4th
            group_index_B, self.prompt_keys, self.max_response_tokens, self.values_B_T = (
                self.prompt_keys,
                self.max_response_tokens,
                self.values_B_T,
                group_index_B,
            )
        given = {"group_index_B": group_index_B, "truncated_B": truncated_B}
        removed = [name for name, value in given.items() if value is not None]
        if removed:
            warn_once(
                "Trajectories.group_index_B",
                f"Trajectories({'=..., '.join(removed)}=...): removed in plugin API 2 and ignored; drop "
                "these arguments (groups are contiguous runs of `group_size` rows)",
            )

    @property
    def action_lengths_B(self) -> torch.Tensor:
        """Number of model-generated tokens in each trajectory, [B] float."""
        return self.action_mask_B_T.sum(dim=-1)


@dataclass
class AdvantageResult:
    """Per-token advantages for the policy and, for critic algorithms, critic targets."""

    advantages_B_T: torch.Tensor  # [B, T], zero outside action tokens
    returns_B_T: torch.Tensor | None = None  # [B, T] critic regression targets
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class PolicyLossInputs:
    """What `Algorithm.policy_loss` receives for one (mini)batch."""

    logp_B_T: torch.Tensor  # [B, T] log pi_theta(a_t|s_t), carries the gradient
    rollout_logp_B_T: torch.Tensor  # [B, T] log-probs the rollout engine recorded
    advantages_B_T: torch.Tensor  # [B, T]
    action_mask_B_T: torch.Tensor  # [B, T] float 0/1
    old_logp_B_T: torch.Tensor | None = None  # [B, T] learner before this update (no grad)
    ref_logp_B_T: torch.Tensor | None = None  # [B, T] frozen reference policy (no grad)
    entropy_B_T: torch.Tensor | None = None  # [B, T] policy entropy, for metrics only
    max_response_tokens: int | None = None  # the rollout length limit (Dr.GRPO's constant normaliser)


@dataclass
class CriticLossInputs:
    """What `Algorithm.critic_loss` receives for one critic update."""

    values_B_T: torch.Tensor  # [B, T] current critic V(s_t), carries the gradient
    old_values_B_T: torch.Tensor  # [B, T] critic values at rollout time (no grad)
    returns_B_T: torch.Tensor  # [B, T] regression targets from `advantages`
    action_mask_B_T: torch.Tensor  # [B, T] float 0/1: positions whose value is trained


@dataclass
class LossOutput:
    """A scalar loss to minimise and the metrics that explain it (namespaced keys)."""

    loss: torch.Tensor  # [] scalar
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class CriticSettings:
    """How the trainer runs an algorithm's critic (None on `Algorithm.critic` = no critic)."""

    updates_per_step: int = 1  # K critic optimizer steps per policy step (SAO's TTUR: 2)
    warmup_steps: int = 0  # critic-only steps before the policy starts to move
    freeze_attention: bool = False  # freeze the critic's attention modules during RL
    # removed in plugin API 2: the critic's rate is the run field `critic_lr` (one knob, a default
    # by model size like `policy_lr`); still accepted, ignored, with one warning
    lr: InitVar[float | None] = None

    def __post_init__(self, lr: float | None) -> None:
        if lr is not None:
            warn_once(
                "CriticSettings.lr",
                f"CriticSettings(lr={lr}): removed in plugin API 2 and ignored; the critic's learning rate "
                "is the run field critic_lr (--set critic_lr=..., default by model size); drop lr=",
            )


class Algorithm:
    """Base class of every algorithm plugin. Subclasses set the class attributes and
    implement `advantages` and `policy_loss` (and `critic_loss` when they need values)."""

    name: ClassVar[str]  # registry name, e.g. "sao"
    summary: ClassVar[str]  # one line for `bench algos`
    paper: ClassVar[str] = ""  # the paper (authors, title, arXiv id, equations) for `bench algos NAME`
    Config: ClassVar[type]  # frozen dataclass with paper defaults
    presets: ClassVar[dict[str, dict[str, Any]]] = {}  # named groups of config overrides
    # old `--set` key -> the one that holds it now (`algorithms.renames`), e.g.
    # {"algo.eps_high": "algo.clip_eps_high"}; old names are read as the new, with one warning
    renamed_fields: ClassVar[dict[str, str]] = {}

    def __init__(self, config: Any | None = None) -> None:
        self.config = config if config is not None else self.Config()

    @property
    def needs(self) -> frozenset[str]:
        """The optional inputs (a subset of OPTIONAL_INPUTS) this configured algorithm needs; the
        loop supplies exactly these. A plugin whose needs are fixed sets a class attribute
        (`needs = frozenset({"old_logp"})`); one whose needs depend on its config overrides this
        property (GRPO: `old_logp` only with PPO-clip importance, `ref_logp` only with a KL term).
        The registry checks every preset's needs when it loads a plugin."""
        return self.__dict__.get("_needs_set_in_init", frozenset())

    @needs.setter
    def needs(self, value: Any) -> None:
        """Plugin API 1's form, `self.needs = ...` in `__init__`: still honoured, with one warning."""
        warn_once(
            ("needs", type(self).__qualname__),
            f"{getattr(self, 'name', type(self).__name__)}: `self.needs = ...` in __init__ is plugin API 1's "
            "form and is read for now; since plugin API 2 declare `needs` as a class attribute, or as a "
            "property when it depends on the config",
        )
        self.__dict__["_needs_set_in_init"] = frozenset(value)

    @classmethod
    def make_config(cls, preset: str | None = None, **overrides: Any) -> Any:
        """Build a config from the paper defaults, an optional preset and field overrides."""
        values: dict[str, Any] = {}
        if preset is not None:
            if preset not in cls.presets:
                import difflib

                close = difflib.get_close_matches(preset, list(cls.presets), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                choices = ", ".join(sorted(cls.presets)) or "none"
                raise ValueError(f"unknown preset {preset!r} for {cls.name}; valid presets: {choices}{hint}")
            values.update(cls.presets[preset])
        values.update(overrides)
        return cls.Config(**values)

    # ---- what the loop asks of every algorithm -------------------------------------
    @property
    def group_size(self) -> int:
        """Rollouts per prompt; the loop hands over a group only when all have finished."""
        return int(getattr(self.config, "group_size", 1))

    @property
    def critic(self) -> CriticSettings | None:
        """Critic settings, or None when the algorithm has no value model."""
        return None

    def accept_group(self, rewards_G: torch.Tensor) -> bool:
        """Whether a finished group enters the batch (DAPO's dynamic sampling says no to
        groups whose rewards are all equal). Rejected groups are counted by the loop."""
        return True

    def advantages(self, traj: Trajectories) -> AdvantageResult:
        """Per-token advantages (and critic returns) for a batch of finished trajectories."""
        raise NotImplementedError

    def policy_loss(self, inp: PolicyLossInputs) -> LossOutput:
        """The policy loss to minimise on one (mini)batch, with its metrics."""
        raise NotImplementedError

    def critic_loss(self, inp: CriticLossInputs) -> LossOutput:
        """The critic loss to minimise; only called when `critic` is not None."""
        raise NotImplementedError(f"{self.name} has no critic")

    def inactive_fields(self, run: RunSettings) -> dict[str, str]:
        """The config fields that cannot change training under this config and `run`'s settings
        -> when they would (e.g. the PPO clip at one policy update per batch). By default read from
        each field's `doc(..., acts_when=ActsWhen(...))`; sweeps do not search these fields and
        reports do not show them among tuned parameters."""
        out = {}
        for f in dataclasses.fields(self.config):
            acts = f.metadata.get("acts_when")
            if acts is not None and not acts.test(self.config, run):
                out[f.name] = acts.words
        return out

    # ---- state that must survive a resume (e.g. running-mean baselines) -------------
    def state_dict(self) -> dict[str, Any]:
        """Algorithm state saved with checkpoints; stateless algorithms return {}."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
