"""The learner's precision and memory settings on CPU: bf16-mixed (FSDP2's MixedPrecisionPolicy in
a one-rank process group; CPU runs bfloat16 matmuls) keeps float32 master weights, gradients and
optimizer state and gives gradients close to float32's; activation checkpointing gives the same
gradients as none."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from algorithms import registry
from bench.models.logprobs import response_logprobs
from bench.models.tiny import new_tiny_model
from bench.train import distributed
from bench.train.learner import Learner, build_batch
from tests.unit.bench.test_learner_old_logp import _trajectories

BF16_GRAD_TOLERANCE = 0.05
"""Relative L2 distance of a bf16-mixed gradient (all parameters of a model, one vector) from the
float32 one on the tiny model: bfloat16 keeps 8 bits of mantissa (a relative rounding of 2^-9
per operation); measured 0.01-0.02 here."""


@pytest.fixture(autouse=True)
def one_rank_group_is_dropped_after_each_test():
    """bf16-mixed makes a one-rank process group in this process: drop it afterwards."""
    yield
    if dist.is_initialized():
        dist.destroy_process_group()
    distributed._current = None


def _full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _recorded_step(algo_name: str, **settings) -> tuple[Learner, dict[str, list[torch.Tensor]]]:
    """A learner after one step, and the gradients of each model at its optimizer steps."""
    torch.manual_seed(0)
    policy, tokenizer = new_tiny_model(0)
    batch = build_batch(_trajectories(tokenizer), tokenizer.pad_token_id, 6)
    with torch.no_grad():  # the engine's log-probs: the initial policy's own (else SAO's DIS masks all)
        batch.rollout_logp_B_T = batch.rows.map(lambda packed: response_logprobs(policy, packed)[0])
    cls = registry.get(algo_name)
    fields = cls.Config.__dataclass_fields__
    extra = {k: v for k, v in {"group_size": 4, "critic_warmup_steps": 0}.items() if k in fields}
    learner = Learner(cls(cls.Config(**extra)), policy.train(), policy_lr=1e-3, critic_lr=1e-3, **settings)
    grads: dict[str, list[torch.Tensor]] = {"policy": [], "critic": []}
    for name, model, opt in (
        ("policy", learner.policy, learner.policy_opt),
        ("critic", learner.critic, learner.critic_opt),
    ):
        if opt is None:
            continue
        step = opt.step

        def recording(*a, _step=step, _model=model, _name=name, **k):
            grads[_name].append(
                torch.cat(
                    [_full(p.grad).float().flatten() for p in _model.parameters() if p.grad is not None]
                )
            )
            return _step(*a, **k)

        opt.step = recording
    learner.train_step(batch)
    return learner, grads


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("algo", ["grpo", "sao"])
def test_bf16_mixed_keeps_fp32_state_and_fp32_like_gradients(algo):
    fp32, fp32_grads = _recorded_step(algo)
    bf16, bf16_grads = _recorded_step(algo, precision="bf16-mixed")
    assert bf16.models.sharded and not fp32.models.sharded
    for model, opt in ((bf16.policy, bf16.policy_opt), (bf16.critic, bf16.critic_opt)):
        if model is None:
            continue
        assert {p.dtype for p in model.parameters()} == {torch.float32}  # master weights
        moments = [v for state in opt.state.values() for k, v in state.items() if k.startswith("exp_avg")]
        assert moments and {m.dtype for m in moments} == {torch.float32}
    for name in ("policy", "critic"):
        assert len(bf16_grads[name]) == len(fp32_grads[name])
        for got, want in zip(bf16_grads[name], fp32_grads[name]):
            assert got.dtype == torch.float32
            distance = _relative(got, want)
            assert 0 < distance < BF16_GRAD_TOLERANCE, (name, distance)  # > 0: bf16 really ran


@pytest.mark.parametrize("precision", ["fp32", "bf16-mixed"])
def test_activation_checkpointing_gives_the_same_gradients(precision):
    _, plain = _recorded_step("sao", precision=precision)
    _, checkpointed = _recorded_step("sao", precision=precision, activation_checkpointing=True)
    for name in ("policy", "critic"):
        assert plain[name] and len(plain[name]) == len(checkpointed[name])
        for got, want in zip(checkpointed[name], plain[name]):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
