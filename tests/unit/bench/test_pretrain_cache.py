"""The tiny base checkpoint's cache key: task arguments that shape demonstrations select a
different checkpoint; arguments that only change episodes (latency, runtime, drift schedule) do not."""

from __future__ import annotations

from bench.models.cache import base_checkpoint_path


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
    default = base_checkpoint_path("arith", {"max_operands": 12})  # spelled out: same base
    assert default == base_checkpoint_path("arith", {})
    assert plain.parent == tmp_path / "tiny" and plain.name.startswith("agent-")


def test_recipe_batch_size_comes_from_the_task_and_the_cli_guards_the_cache(monkeypatch, tmp_path):
    import argparse

    import pytest

    from bench.commands import pretrain as pretrain_command
    from bench.errors import UsageError
    from bench.models import pretrain as pretrain_module
    from bench.models.recipes import recipe_for

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    seen = {}
    monkeypatch.setattr(
        pretrain_module, "_sample_batch", lambda ex, b, size, rng: seen.setdefault("size", size) and ex[:size]
    )
    info = pretrain_module.pretrain("arith", {}, steps=1, progress=False)
    assert info["batch_size"] == seen["size"] == recipe_for("arith").pretrain_batch_size
    assert recipe_for("swe").pretrain_batch_size < recipe_for("arith").pretrain_batch_size

    parser = argparse.ArgumentParser()
    pretrain_command.add_arguments(parser)
    for argv, message in (
        (["--batch-size", "8"], "--batch-size other than the arith recipe's 64 needs --out"),
        (["--batch-size", "0"], "--batch-size must be >= 1"),
        (["--steps", "5"], "--steps other than the arith recipe's 1000 needs --out"),
        (["--precision", "bf16"], "--precision other than the arith recipe's fp32 needs --out"),
    ):
        with pytest.raises(UsageError, match=message):
            pretrain_command.run(parser.parse_args(argv))


def test_a_task_recipe_change_selects_a_new_base_checkpoint(monkeypatch, tmp_path):
    import dataclasses

    from bench.models import recipes

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    before = base_checkpoint_path("swe", {})
    longer = dataclasses.replace(
        recipes.RECIPES["swe"], pretrain_steps=recipes.RECIPES["swe"].pretrain_steps + 1
    )
    monkeypatch.setitem(recipes.RECIPES, "swe", longer)
    assert base_checkpoint_path("swe", {}) != before


def test_bf16_pretraining_saves_a_float32_model_close_to_the_float32_recipe(tmp_path):
    """Two steps under bfloat16 autocast move the weights like float32 steps do, up to the
    autocast's rounding; the saved model is float32 with the tiny model's own attention."""
    import pytest
    import torch
    from transformers import AutoModelForCausalLM

    from bench.models import pretrain as pretrain_module
    from bench.models.tiny import new_tiny_model

    params = {}
    for precision in ("fp32", "bf16"):
        out = tmp_path / precision
        info = pretrain_module.pretrain(
            "arith", {}, steps=2, batch_size=8, precision=precision, n_examples=64, out=out, progress=False
        )
        assert info["precision"] == precision
        model = AutoModelForCausalLM.from_pretrained(out)
        assert model.config._attn_implementation == "sdpa"
        params[precision] = torch.cat([p.detach().flatten() for p in model.parameters()])
        assert params[precision].dtype == torch.float32
    start = torch.cat([p.detach().flatten() for p in new_tiny_model(0)[0].parameters()])
    step_bf16, step_fp32 = params["bf16"] - start, params["fp32"] - start
    # autocast took effect (the updates differ), and the bf16 update is the float32 one up to
    # rounding: AdamW's normalised steps (~lr each) mostly keep their size and sign
    assert not torch.equal(step_bf16, step_fp32)
    assert torch.nn.functional.cosine_similarity(step_bf16, step_fp32, dim=0) > 0.99  # measured 0.998
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16"):
        pretrain_module.pretrain("arith", {}, steps=1, precision="fp16", progress=False)


def test_a_changed_default_selects_a_new_base_checkpoint(monkeypatch, tmp_path):
    """A base cached under an old default must not be reused once the default changes."""
    from envs import registry
    from envs.online import DriftTask

    class OldDrift(DriftTask):
        def __init__(self, answer_share: float = 0.5, **args):
            super().__init__(answer_share=answer_share, **args)

    class NewDrift(OldDrift):
        def __init__(self, answer_share: float = 0.3, **args):
            super().__init__(answer_share=answer_share, **args)

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(registry, "get", lambda name: OldDrift)
    old = base_checkpoint_path("drift", {})
    assert base_checkpoint_path("drift", {"answer_share": 0.5}) == old
    monkeypatch.setattr(registry, "get", lambda name: NewDrift)
    assert base_checkpoint_path("drift", {}) != old
    assert base_checkpoint_path("drift", {"answer_share": 0.5}) == old


def test_bench_run_pretrains_a_missing_base_once_and_honours_no_progress(monkeypatch, tmp_path):
    """The run command makes the base before training (on the main rank only), and --no-progress
    reaches the pretraining bar, so a log of a first run is not flooded with it."""
    import pytest

    from bench.cli import main
    from bench.models import pretrain as pretrain_module
    from bench.train import loop

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    calls = []

    def fake_pretrain(task, task_args, seed=0, out=None, progress=True, **_):
        calls.append((task, progress))
        raise SystemExit(0)  # stop before training: only the call matters here

    monkeypatch.setattr(pretrain_module, "pretrain", fake_pretrain)
    monkeypatch.setattr(loop, "train", lambda *a, **k: pytest.fail("trained before the base existed"))
    for flag, progress in (["--no-progress"], False), ([], True):
        with pytest.raises(SystemExit):
            main(
                [
                    "run",
                    "--algo",
                    "sao",
                    "--task",
                    "arith",
                    "--out",
                    str(tmp_path / f"run{progress}"),
                    *flag,
                    "--set",
                    "task.max_operands=3",
                ]  # not the shipped base's arguments: a missing base
            )
        assert calls[-1] == ("arith", progress)
