"""`engine_sleep`: the colocated vLLM engine sleeps while the learner trains (sync mode) and
wakes before the weights move; refused elsewhere; vLLM's calls checked against its source."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench.config import RunConfig
from bench.config_checks import check_weight_sync
from bench.errors import UsageError
from bench.train import loop


class _Calls:
    def __init__(self) -> None:
        self.order: list[str] = []

    def sleep(self) -> None:
        self.order.append("sleep")

    def wake_up(self) -> None:
        self.order.append("wake_up")

    def train_step(self, batch) -> dict:
        self.order.append("train_step")
        return {"loss": 1.0}


@pytest.mark.parametrize(
    ("asleep", "order"), [(True, ["sleep", "train_step", "wake_up"]), (False, ["train_step"])]
)
def test_the_engine_sleeps_only_around_the_learners_step(asleep, order):
    calls = _Calls()
    got = loop._train_step(SimpleNamespace(engine_sleep=asleep), calls, calls, batch=None)
    assert got == {"loss": 1.0} and calls.order == order


def test_a_failed_step_still_wakes_the_engine():
    calls = _Calls()
    calls.train_step = lambda batch: (_ for _ in ()).throw(RuntimeError("boom"))
    with pytest.raises(RuntimeError, match="boom"):
        loop._train_step(SimpleNamespace(engine_sleep=True), calls, calls, batch=None)
    assert calls.order == ["sleep", "wake_up"]


@pytest.mark.parametrize(("engine", "mode"), [("torch", "sync"), ("vllm", "async"), ("http", "sync")])
def test_sleep_elsewhere_than_the_colocated_vllm_engine_in_sync_mode_is_refused(engine, mode):
    config = RunConfig(algo="grpo", task="arith", engine=engine, mode=mode, engine_sleep=True)
    with pytest.raises(UsageError, match="engine_sleep: the colocated vllm engine sleeps in sync mode only"):
        check_weight_sync(config)


def test_vllms_sleep_mode_calls_exist_as_used():
    from tests.unit.bench.test_vllm_routes import vllm_source

    engine = (vllm_source() / "v1/engine/llm_engine.py").read_text()
    assert "def sleep(\n        self, level: int = 1" in engine and "def wake_up(self, tags" in engine
    assert "enable_sleep_mode: bool" in (vllm_source() / "engine/arg_utils.py").read_text()
