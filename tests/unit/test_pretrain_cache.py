"""The tiny base checkpoint's cache key: task arguments that shape demonstrations select a
different checkpoint; arguments that only change episodes (latency, runtime, drift schedule) do not."""

from __future__ import annotations

from bench.pretrain import base_checkpoint_path


def test_episode_only_arguments_share_the_base_checkpoint(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    plain = base_checkpoint_path("agent", {})
    assert base_checkpoint_path("agent", {"tool_latency": 0.5, "tool_latency_dist": "pareto"}) == plain
    assert base_checkpoint_path("agent", {"demo_error_rate": 0.0}) != plain
    assert base_checkpoint_path("swe", {"runtime": "local", "dataset": "swe-mini"}) == base_checkpoint_path(
        "swe", {}
    )
    assert base_checkpoint_path("drift", {"phase_every": 64}) == base_checkpoint_path("drift", {})
    assert base_checkpoint_path("arith", {"max_operands": 2}) != base_checkpoint_path("arith", {})
    assert plain.parent == tmp_path / "tiny" and plain.name.startswith("agent-")
