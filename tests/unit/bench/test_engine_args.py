"""The vllm engine's options from the run config (`engine_args`): parsing, checking against a
stand-in of vLLM's `EngineArgs`, the harness's defaults, the multi-GPU launcher (no vLLM needed)."""

import dataclasses

import pytest

from bench.config import build_config
from bench.config_values import parse_set_options
from bench.engines.vllm_args import DEFAULTS, check_engine_args, engine_kwargs, launcher_args
from bench.errors import UsageError


@dataclasses.dataclass
class EngineArgs:  # the fields of vLLM's EngineArgs these tests need
    model: str = ""
    dtype: str = "auto"
    gpu_memory_utilization: float = 0.9
    enforce_eager: bool = False
    enable_prefix_caching: bool | None = None
    async_scheduling: bool = False
    max_num_batched_tokens: int | None = None
    distributed_executor_backend: str | None = None


FIELDS = {f.name: f for f in dataclasses.fields(EngineArgs)}


def test_set_and_toml_reach_engine_args():
    assert parse_set_options(
        ["engine_args.gpu_memory_utilization=0.4", "engine_args.enforce_eager=false"]
    ) == {"engine_args": {"gpu_memory_utilization": 0.4, "enforce_eager": False}}
    with pytest.raises(UsageError, match="did you mean 'engine_args'"):
        parse_set_options(["engine_arg.x=1"])
    config = build_config({"engine_args": {"a": 1}}, {"engine_args": {"b": 2}}, {"engine": "vllm"})
    assert config.engine_args == {"a": 1, "b": 2}  # merged key by key (names unchecked without vLLM)


def test_checked_against_vllm_options():
    args = {"gpu_memory_utilization": "0.4", "enforce_eager": "false", "max_num_batched_tokens": 4096}
    assert check_engine_args("vllm", args, FIELDS) == {
        "gpu_memory_utilization": 0.4,
        "enforce_eager": False,
        "max_num_batched_tokens": 4096,
    }
    with pytest.raises(UsageError, match=r"engine_args.gpu_memory_utilisation: not an option .*did you mean"):
        check_engine_args("vllm", {"gpu_memory_utilisation": 0.4}, FIELDS)
    with pytest.raises(UsageError, match=r"must be in \(0, 1\], got 1.5"):
        check_engine_args("vllm", {"gpu_memory_utilization": 1.5}, FIELDS)
    with pytest.raises(UsageError, match="engine_args.max_num_seqs: set by the harness .set engine_slots"):
        check_engine_args("vllm", {"max_num_seqs": 8}, FIELDS)
    with pytest.raises(UsageError, match="engine_args.enforce_eager: expected true or false"):
        check_engine_args("vllm", {"enforce_eager": "maybe"}, FIELDS)
    with pytest.raises(
        UsageError, match="options of the vllm engine .gpu_memory_utilization.; engine 'torch'"
    ):
        check_engine_args("torch", {"gpu_memory_utilization": 0.4}, FIELDS)
    assert check_engine_args("torch", {}) == {}


def test_engine_kwargs_defaults_then_user(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    args = engine_kwargs("/m", "float32", 16, 1024, {"enforce_eager": False}, FIELDS)
    assert args["dtype"] == "float32" and args["max_num_seqs"] == 16 and args["max_model_len"] == 1024
    assert args["logprobs_mode"] == "processed_logprobs" and args["async_scheduling"] is False
    assert (
        args["enforce_eager"] is False
        and args["gpu_memory_utilization"] == DEFAULTS["gpu_memory_utilization"]
    )
    assert "distributed_executor_backend" not in args


def test_external_launcher_under_several_processes(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    assert launcher_args(FIELDS) == {"distributed_executor_backend": "external_launcher", "seed": 3}
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert launcher_args(FIELDS) == {}


def test_torch_engine_refuses_engine_args(tiny_model):
    from bench.engines import make_engine

    model, tok = tiny_model
    with pytest.raises(UsageError, match="engine 'torch' takes none"):
        make_engine("torch", model, tok, engine_args={"gpu_memory_utilization": 0.4})


@pytest.fixture
def tiny_model():
    from bench.models.tiny import new_tiny_model

    return new_tiny_model(seed=0)
