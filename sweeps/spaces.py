"""Search spaces: what a sweep tunes for each algorithm, as data.

A space is a list of `Param`s; a param's name is a config key as `--set` spells it: a run field
(`policy_lr`, `critic_lr`) or an algorithm field (`algo.dis_eps_high`). Each built-in algorithm's
space is one pure function of its effective config (`SPACES`), covering what the issue list
and the papers call its most sensitive knobs: the policy learning rate; the clip or DIS band;
the critic's K updates, learning rate and warmup; the length-adaptive alpha; the group size
where it applies; the KL beta. A parameter the algorithm says cannot act under the sweep's run
settings (`Algorithm.inactive_fields`: the PPO clip at one policy update per batch, PPO's alpha
without the length-adaptive lambda) is left out. The first trial of every sweep is the paper's defaults.

Overrides, in the same schema, from a TOML file (`--space FILE`) or a plugin's
`search_space` class attribute (a dict, since `algorithms/` cannot import this package). An
algorithm field's old name (`algo.eps_high` of sao) is read as its current one, with a warning
(`algorithms.renames`).

    [params."algo.dis_eps_high"]      # replace or add a parameter
    type = "float"                    # float | int | categorical
    low = 2.0
    high = 8.0
    log = false                       # optional (float, int)
    [params.policy_lr]
    fixed = 5e-5                      # not searched: every trial uses this value
    [params."algo.group_size"]
    type = "categorical"
    choices = [4, 8, 16]
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeps.errors import ExperimentError

KINDS = ("float", "int", "categorical")


class SpaceError(ExperimentError):
    """A search space that cannot be used (one-line message)."""


@dataclass(frozen=True)
class Param:
    """One searched parameter: a config key and its distribution."""

    name: str
    kind: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple = ()

    def distribution(self) -> Any:
        """The Optuna distribution."""
        import optuna.distributions as d

        if self.kind == "float":
            return d.FloatDistribution(self.low, self.high, log=self.log)
        if self.kind == "int":
            return d.IntDistribution(int(self.low), int(self.high), log=self.log)
        return d.CategoricalDistribution(list(self.choices))

    def grid(self) -> list:
        """Values for the grid sampler: a categorical's choices, else low, middle and high
        (geometric middle on a log scale)."""
        if self.kind == "categorical":
            return list(self.choices)
        mid = math.sqrt(self.low * self.high) if self.log else (self.low + self.high) / 2
        values = [self.low, mid, self.high]
        return sorted({int(round(v)) for v in values}) if self.kind == "int" else values


def _lr(name: str, run: dict) -> Param:
    """A learning rate searched over a decade either side of the run's default rule (the tiny
    model's 1e-4 or the paper's 1e-6), on a log scale."""
    center = run.get(name) or 1e-4
    return Param(name, "float", center / 10, center * 10, log=True)


def _group_sizes(c: dict, run: dict) -> Param:
    """Group sizes 4, 8, 16 that divide the run's trajectories per step (else the default's)."""
    tps = run.get("trajectories_per_step", 64)
    return Param(
        "algo.group_size",
        "categorical",
        choices=tuple(g for g in (4, 8, 16) if tps % g == 0) or (c["group_size"],),
    )


def _sao(c: dict, run: dict) -> list[Param]:
    # K is searched only with both value-model designs on: the ablation presets (K = 1, a
    # full-parameter critic, "DIS only") are defined by their K, which tuning must not undo
    designs = c.get("freeze_attention", True) and c.get("critic_updates_per_step", 2) >= 2
    k = [Param("algo.critic_updates_per_step", "int", 1, 3)] if designs else []
    return [
        _lr("policy_lr", run),
        Param("algo.dis_eps_low", "float", 0.1, 0.8),
        Param("algo.dis_eps_high", "float", 1.0, 8.0),
        *k,
        _lr("critic_lr", run),
        Param("algo.critic_warmup_steps", "int", 0, 20),
        Param("algo.alpha", "float", 1.0, 3.0),
    ]


def _grpo(c: dict, run: dict) -> list[Param]:
    band = (
        ("dis_eps_low", "dis_eps_high", 1.0, 8.0)
        if c.get("importance") == "dis"
        else ("clip_eps_low", "clip_eps_high", 0.1, 0.4)
    )
    return [
        _lr("policy_lr", run),
        Param(f"algo.{band[0]}", "float", 0.1, 0.8 if band[2] == 1.0 else 0.4),
        Param(f"algo.{band[1]}", "float", band[2], band[3]),
        _group_sizes(c, run),
        Param("algo.beta", "categorical", choices=(0.0, 0.001, 0.01)),
    ]


def _dapo(c: dict, run: dict) -> list[Param]:
    return [
        _lr("policy_lr", run),
        Param("algo.clip_eps_low", "float", 0.1, 0.4),
        Param("algo.clip_eps_high", "float", 0.2, 0.5),
        _group_sizes(c, run),
    ]


def _ppo(c: dict, run: dict) -> list[Param]:
    return [
        _lr("policy_lr", run),
        Param("algo.clip_eps_low", "float", 0.1, 0.4),
        Param("algo.clip_eps_high", "float", 0.1, 0.5),
        _lr("critic_lr", run),
        Param("algo.alpha", "float", 1.0, 3.0),
    ]


def _band_only(c: dict, run: dict) -> list[Param]:
    params = [_lr("policy_lr", run)]
    if "group_size" in c:
        params.append(_group_sizes(c, run))
    return params


SPACES = {"sao": _sao, "grpo": _grpo, "dapo": _dapo, "ppo": _ppo}
"""Built-in algorithm -> its space as a function of (the effective algorithm config, the run's
default learning rates), both dicts; other algorithms, plugins included, get the policy rate
and group size (`_band_only`) unless they define `search_space`."""


def param_from_table(name: str, table: dict[str, Any]) -> Param | Any:
    """A `Param` from one TOML/plugin table, or the fixed value of a `fixed` table."""
    if "fixed" in table:
        return Fixed(table["fixed"])
    kind = table.get("type")
    if kind not in KINDS:
        raise SpaceError(f"search space {name}: type {kind!r}; valid types: {', '.join(KINDS)}")
    if kind == "categorical":
        choices = tuple(table.get("choices") or ())
        if not choices:
            raise SpaceError(f"search space {name}: a categorical parameter needs a non-empty 'choices' list")
        return Param(name, kind, choices=choices)
    low, high, log = table.get("low"), table.get("high"), bool(table.get("log", False))
    if not all(isinstance(v, int | float) for v in (low, high)) or not low < high:
        raise SpaceError(f"search space {name}: needs numbers low < high, got low={low!r} high={high!r}")
    if log and low <= 0:
        raise SpaceError(f"search space {name}: a log scale needs low > 0, got {low}")
    return Param(name, kind, float(low), float(high), log)


@dataclass(frozen=True)
class Fixed:
    """A parameter fixed by an override: every trial uses `value`."""

    value: Any


def load_space_file(path: str | Path) -> dict[str, Any]:
    """The `[params.NAME]` tables of a `--space` TOML file (name -> Param or Fixed)."""
    path = Path(path)
    if not path.is_file():
        raise SpaceError(f"--space {path}: file not found")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise SpaceError(f"--space {path}: invalid TOML: {exc}") from None
    tables = data.get("params")
    if not isinstance(tables, dict) or not tables:
        raise SpaceError(f"--space {path}: no [params.NAME] tables")
    return {name: param_from_table(name, t) for name, t in tables.items()}


def space_for(
    algo_cls: type,
    algo_config: dict[str, Any],
    run_defaults: dict[str, Any],
    overrides: dict[str, Any] | None = None,
    inactive: dict[str, str] | None = None,
) -> tuple[list[Param], dict[str, Any]]:
    """(the searched params, the fixed values) of one algorithm: its built-in or plugin space,
    then the `--space` overrides (a param replaces the one of its name; `Fixed` removes it), an
    old field name read as the current one. `inactive` (`Algorithm.inactive_fields` under the
    sweep's run settings: field -> when it would act) are left out: a parameter that cannot act
    (the PPO clip at one update per batch) is not searched, and a `--space` that names one is refused."""
    from algorithms.renames import current_key

    plugin = getattr(algo_cls, "search_space", None)
    if isinstance(plugin, dict) and plugin:
        params = [p for name, t in plugin.items() if isinstance(p := param_from_table(name, t), Param)]
    else:
        params = SPACES.get(algo_cls.name, _band_only)(algo_config, run_defaults)
    dead = {f"algo.{field}": why for field, why in (inactive or {}).items()}
    by_name = {p.name: p for p in params if p.name not in dead}
    fixed: dict[str, Any] = {}
    for old_name, value in (overrides or {}).items():
        name = current_key(algo_cls, old_name)
        if isinstance(value, Param):
            value = dataclasses.replace(value, name=name)
            if name in dead:
                raise SpaceError(f"search space {name}: cannot act for {algo_cls.name} here: it {dead[name]}")
        by_name.pop(name, None)
        if isinstance(value, Fixed):
            fixed[name] = value.value
        else:
            by_name[name] = value
    return list(by_name.values()), fixed


def as_layer(values: dict[str, Any]) -> dict[str, Any]:
    """Param values (`policy_lr`, `algo.dis_eps_high`) as a config layer for `build_config`."""
    layer: dict[str, Any] = {}
    for name, value in values.items():
        section, dot, key = name.partition(".")
        if dot and section == "algo":
            layer.setdefault("algo_args", {})[key] = value
        elif dot and section == "task":
            layer.setdefault("task_args", {})[key] = value
        else:
            layer[name] = value
    return layer


def paper_defaults(
    params: list[Param], algo_config: dict[str, Any], run_defaults: dict[str, Any]
) -> dict[str, Any]:
    """The first trial: every searched parameter at its algorithm's (paper) default, or the run's
    default rule for run fields (e.g. the model tier's policy rate), clipped into the space."""
    values = {}
    for p in params:
        section, dot, key = p.name.partition(".")
        value = algo_config.get(key) if dot and section == "algo" else run_defaults.get(p.name)
        if value is None:
            continue
        if p.kind == "categorical":
            if value in p.choices:
                values[p.name] = value
            continue
        value = min(max(value, p.low), p.high)
        values[p.name] = int(round(value)) if p.kind == "int" else float(value)
    return values
