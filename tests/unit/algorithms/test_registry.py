"""The algorithm registry: built-ins, entry points, --plugin modules, duplicates, unknown names."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from algorithms import registry
from algorithms.base import Algorithm

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "plugins"


@pytest.fixture(autouse=True)
def fresh_registry():
    registry.reset()
    yield
    registry.reset()


def test_builtins_listed_and_loadable():
    names = registry.names()
    for required in ("sao", "grpo", "dapo", "ppo", "running-mean", "dr-grpo", "gspo", "rloo"):
        assert required in names
        cls = registry.get(required)
        assert issubclass(cls, Algorithm) and cls.name == required


def test_describe_reports_group_size_and_critic():
    sao, grpo, ppo = registry.describe("sao"), registry.describe("grpo"), registry.describe("ppo")
    assert (sao["rollouts_per_prompt"], sao["critic"]) == (1, True)
    assert grpo["rollouts_per_prompt"] > 1 and grpo["critic"] is False
    assert ppo["critic"] is True and sao["source"] == "built-in"


def test_unknown_name_suggests_and_lists():
    with pytest.raises(registry.RegistryError) as err:
        registry.get("grp")
    msg = str(err.value)
    assert "did you mean 'grpo'?" in msg and "available:" in msg and "sao" in msg


def test_plugin_module_registers(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    assert registry.load_plugin_module("reinforce_plugin") == ["reinforce"]
    assert registry.get("reinforce").summary.startswith("plain REINFORCE")


def test_duplicate_name_rejected(tmp_path, monkeypatch):
    (tmp_path / "dup_plugin.py").write_text(
        textwrap.dedent("""
        from algorithms.sao import SAO
        class MySAO(SAO):
            name = "sao"
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(registry.RegistryError, match="duplicate algorithm name 'sao'"):
        registry.load_plugin_module("dup_plugin")


def test_module_without_algorithms_rejected(tmp_path, monkeypatch):
    (tmp_path / "empty_plugin.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(registry.RegistryError, match="defines no Algorithm"):
        registry.load_plugin_module("empty_plugin")


def _fake_distribution(root: Path, entry: str) -> None:
    """An installed distribution (dist-info with entry_points.txt) that importlib.metadata finds."""
    dist = root / "reinforce_example-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: reinforce-example\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[bench.algorithms]\n{entry}\n")


def test_entry_point_plugin(tmp_path, monkeypatch):
    _fake_distribution(tmp_path, "reinforce = reinforce_plugin:Reinforce")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(EXAMPLES))
    assert "reinforce" in registry.names()
    assert registry.describe("reinforce")["source"].startswith("entry point (reinforce-example")


def test_entry_point_clashing_with_builtin_is_refused_and_the_builtin_stays(tmp_path, monkeypatch):
    # changed with plugin API 2: a clash refuses the entry point only, it no longer breaks the registry
    _fake_distribution(tmp_path, "grpo = reinforce_plugin:Reinforce")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert registry.names().count("grpo") == 1 and registry.get("grpo").__module__ == "algorithms.grpo"
    (line,) = registry.problems()
    assert line.startswith("algorithm 'grpo' from entry point (reinforce-example) refused: ")
    assert "duplicate algorithm name 'grpo'" in line


def _bench(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "bench.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )


def test_cli_algos_json_and_plugin_flag():
    import json

    out = _bench("algos", "--json", "--plugin", "reinforce_plugin", env_extra={"PYTHONPATH": str(EXAMPLES)})
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert {"sao", "grpo", "dapo", "ppo", "running-mean", "reinforce"} <= set(rows)
    assert rows["reinforce"]["source"] == "plugin reinforce_plugin"
    assert rows["sao"]["critic"] is True and rows["grpo"]["rollouts_per_prompt"] == 8


def test_cli_unknown_plugin_is_one_line_exit_2():
    out = _bench("algos", "--plugin", "no_such_module_xyz")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "cannot import plugin module" in out.stderr
    assert "Traceback" not in out.stderr


# ---- plugins that explain themselves: describe, provenance, `bench algos NAME`, `--check` ----------


def test_describe_shows_fields_presets_and_what_each_preset_changes():
    info = registry.describe("grpo")
    fields = {f["name"]: f for f in info["fields"]}
    assert (
        fields["clip_eps_high"]["type"] == "float"
        and fields["clip_eps_high"]["default"] == 0.2
        and fields["clip_eps_high"]["help"]
    )
    assert info["paper"].startswith("Shao et al.")
    dis = info["by_preset"]["dis"]
    assert dis["changes"] == {"importance": "dis"} and dis["needs"] == [] and dis["rollouts_per_prompt"] == 8
    assert info["by_preset"]["default"]["needs"] == ["old_logp"]
    assert registry.describe("sao")["by_preset"]["single-critic-update"]["critic"]["updates_per_step"] == 1


def test_provenance_of_builtins_plugins_and_entry_points(tmp_path, monkeypatch):
    assert registry.provenance("sao") == {
        "source": "built-in",
        "class": "algorithms.sao:SAO",
        "module": "algorithms.sao",
        "distribution": None,
        "version": None,
    }
    _fake_distribution(tmp_path, "reinforce = reinforce_plugin:Reinforce")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(EXAMPLES))
    registry.reset()  # re-read entry points
    source = registry.provenance("reinforce")
    assert (source["module"], source["distribution"], source["version"]) == (
        "reinforce_plugin",
        "reinforce-example",
        "0.1",
    )


def test_unknown_name_hints_at_plugins():
    with pytest.raises(registry.RegistryError, match=r"pass --plugin MODULE, or install its package"):
        registry.check("reinforce")


def test_cli_algos_name_explains_the_algorithm():
    out = _bench("algos", "sao")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for expected in (
        "sao: single rollout",
        "paper:    Hou, Li, Tang, Dong",
        "source:   built-in (algorithms.sao:SAO)",
        "critic:   updates_per_step=2, warmup_steps=10",
        "dis_eps_high",
        "float",
        "5.0",
        "coding                 dis_eps_low=0.8, dis_eps_high=3.0",
        "bench algos --check sao",
    ):
        assert expected in text, expected


def test_cli_check_passes_on_the_example_and_fails_one_line_per_problem(tmp_path):
    ok = _bench(
        "algos",
        "--check",
        "reinforce",
        "--plugin",
        "reinforce_plugin",
        env_extra={"PYTHONPATH": str(EXAMPLES)},
    )
    assert ok.returncode == 0 and ok.stdout.startswith("ok   reinforce: conforms"), ok.stdout + ok.stderr
    (tmp_path / "leaky_plugin.py").write_text(
        textwrap.dedent("""
        from reinforce_plugin import Reinforce
        from algorithms.base import LossOutput

        class Leaky(Reinforce):
            name = "leaky"

            def policy_loss(self, inp):
                loss = -(inp.advantages_B_T * inp.logp_B_T * inp.action_mask_B_T).sum()
                return LossOutput(loss, {})
    """)
    )
    path = f"{tmp_path}:{EXAMPLES}"
    bad = _bench("algos", "--check", "leaky", "--plugin", "leaky_plugin", env_extra={"PYTHONPATH": path})
    assert bad.returncode == 1
    lines = bad.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "FAIL leaky (leaky_plugin.Leaky): [default] policy_loss() returned nan"
    )
    assert "select_tokens" in lines[0] and "1 of 1 failed: leaky" in bad.stderr
