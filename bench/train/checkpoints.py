"""Checkpoints of a run, written by every rank together, readable on any number of ranks.

A checkpoint directory (`results.rundir` publishes it atomically, with a manifest) holds:

- `state/`: torch distributed checkpoint (DCP) of the learner's models and optimizers, from
  `get_state_dict` (so parameter and optimizer-state names are the models' own): the policy
  and its AdamW state, the critic and its AdamW state, the frozen reference model. Each rank
  writes its own shards; `dcp.load` reshards on load, so a run saved on 2 ranks resumes on 1 or
  on 4, and a one-process run writes the same layout (one shard).
- `policy/`: the policy in transformers format with its tokenizer (weights gathered whole on
  rank 0): what `bench eval --model RUN_DIR`, comparisons and sweeps load (`export_policy`
  writes one on demand anywhere; `load_critic` reads the critic back as a plain module).

A LoRA run (`bench.models.lora`, one process) keeps only what trains: `state/` holds the
adapters, the value head and their optimizer states (no frozen base, no reference: both come
back from the model spec), and `policy/` is the adapter in peft's format.
- `learner.pt`: counters (step, policy version, skipped steps) and the algorithm's state;
  `consumption.json`: the budget spent so far (`bench.train.budget.Consumption`).

A checkpoint written before this layout (`critic/` in transformers format, optimizer states in
learner.pt, no `state/`) still resumes in one process.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint.api import CheckpointException

from bench.models import lora
from bench.train.budget import Consumption
from bench.train.learner import Learner
from bench.train.sharding import full_state
from results.files import as_fault
from results.rundir import RunDir

STATE_DIR = "state"
POLICY_DIR = "policy"


@contextmanager
def _one_process_is_meant() -> Iterator[None]:
    """Quiet DCP's warning that it "assumes" a single process: a one-process learner saves and
    loads without a process group on purpose (the warning came on every checkpoint, and broke
    the one-line errors of a run whose checkpoint failed)."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="torch.distributed is disabled, unavailable or uninitialized"
        )
        yield


def _state_options(learner: Learner) -> Any:
    """How the models' state dicts are taken: whole, or of a LoRA run only what trains (the
    adapters and the value head; the frozen base comes back from the model spec on resume, so a
    LoRA checkpoint stays adapter-sized)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    if lora.is_lora(learner.policy):  # LoRA hook: trainable tensors only
        return StateDictOptions(ignore_frozen_params=True, strict=False)
    return StateDictOptions()


def _trained(learner: Learner) -> list[tuple[str, Any, Any]]:
    """(part name, model, optimizer) of what the learner trains: the policy, and a critic if any."""
    parts = [("policy", learner.policy, learner.policy_opt)]
    if learner.critic is not None:
        parts.append(("critic", learner.critic, learner.critic_opt))
    return parts


def _learner_state(learner: Learner) -> dict[str, Any]:
    """The DCP state of `learner`: {part: state dict} with the models' own names."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

    options, state = _state_options(learner), {}
    for part, model, optimizer in _trained(learner):
        state[part], state[f"{part}_opt"] = get_state_dict(model, optimizer, options=options)
    if learner.ref is not None and not lora.is_lora(learner.policy):  # a LoRA run's reference is its base
        state["reference"] = get_model_state_dict(learner.ref)
    return state


def save_learner_state(learner: Learner, directory: Path) -> None:
    """Every rank writes its shards of the learner's models and optimizers into `directory`."""
    import torch.distributed.checkpoint as dcp

    with _one_process_is_meant():
        dcp.save(_learner_state(learner), checkpoint_id=str(directory), no_dist=not learner.dist.grouped)


def load_learner_state(learner: Learner, directory: Path) -> None:
    """Load `save_learner_state`'s files into `learner`, on any number of ranks (resharded)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_state_dict

    state, options = _learner_state(learner), _state_options(learner)
    with _one_process_is_meant():
        dcp.load(state, checkpoint_id=str(directory), no_dist=not learner.dist.grouped)
    for part, model, optimizer in _trained(learner):
        set_state_dict(
            model,
            optimizer,
            model_state_dict=state[part],
            optim_state_dict=state[f"{part}_opt"],
            options=options,
        )
    if "reference" in state:
        set_model_state_dict(learner.ref, state["reference"])


def export_policy(learner: Learner, tokenizer: Any, directory: Path) -> None:
    """The policy in transformers format (`save_pretrained`) with its tokenizer, so that `bench
    eval --model DIRECTORY` loads it: its weights gathered whole (every rank takes part), written
    by rank 0. A LoRA policy writes its adapter (peft's format, naming its base), which `bench
    eval` merges into the base."""
    if lora.is_lora(learner.policy):  # LoRA hook: the adapter only (never sharded)
        learner.policy.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        return
    full = {name: tensor.detach().cpu() for name, tensor in full_state(learner.policy)}
    if learner.dist.is_main:
        learner.policy.save_pretrained(directory, state_dict=full)
        tokenizer.save_pretrained(directory)


def save_checkpoint(
    run: RunDir,
    learner: Learner,
    tokenizer: Any,
    step: int,
    keep_last: int = 2,
    consumed: Consumption | None = None,
) -> Path:
    """Write the checkpoint of `step` (module docstring) and publish it atomically; keep the
    latest `keep_last` checkpoints (0 = all). Every rank calls it; rank 0 owns the directory.

    A write that fails leaves no partial checkpoint (its space is given back, so that the run
    can still record how it ended); one that failed because of the machine (a full disk, a
    read-only one: torch and safetensors name neither) raises an OSError that names the
    checkpoint (`results.files.as_fault`), which the CLI prints as one line."""
    dist = learner.dist
    tmp = run.begin_checkpoint(step) if dist.is_main else run.pending_checkpoint_dir(step)
    dist.barrier()  # the directory exists before any rank writes into it
    try:
        save_learner_state(learner, tmp / STATE_DIR)
        export_policy(learner, tokenizer, tmp / POLICY_DIR)
        final = run.checkpoint_dir(step)
        if dist.is_main:
            if consumed is not None:
                consumed.save(tmp)
            torch.save(learner.state_dict(), tmp / "learner.pt")
            final = run.commit_checkpoint(tmp, step, keep_last)
    except (Exception, CheckpointException) as exc:  # DCP's failure is a BaseException
        fault = as_fault(exc, tmp)  # looked at before the partial files go: they filled the disk
        if dist.is_main:
            shutil.rmtree(tmp, ignore_errors=True)
        if fault is None:
            raise
        raise fault from exc
    dist.barrier()  # no rank goes on (or starts the next checkpoint) before this one is published
    return final


def load_critic(checkpoint: Path) -> Any:
    """The critic of `checkpoint` as a plain `ValueModel` on the CPU (its backbone shaped by
    `policy/config.json`, its weights from `state/`; the earlier layout's `critic/` as saved)."""
    import torch.distributed.checkpoint as dcp
    from transformers import AutoConfig, AutoModel

    from bench.models.critic import ValueModel

    if not (checkpoint / STATE_DIR).is_dir():
        return ValueModel.load(checkpoint / "critic")
    config = AutoConfig.from_pretrained(checkpoint / POLICY_DIR)
    critic = ValueModel(AutoModel.from_config(config), int(config.hidden_size))
    state = {"critic": critic.state_dict()}
    with _one_process_is_meant():
        dcp.load(state, checkpoint_id=str(checkpoint / STATE_DIR), no_dist=True)
    critic.load_state_dict(state["critic"])
    return critic


def restore_learner(learner: Learner, checkpoint: Path) -> None:
    """Load the models, optimizers, counters and algorithm state of `checkpoint` into
    `learner` (on any number of ranks; a checkpoint of the earlier layout in one process)."""
    if (checkpoint / STATE_DIR).is_dir():
        load_learner_state(learner, checkpoint / STATE_DIR)
    elif learner.critic is not None and lora.is_lora(learner.policy):  # LoRA hook: the earlier layout
        lora.restore_critic(learner.critic, checkpoint / "critic")
    elif learner.critic is not None:  # the earlier layout: the critic in transformers format
        saved = type(learner.critic).load(checkpoint / "critic")
        learner.critic.load_state_dict(saved.state_dict())
    learner.load_state_dict(torch.load(checkpoint / "learner.pt", weights_only=False))
