"""Old algorithm field names in run config layers, read as the current ones.

Every layer a run config is built from passes through `current_names` (in `build_config`): the
`--set` and `--config` layers (a TOML file, or an older run's config.json), an arm's layer of a
comparison, a sweep trial's parameters, and a resumed run's saved config (`--resume` compares
the run's settings under the current names, so a rename is not a change). The rename table
belongs to each algorithm (`Algorithm.renamed_fields`, read by `algorithms.renames`), and each
old name warns once. A layer without algorithm fields is left as it is, with no plugin loaded.
"""

from __future__ import annotations

from typing import Any

from bench.errors import UsageError


def layer_algo(layers: tuple[dict[str, Any], ...], default: str) -> str:
    """The algorithm the merged layers will name: the last layer's `algo`, else `default`."""
    named = [layer["algo"] for layer in layers if layer.get("algo") is not None]
    return str(named[-1]) if named else default


def current_names(layer: dict[str, Any], algo: str) -> dict[str, Any]:
    """`layer` with its algorithm fields (`algo_args`, and a recorded `algo_config`) under the
    current names of algorithm `algo`; a field that moved to the run config (`algo.critic_lr`
    -> `critic_lr`) moves into the layer's run fields. One-line UsageError when the layer gives
    one field under its old and its new name."""
    args, record = layer.get("algo_args"), layer.get("algo_config")
    if not (isinstance(args, dict) and args) and not (isinstance(record, dict) and record):
        return layer
    from algorithms import registry
    from algorithms.renames import current_record, split_algo_args

    registry.check(algo)
    cls = registry.get(algo)
    out = dict(layer)
    if isinstance(args, dict) and args:
        try:
            out["algo_args"], run_fields = split_algo_args(cls, args)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        for key, value in run_fields.items():
            if layer.get(key) is not None and layer[key] != value:
                raise UsageError(
                    f"{algo}: {key} is given twice, as {key}={layer[key]!r} and under its old name as an "
                    f"algorithm field ({value!r}); give one"
                )
            out[key] = value
    if isinstance(record, dict) and record:
        out["algo_config"] = current_record(cls, record)
    return out
