"""The learner: turns a batch of trajectories into optimizer steps for the policy and critic.

It supplies each plugin exactly the optional inputs it declares (`Algorithm.needs`) and never
looks at the algorithm's name. The same code runs in one process or on the ranks of a launch
(`bench.train.distributed`): every model is placed on this rank's device, in the run's
precision, sharded with FSDP2 where there are several ranks or bf16-mixed compute
(`bench.train.sharding`); every batch tensor is moved to that device before it meets a model
output (`LearnerBatch.placed`); advantages and losses see the global batch (`GlobalRows`).

Memory: a batch above the learner's token budget (`chunk_tokens`, by default from the model's
size, see `bench.models.logprobs.learner_chunk_tokens`) is never run through a model in one piece. Its
no-grad passes go chunk by chunk, and its updates take the loss's gradient with respect to the
model outputs (log-probs or values) from a no-grad pass, then back-propagate that gradient
through each chunk's forward in turn: by the chain rule the accumulated parameter gradient is
exactly the whole batch's, for any plugin loss, at the cost of one extra forward.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from typing import Any

import torch

from algorithms.base import Algorithm, CriticLossInputs, PolicyLossInputs
from algorithms.outputs import check_advantage_result, check_loss_output
from bench.errors import RunStopped
from bench.models.logprobs import learner_chunk_tokens, response_logprobs
from bench.models.memory import Precision
from bench.models.packing import BucketedBatch
from bench.train.batch import GlobalRows, LearnerBatch, build_batch
from bench.train.distributed import Dist, current_dist
from bench.train.metrics import logp_mismatch
from bench.train.models import LearnerModels, place_models
from bench.train.sharding import full_state, gradient_sync
from results.rundir import RunOutcome

__all__ = ["Learner", "LearnerBatch", "TrainingDiverged", "build_batch"]


class TrainingDiverged(RunStopped):
    """Raised after `nan_patience` consecutive non-finite losses."""

    outcome = RunOutcome.NON_FINITE


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
        chunk_tokens: int = 0,
        precision: Precision | str = Precision.FP32,
        activation_checkpointing: bool = False,
        dist: Dist | None = None,
    ) -> None:
        """The run config's fields of the same names (`bench.config.RunConfig`) set the keyword
        arguments in a run; `chunk_tokens`: padded tokens per forward/backward (0:
        `learner_chunk_tokens(policy)`); `dist`: this process's rank (default `current_dist()`)."""
        self.algo, self.grad_clip, self.minibatches = algo, grad_clip, minibatches
        self.chunk_tokens = chunk_tokens or learner_chunk_tokens(policy)
        self.temperature, self.nan_patience = temperature, nan_patience
        self.models: LearnerModels = place_models(
            algo, policy, Precision(precision), activation_checkpointing, dist or current_dist()
        )
        self.dist = self.models.dist
        self.policy, self.critic, self.ref = self.models.policy, self.models.critic, self.models.ref
        self.frozen_critic_params = self.models.frozen_critic_params
        self.policy_opt = torch.optim.AdamW(
            [p for p in self.policy.parameters() if p.requires_grad], lr=policy_lr, weight_decay=0.0
        )
        self.critic_opt = None
        if self.critic is not None:
            self.critic_opt = torch.optim.AdamW(
                [p for p in self.critic.parameters() if p.requires_grad], lr=critic_lr, weight_decay=0.0
            )
        self.step = 0  # learner steps taken (critic-only warmup steps included)
        self.version = 0  # policy version: number of policy optimizer updates
        self.nonfinite_in_a_row = 0
        self.nonfinite_total = 0
        self._advantage_problem: str | None = None  # non-finite advantages of this step, if any

    @property
    def unwrapped_policy(self) -> torch.nn.Module:
        """The policy module: transformers' model, with its config and parameter names (FSDP2
        shards it in place, so this is `policy`; read its weights with `full_policy_state`)."""
        return self.policy

    @property
    def unwrapped_critic(self) -> torch.nn.Module | None:
        """The critic module (`ValueModel`), or None."""
        return self.critic

    def full_policy_state(self) -> Iterator[tuple[str, torch.Tensor]]:
        """(name, full tensor) of the policy's state dict, transformers' names, on this rank's
        device: what an engine's weight push takes. Sharded weights are gathered one at a time,
        a collective: every rank iterates it to the end, in step."""
        return full_state(self.policy)

    def _no_grad_logp(self, model: torch.nn.Module, rows: BucketedBatch) -> torch.Tensor:
        with torch.no_grad():
            return rows.map_chunks(
                rows.token_chunks(self.chunk_tokens),
                lambda packed: response_logprobs(model, packed, temperature=self.temperature)[0],
            )

    def train_step(self, batch: LearnerBatch) -> dict[str, float]:
        """One learner step on a batch (this rank's share of the global batch): advantages, K
        critic updates, one policy update."""
        algo = self.algo
        batch = batch.placed(self.dist)
        view = GlobalRows(self.dist, batch)  # the global batch: what advantages and losses see
        traj = view.traj
        metrics: dict[str, float] = {}
        old_values_B_T = first_values_b_T = None
        start = time.perf_counter()
        critic_s = 0.0  # the critic's share of learner compute, as time (value passes and updates)
        if algo.critic is not None:  # values are the critic's; `needs` "values" implies a critic
            # the first critic update's forward, kept with its graph: its detached values are the
            # pre-update values the advantages need, so no separate no-grad value pass is run
            # (above the token budget it is a no-grad pass, chunk by chunk, and updates chunk too)
            chunks = batch.rows.token_chunks(self.chunk_tokens)
            with torch.no_grad() if len(chunks) > 1 else nullcontext():
                first_values_b_T = batch.rows.map_chunks(chunks, self.critic)  # [b, T] this rank's rows
            old_values_B_T = view.rows(first_values_b_T).detach() * view.action_mask_B_T  # [B, T]
            traj.values_B_T = old_values_B_T
            critic_s += time.perf_counter() - start
        adv = algo.advantages(traj)
        self._advantage_problem = check_advantage_result(algo, adv, traj)  # wrong shape: a one-line error
        metrics.update(adv.metrics)
        if algo.critic is not None:
            t0 = time.perf_counter()
            metrics.update(
                self._critic_updates(batch, view, first_values_b_T, old_values_B_T, adv.returns_B_T)
            )
            critic_s += time.perf_counter() - t0
        warmup = algo.critic is not None and self.step < algo.critic.warmup_steps
        if not warmup:
            metrics.update(self._policy_update(batch, view, adv.advantages_B_T))
        metrics["policy/warmup"] = float(warmup)
        metrics["time/critic_s"], metrics["time/learner_s"] = critic_s, time.perf_counter() - start
        self.step += 1
        return metrics

    def _critic_updates(
        self, batch: LearnerBatch, view: GlobalRows, first_values_b_T, old_values_B_T, returns_B_T
    ) -> dict[str, float]:
        out: dict[str, float] = {}
        rows = batch.rows
        chunks = rows.token_chunks(self.chunk_tokens)
        for k in range(self.algo.critic.updates_per_step):
            if len(chunks) == 1:
                values_b_T = first_values_b_T if k == 0 else rows.map(self.critic)  # [b, T]
            else:  # a leaf: the loss's gradient w.r.t. the values goes back through each chunk
                with torch.no_grad():
                    values_b_T = first_values_b_T if k == 0 else rows.map_chunks(chunks, self.critic)
                values_b_T = values_b_T.detach().requires_grad_(True)
            res = self.algo.critic_loss(
                CriticLossInputs(view.rows(values_b_T), old_values_B_T, returns_B_T, view.action_mask_B_T)
            )
            cause = check_loss_output(self.algo, "critic_loss", res)  # wrong type or shape: a one-line error
            cause = self._advantage_problem or cause
            grad_norm = self._optimize(
                res.loss,
                self.critic,
                self.critic_opt,
                self._chunked(rows, chunks, values_b_T, self.critic, self.critic),
                cause or f"{self.algo.name}.critic_loss",
            )
            out = {**res.metrics, "value/grad_norm": float("nan") if grad_norm is None else grad_norm}
        return out

    def _policy_update(
        self, batch: LearnerBatch, view: GlobalRows, advantages_B_T: torch.Tensor
    ) -> dict[str, float]:
        needs, rows = self.algo.needs, batch.rows
        b = rows.batch_size
        chunks = torch.chunk(torch.arange(b), min(self.minibatches, b))  # minibatch m: each rank's m-th
        # The old policy is the one before this step's first update. With a single minibatch its
        # log-probs are exactly the graded forward's, detached (as TRL does for one iteration),
        # so the extra no-grad forward is only needed when later minibatches see updated weights.
        separate_old = "old_logp" in needs and len(chunks) > 1
        old_logp = view.rows(self._no_grad_logp(self.policy, rows)) if separate_old else None
        ref_logp = view.rows(self._no_grad_logp(self.ref, rows)) if self.ref is not None else None
        sums: dict[str, float] = {}
        updated = False
        for chunk in chunks:
            rows_B = view.index(chunk).to(self.dist.device)  # this minibatch's rows of the global batch
            mb = rows if len(chunks) == 1 else rows.select(chunk)
            token_chunks = mb.token_chunks(self.chunk_tokens)
            with torch.no_grad() if len(token_chunks) > 1 else nullcontext():
                logp_b_T, entropy_b_T = mb.map_chunks(
                    token_chunks,
                    lambda packed: response_logprobs(
                        self.policy, packed, temperature=self.temperature, with_entropy=True
                    ),
                )
            if len(token_chunks) > 1:  # a leaf, as for the critic above
                logp_b_T = logp_b_T.detach().requires_grad_(True)
            logp_B_T = view.rows(logp_b_T)  # [B, T]
            if not sums:  # the pre-update policy against the rollout engine, on the first minibatch
                sums.update(
                    logp_mismatch(logp_B_T, view.rollout_logp_B_T[rows_B], view.action_mask_B_T[rows_B])
                )
            same_step_old = logp_B_T.detach() if "old_logp" in needs else None  # [B, T]
            res = self.algo.policy_loss(
                PolicyLossInputs(
                    logp_B_T=logp_B_T,
                    rollout_logp_B_T=view.rollout_logp_B_T[rows_B],
                    advantages_B_T=advantages_B_T[rows_B],
                    action_mask_B_T=view.action_mask_B_T[rows_B],
                    old_logp_B_T=old_logp[rows_B] if separate_old else same_step_old,
                    ref_logp_B_T=None if ref_logp is None else ref_logp[rows_B],
                    entropy_B_T=view.rows(entropy_b_T.detach()),
                    max_response_tokens=batch.traj.max_response_tokens,
                )
            )
            logp_only = lambda packed: response_logprobs(  # noqa: E731
                self.policy, packed, temperature=self.temperature
            )[0]
            chunked = self._chunked(mb, token_chunks, logp_b_T, self.policy, logp_only)
            cause = check_loss_output(self.algo, "policy_loss", res)  # wrong type or shape: a one-line error
            cause = self._advantage_problem or cause
            grad_norm = self._optimize(
                res.loss, self.policy, self.policy_opt, chunked, cause or f"{self.algo.name}.policy_loss"
            )
            updated |= grad_norm is not None
            step_metrics = {
                **res.metrics,
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
        outputs_b_T: torch.Tensor,
        model: torch.nn.Module,
        forward: Callable,
    ) -> Callable[[torch.Tensor], None] | None:
        """The backward of a loss over `outputs_b_T` (a leaf from a no-grad pass) run chunk by
        chunk through `forward` (a PackedBatch -> [b, T] function of the model), or None when the
        rows are one chunk and the plain backward applies. Gradients accumulate locally and are
        reduced across ranks once, on the last chunk (every rank runs as many chunks)."""
        if len(chunks) == 1:
            return None

        def backward(loss: torch.Tensor) -> None:
            (grad_b_T,) = torch.autograd.grad(loss, outputs_b_T, allow_unused=True)  # d loss / d outputs
            if grad_b_T is None:  # a loss that does not depend on the outputs: no gradient
                return
            for i, rows_in_chunk in enumerate(chunks):
                gradient_sync(model, i == len(chunks) - 1)
                out_b_T = rows.select(rows_in_chunk).map(forward)
                (out_b_T * grad_b_T[rows_in_chunk.to(grad_b_T.device)]).sum().backward()

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
        the others ran theirs, the gradient reduction would wait forever."""
        optimizer.zero_grad(set_to_none=True)
        finite = torch.isfinite(loss.detach()).float().reshape(1)
        if self.dist.world_size > 1:
            finite = (self.dist.sum(finite) >= self.dist.world_size).float()
        if not bool(finite.item()):
            return self._nonfinite(source)
        if backward is None:
            loss.backward()
        else:
            backward(loss)
        grad_norm = _as_float(torch.nn.utils.clip_grad_norm_(model.parameters(), self.grad_clip))
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
        """A checksum of the policy weights as every rank sees them (equal when the ranks are in
        step); a one-element list in single-process runs."""
        weights = [_full(p).detach().double().sum() for p in self.policy.parameters()]
        return [float(x) for x in self.dist.gather_objects([float(torch.stack(weights).sum())])]

    # ---- checkpoints (the models and optimizers: bench.train.checkpoints) ----------------------
    def state_dict(self) -> dict[str, Any]:
        """Counters and the algorithm's state (weights and optimizer states are saved with torch
        distributed checkpoint, `bench.train.checkpoints`)."""
        return {
            "step": self.step,
            "version": self.version,
            "nonfinite_total": self.nonfinite_total,
            "algorithm": self.algo.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned (and the optimizer states a checkpoint written
        before distributed checkpoints held in the same file)."""
        if "policy_opt" in state:
            self.policy_opt.load_state_dict(state["policy_opt"])
        if self.critic_opt is not None and state.get("critic_opt") is not None:
            self.critic_opt.load_state_dict(state["critic_opt"])
        self.step, self.version = state["step"], state["version"]
        self.nonfinite_total = state.get("nonfinite_total", 0)
        self.algo.load_state_dict(state.get("algorithm", {}))


def _full(tensor: torch.Tensor) -> torch.Tensor:
    """A sharded tensor gathered whole (a collective), a plain one as it is."""
    from torch.distributed.tensor import DTensor

    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def _as_float(norm: torch.Tensor) -> float:
    """A gradient norm as a float (FSDP2's is a DTensor: the same value on every rank)."""
    return float(_full(norm))
