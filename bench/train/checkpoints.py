"""Checkpoints of a run: policy and critic weights, optimizer and algorithm state."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from bench.models import lora
from bench.train.budget import Consumption
from bench.train.learner import Learner
from results.files import as_fault
from results.rundir import RunDir


def save_checkpoint(
    run: RunDir,
    learner: Learner,
    tokenizer: Any,
    step: int,
    keep_last: int = 2,
    consumed: Consumption | None = None,
) -> Path:
    """Write policy, critic, optimizer and algorithm state (and the run's consumption so far)
    atomically; keep the latest `keep_last` checkpoints (0 = all).

    A write that fails leaves no partial checkpoint (its space is given back, so that the run
    can still record how it ended); one that failed because of the machine (a full disk, a
    read-only one: torch and safetensors name neither) raises an OSError that names the
    checkpoint (`results.files.as_fault`), which the CLI prints as one line."""
    tmp = run.begin_checkpoint(step)
    try:
        if consumed is not None:
            consumed.save(tmp)
        learner.unwrapped_policy.save_pretrained(tmp / "policy")
        tokenizer.save_pretrained(tmp / "policy")
        if learner.unwrapped_critic is not None and lora.is_lora(learner.unwrapped_policy):  # LoRA hook
            lora.save_critic(learner.unwrapped_critic, tmp / "critic")
        elif learner.unwrapped_critic is not None:
            learner.unwrapped_critic.save_pretrained(tmp / "critic")
        torch.save(learner.state_dict(), tmp / "learner.pt")
        return run.commit_checkpoint(tmp, step, keep_last)
    except Exception as exc:
        fault = as_fault(exc, tmp)  # looked at before the partial files go: they filled the disk
        shutil.rmtree(tmp, ignore_errors=True)
        if fault is None:
            raise
        raise fault from exc


def restore_learner(learner: Learner, checkpoint: Path) -> None:
    """Load the critic, optimizer and algorithm state of `checkpoint` into `learner` (its
    policy weights are loaded with the policy itself)."""
    if learner.unwrapped_critic is not None and lora.is_lora(learner.unwrapped_policy):  # LoRA hook
        lora.restore_critic(learner.unwrapped_critic, checkpoint / "critic")
    elif learner.unwrapped_critic is not None:
        saved = type(learner.unwrapped_critic).load(checkpoint / "critic")
        learner.unwrapped_critic.load_state_dict(saved.state_dict())
    learner.load_state_dict(torch.load(checkpoint / "learner.pt", weights_only=False))
