"""YAML run configs (`--config run.yaml`, bench/config_values.py): the same layers as TOML, the
same validation and did-you-mean, `algo:`/`task:` mappings as TOML's `[algo]`/`[task]` tables."""

from __future__ import annotations

import pytest

from bench.config import build_config
from bench.config_values import load_config_file
from bench.errors import UsageError

TOML = """
steps = 7
policy_lr = 0.001
[algo]
dis_eps_high = 4.0
[task]
max_operands = 3
"""

YAML = """
steps: 7
policy_lr: 1.0e-3
algo:
  dis_eps_high: 4.0
task:
  max_operands: 3
"""


def test_yaml_gives_the_same_config_as_toml(tmp_path):
    (tmp_path / "run.toml").write_text(TOML)
    (tmp_path / "run.yaml").write_text(YAML)
    from_toml = build_config(*load_config_file(tmp_path / "run.toml"), {"algo": "grpo"})
    from_yaml = build_config(*load_config_file(tmp_path / "run.yaml"), {"algo": "grpo"})  # as --algo grpo
    assert from_yaml == from_toml
    assert from_yaml.algo_args == {"dis_eps_high": 4.0} and from_yaml.task_args == {"max_operands": 3}


def test_yml_extension_and_an_empty_file(tmp_path):
    (tmp_path / "a.yml").write_text("steps: 3\n")
    assert build_config(*load_config_file(tmp_path / "a.yml")).steps == 3
    (tmp_path / "empty.yaml").write_text("")
    assert load_config_file(tmp_path / "empty.yaml") == [{}]


@pytest.mark.parametrize(
    "text, message",
    [
        ("stpes: 3\n", "unknown config field 'stpes' (did you mean 'steps'?)"),
        ("steps: [1, 2\n", "invalid YAML:"),
        ("- steps\n", "expected a YAML mapping of config fields, got list"),
        ("steps: lots\n", "steps: expected int, got 'lots'"),
    ],
)
def test_bad_yaml_is_one_line(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(UsageError) as info:
        build_config(*load_config_file(path))
    assert message in str(info.value) and "\n" not in str(info.value)
