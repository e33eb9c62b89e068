"""The learner: turns a batch of trajectories into optimizer steps for the policy and critic.

It supplies each plugin exactly the optional inputs it declares (`Algorithm.needs`) and never
looks at the algorithm's name. accelerate wraps models and optimizers, so the same code runs
single-process (default) or data-parallel under `accelerate launch`.

Memory: a batch above the learner's token budget (`chunk_tokens`, by default from the model's
size, see `bench.models.logprobs.learner_chunk_tokens`) is never run through a model in one piece. Its
no-grad passes go chunk by chunk, and its updates take the loss's gradient with respect to the
model outputs (log-probs or values) from a no-grad pass, then back-propagate that gradient
through each chunk's forward in turn: by the chain rule the accumulated parameter gradient is
exactly the whole batch's, for any plugin loss, at the cost of one extra forward.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from algorithms.base import Algorithm, CriticLossInputs, PolicyLossInputs, Trajectories
from algorithms.outputs import check_advantage_result, check_loss_output
from bench.errors import RunStopped
from bench.models.critic import ValueModel, freeze_attention
from bench.models.logprobs import learner_chunk_tokens, response_logprobs
from bench.models.packing import BucketedBatch
from bench.rollout.episode import Trajectory
from bench.train.metrics import logp_mismatch
from results.rundir import RunOutcome


class TrainingDiverged(RunStopped):
    """Raised after `nan_patience` consecutive non-finite losses."""

    outcome = RunOutcome.NON_FINITE


@dataclass
class LearnerBatch:
    """Tensors of one batch of trajectories, in the learner's layout."""

    rows: BucketedBatch  # the token rows, in length buckets (every forward goes through rows.map)
    action_mask_B_T: torch.Tensor  # [B, T] float
    rollout_logp_B_T: torch.Tensor  # [B, T]
    traj: Trajectories


def _pad(rows: list[list[float]], length: int, value: float, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor([r + [value] * (length - len(r)) for r in rows], dtype=dtype)


def build_batch(
    trajectories: list[Trajectory], pad_id: int, max_response_tokens: int, length_buckets: bool = True
) -> LearnerBatch:
    """Pack trajectories (groups contiguous, in order) into learner tensors; with
    `length_buckets` the forwards run per bucket of similar lengths (same results, less padding)."""
    rows = BucketedBatch.build(
        [t.prompt_ids for t in trajectories], [t.response_ids for t in trajectories], pad_id, length_buckets
    )
    T = rows.response_len
    action_mask_B_T = _pad([list(map(float, t.action_mask)) for t in trajectories], T, 0.0, torch.float32)
    traj = Trajectories(
        rewards_B=torch.tensor([t.reward for t in trajectories], dtype=torch.float32),
        action_mask_B_T=action_mask_B_T,
        response_mask_B_T=_pad([[1.0] * len(t.response_ids) for t in trajectories], T, 0.0, torch.float32),
        prompt_keys=[t.prompt_key for t in trajectories],
        max_response_tokens=max_response_tokens,
    )
    return LearnerBatch(
        rows=rows,
        action_mask_B_T=action_mask_B_T,
        rollout_logp_B_T=_pad([t.rollout_logp for t in trajectories], T, 0.0, torch.float32),
        traj=traj,
    )


def make_accelerator() -> Any:
    """The accelerate `Accelerator` every learner uses: CPU unless CUDA is present.

    DDP's buffer broadcast is off. It would run a collective at every forward, and ranks do
    not run the same number of forwards: each packs its own rollouts into however many length
    buckets they need. Ranks with different bucket counts then pair one rank's broadcast with
    the other's gradient all-reduce, which hangs or aborts the run. A causal LM's buffers are
    constants (rotary frequencies, position ids), equal on every rank without a broadcast.
    """
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs

    return Accelerator(
        cpu=not torch.cuda.is_available(),
        kwargs_handlers=[DistributedDataParallelKwargs(broadcast_buffers=False)],
    )


class Learner:
    """Policy (and critic) optimisation for one algorithm."""

    def __init__(
        self,
        algo: Algorithm,
        policy: torch.nn.Module,
        *,
        policy_lr: float,
        critic_lr: float,
        grad_clip: float = 1.0,
        minibatches: int = 1,
        temperature: float = 1.0,
        nan_patience: int = 3,
        accelerator: Any | None = None,
        chunk_tokens: int = 0,
    ) -> None:
        """The run config's fields of the same names (`bench.config.RunConfig`) set the keyword
        arguments in a run; `chunk_tokens`: padded tokens per forward/backward (0:
        `learner_chunk_tokens(policy)`); `accelerator`: default `make_accelerator()`."""
        self.algo, self.grad_clip, self.minibatches = algo, grad_clip, minibatches
        self.chunk_tokens = chunk_tokens or learner_chunk_tokens(policy)
        self.temperature, self.nan_patience = temperature, nan_patience
        self.accelerator = accelerator or make_accelerator()
        self.ref = None
        if "ref_logp" in algo.needs:  # a frozen copy of the initial policy
            self.ref = copy.deepcopy(policy).eval().requires_grad_(False)
        opt = torch.optim.AdamW(
            [p for p in policy.parameters() if p.requires_grad], lr=policy_lr, weight_decay=0.0
        )
        self.policy, self.policy_opt = self.accelerator.prepare(policy, opt)
        self.critic = self.critic_opt = None
        self.frozen_critic_params = 0
        if algo.critic is not None:
            critic = ValueModel.from_policy(self.unwrapped_policy)
            if algo.critic.freeze_attention:
                self.frozen_critic_params = freeze_attention(critic)
            c_opt = torch.optim.AdamW(
                [p for p in critic.parameters() if p.requires_grad], lr=critic_lr, weight_decay=0.0
            )
            self.critic, self.critic_opt = self.accelerator.prepare(critic, c_opt)
        self.step = 0  # learner steps taken (critic-only warmup steps included)
        self.version = 0  # policy version: number of policy optimizer updates
        self.nonfinite_in_a_row = 0
        self.nonfinite_total = 0
        self._advantage_problem: str | None = None  # non-finite advantages of this step, if any

    @property
    def unwrapped_policy(self) -> torch.nn.Module:
        """The policy without accelerate's wrappers (for saving and weight pushes)."""
        return self.accelerator.unwrap_model(self.policy)

    @property
    def unwrapped_critic(self) -> ValueModel | None:
        """The critic without wrappers, or None."""
        return None if self.critic is None else self.accelerator.unwrap_model(self.critic)

    def _no_grad_logp(self, model: torch.nn.Module, rows: BucketedBatch) -> torch.Tensor:
        with torch.no_grad():
            return rows.map_chunks(
                rows.token_chunks(self.chunk_tokens),
                lambda packed: response_logprobs(model, packed, temperature=self.temperature)[0],
            )

    def train_step(self, batch: LearnerBatch) -> dict[str, float]:
        """One learner step on a batch: advantages, K critic updates, one policy update."""
        algo, traj = self.algo, batch.traj
        metrics: dict[str, float] = {}
        old_values_B_T = first_values_B_T = None
        start = time.perf_counter()
        critic_s = 0.0  # the critic's share of learner compute, as time (value passes and updates)
        if algo.critic is not None:  # values are the critic's; `needs` "values" implies a critic
            # the first critic update's forward, kept with its graph: its detached values are the
            # pre-update values the advantages need, so no separate no-grad value pass is run
            # (above the token budget it is a no-grad pass, chunk by chunk, and updates chunk too)
            chunks = batch.rows.token_chunks(self.chunk_tokens)
            with torch.no_grad() if len(chunks) > 1 else nullcontext():
                first_values_B_T = batch.rows.map_chunks(chunks, self.critic)  # [B, T]
            old_values_B_T = first_values_B_T.detach() * batch.action_mask_B_T  # [B, T]
            traj.values_B_T = old_values_B_T
            critic_s += time.perf_counter() - start
        adv = algo.advantages(traj)
        self._advantage_problem = check_advantage_result(algo, adv, traj)  # wrong shape: a one-line error
        metrics.update(adv.metrics)
        if algo.critic is not None:
            t0 = time.perf_counter()
            metrics.update(self._critic_updates(batch, first_values_B_T, old_values_B_T, adv.returns_B_T))
            critic_s += time.perf_counter() - t0
        warmup = algo.critic is not None and self.step < algo.critic.warmup_steps
        if not warmup:
            metrics.update(self._policy_update(batch, adv.advantages_B_T))
        metrics["policy/warmup"] = float(warmup)
        metrics["time/critic_s"], metrics["time/learner_s"] = critic_s, time.perf_counter() - start
        self.step += 1
        return metrics

    def _critic_updates(
        self, batch: LearnerBatch, first_values_B_T, old_values_B_T, returns_B_T
    ) -> dict[str, float]:
        out: dict[str, float] = {}
        rows = batch.rows
        chunks = rows.token_chunks(self.chunk_tokens)
        for k in range(self.algo.critic.updates_per_step):
            if len(chunks) == 1:
                values_B_T = first_values_B_T if k == 0 else rows.map(self.critic)  # [B, T]
            else:  # a leaf: the loss's gradient w.r.t. the values goes back through each chunk
                with torch.no_grad():
                    values_B_T = first_values_B_T if k == 0 else rows.map_chunks(chunks, self.critic)
                values_B_T = values_B_T.detach().requires_grad_(True)
            res = self.algo.critic_loss(
                CriticLossInputs(values_B_T, old_values_B_T, returns_B_T, batch.action_mask_B_T)
            )
            cause = check_loss_output(self.algo, "critic_loss", res)  # wrong type or shape: a one-line error
            cause = self._advantage_problem or cause
            grad_norm = self._optimize(
                res.loss,
                self.critic,
                self.critic_opt,
                self._chunked(rows, chunks, values_B_T, self.critic, self.critic),
                cause or f"{self.algo.name}.critic_loss",
            )
            out = {**res.metrics, "value/grad_norm": float("nan") if grad_norm is None else grad_norm}
        return out

    def _policy_update(self, batch: LearnerBatch, advantages_B_T: torch.Tensor) -> dict[str, float]:
        needs, rows = self.algo.needs, batch.rows
        B = rows.batch_size
        chunks = torch.chunk(torch.arange(B), min(self.minibatches, B))
        # The old policy is the one before this step's first update. With a single minibatch its
        # log-probs are exactly the graded forward's, detached (as TRL does for one iteration),
        # so the extra no-grad forward is only needed when later minibatches see updated weights.
        separate_old = "old_logp" in needs and len(chunks) > 1
        old_logp = self._no_grad_logp(self.policy, rows) if separate_old else None
        ref_logp = self._no_grad_logp(self.ref, rows) if self.ref is not None else None
        sums: dict[str, float] = {}
        updated = False
        for chunk in chunks:
            mb = rows if len(chunks) == 1 else rows.select(chunk)
            token_chunks = mb.token_chunks(self.chunk_tokens)
            with torch.no_grad() if len(token_chunks) > 1 else nullcontext():
                logp_B_T, entropy_B_T = mb.map_chunks(
                    token_chunks,
                    lambda packed: response_logprobs(
                        self.policy, packed, temperature=self.temperature, with_entropy=True
                    ),
                )
            if len(token_chunks) > 1:  # a leaf, as for the critic above
                logp_B_T = logp_B_T.detach().requires_grad_(True)
            same_step_old = logp_B_T.detach() if "old_logp" in needs else None  # [B, T]
            res = self.algo.policy_loss(
                PolicyLossInputs(
                    logp_B_T=logp_B_T,
                    rollout_logp_B_T=batch.rollout_logp_B_T[chunk],
                    advantages_B_T=advantages_B_T[chunk],
                    action_mask_B_T=batch.action_mask_B_T[chunk],
                    old_logp_B_T=old_logp[chunk] if separate_old else same_step_old,
                    ref_logp_B_T=None if ref_logp is None else ref_logp[chunk],
                    entropy_B_T=entropy_B_T.detach(),
                    max_response_tokens=batch.traj.max_response_tokens,
                )
            )
            logp_only = lambda packed: response_logprobs(  # noqa: E731
                self.policy, packed, temperature=self.temperature
            )[0]
            chunked = self._chunked(mb, token_chunks, logp_B_T, self.policy, logp_only)
            cause = check_loss_output(self.algo, "policy_loss", res)  # wrong type or shape: a one-line error
            cause = self._advantage_problem or cause
            grad_norm = self._optimize(
                res.loss, self.policy, self.policy_opt, chunked, cause or f"{self.algo.name}.policy_loss"
            )
            updated |= grad_norm is not None
            step_metrics = {
                **res.metrics,
                **logp_mismatch(logp_B_T, batch.rollout_logp_B_T[chunk], batch.action_mask_B_T[chunk]),
                "policy/grad_norm": float("nan") if grad_norm is None else grad_norm,
            }
            for k, v in step_metrics.items():  # mean over minibatches (NaN marks a skipped one)
                sums[k] = sums.get(k, 0.0) + v / len(chunks)
        if updated:
            self.version += 1
        return sums

    def _chunked(
        self,
        rows: BucketedBatch,
        chunks: list[torch.Tensor],
        outputs_B_T: torch.Tensor,
        model: torch.nn.Module,
        forward: Callable,
    ) -> Callable[[torch.Tensor], None] | None:
        """The backward of a loss over `outputs_B_T` (a leaf from a no-grad pass) run chunk by
        chunk through `forward` (a PackedBatch -> [b, T] function of the model), or None when the
        rows are one chunk and the plain backward applies. Gradients accumulate locally and are
        all-reduced once, on each rank's last chunk, so ranks with different chunk counts agree."""
        if len(chunks) == 1:
            return None

        def backward(loss: torch.Tensor) -> None:
            (grad_B_T,) = torch.autograd.grad(loss, outputs_B_T, allow_unused=True)  # d loss / d outputs
            if grad_B_T is None:  # a loss that does not depend on the outputs: no gradient
                return
            for i, rows_in_chunk in enumerate(chunks):
                last = i == len(chunks) - 1
                with nullcontext() if last else self.accelerator.no_sync(model):
                    out_b_T = rows.select(rows_in_chunk).map(forward)
                    self.accelerator.backward((out_b_T * grad_B_T[rows_in_chunk.to(grad_B_T.device)]).sum())

        return backward

    def _optimize(
        self,
        loss: torch.Tensor,
        model,
        optimizer,
        backward: Callable[[torch.Tensor], None] | None = None,
        source: str = "the loss",
    ) -> float | None:
        """Backward (`backward(loss)` when given, e.g. a chunked one), clip, step; skip (and
        count) a non-finite loss or gradient, noting `source` (the plugin method, or what made its
        loss non-finite) for the message that stops a diverged run.

        The finiteness check is agreed across ranks: if one rank skipped its backward while
        the others ran theirs, the gradient all-reduce would wait forever."""
        optimizer.zero_grad(set_to_none=True)
        finite = torch.isfinite(loss.detach()).float().reshape(1)
        if self.accelerator.num_processes > 1:
            finite = self.accelerator.reduce(finite.to(self.accelerator.device), reduction="sum")
            finite = (finite >= self.accelerator.num_processes).float()
        if not bool(finite.item()):
            return self._nonfinite(source)
        if backward is None:
            self.accelerator.backward(loss)
        else:
            backward(loss)
        grad_norm = float(self.accelerator.clip_grad_norm_(model.parameters(), self.grad_clip))
        if not math.isfinite(grad_norm):
            optimizer.zero_grad(set_to_none=True)
            return self._nonfinite(f"a non-finite gradient of {source}")
        optimizer.step()
        self.nonfinite_in_a_row = 0
        return grad_norm

    def _nonfinite(self, cause: str) -> None:
        self.nonfinite_in_a_row += 1
        self.nonfinite_total += 1
        if self.nonfinite_in_a_row >= self.nan_patience:
            raise TrainingDiverged(
                f"{self.nonfinite_in_a_row} consecutive non-finite losses/gradients at step {self.step}; "
                f"stopping (lower the learning rate or check the reward scale); last from: {cause}"
            )
        return None

    def policy_checksums(self) -> list[float]:
        """A checksum of the policy weights on every rank (equal when data-parallel ranks are
        in sync); a one-element list in single-process runs."""
        total = torch.stack([p.detach().double().sum() for p in self.unwrapped_policy.parameters()]).sum()
        total = total.reshape(1).to(self.accelerator.device)
        return [float(x) for x in self.accelerator.gather(total).cpu()]

    # ---- checkpoints ----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Optimizer states and counters (model weights are saved with save_pretrained)."""
        return {
            "policy_opt": self.policy_opt.state_dict(),
            "critic_opt": None if self.critic_opt is None else self.critic_opt.state_dict(),
            "step": self.step,
            "version": self.version,
            "nonfinite_total": self.nonfinite_total,
            "algorithm": self.algo.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        self.policy_opt.load_state_dict(state["policy_opt"])
        if self.critic_opt is not None and state.get("critic_opt") is not None:
            self.critic_opt.load_state_dict(state["critic_opt"])
        self.step, self.version = state["step"], state["version"]
        self.nonfinite_total = state.get("nonfinite_total", 0)
        self.algo.load_state_dict(state.get("algorithm", {}))
