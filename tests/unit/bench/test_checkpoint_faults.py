"""A checkpoint that cannot be written (a full or read-only disk, seen through torch's and
safetensors' own errors, which name no file and no errno) leaves no partial checkpoint, keeps
the earlier ones, and is an OSError naming it, which the CLI prints as one line."""

from __future__ import annotations

import errno
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from bench.train.checkpoints import save_checkpoint
from results.rundir import RunDir


class _Policy:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    def save_pretrained(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "model.safetensors").write_bytes(b"\0" * 64)  # part of it was written
        if self.error is not None:
            raise self.error


def _learner(error: Exception | None) -> SimpleNamespace:
    return SimpleNamespace(
        unwrapped_policy=_Policy(error), unwrapped_critic=None, state_dict=lambda: {"w": torch.zeros(2)}
    )


TOKENIZER = SimpleNamespace(save_pretrained=lambda directory: None)


def test_a_checkpoint_that_fails_on_a_full_disk_is_named_and_the_earlier_one_kept(tmp_path):
    run = RunDir(tmp_path / "run")
    save_checkpoint(run, _learner(None), TOKENIZER, step=1)
    full = RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)")
    with pytest.raises(OSError) as caught:
        save_checkpoint(run, _learner(full), TOKENIZER, step=2)
    assert caught.value.errno == errno.ENOSPC and caught.value.__cause__ is full
    assert caught.value.filename == str(run.checkpoints / ".tmp_step_000002")
    assert sorted(p.name for p in run.checkpoints.iterdir()) == ["step_000001"]


def test_any_other_error_is_raised_as_it_is_and_leaves_no_partial_checkpoint(tmp_path):
    run = RunDir(tmp_path / "run")
    bug = TypeError("a bug in a save")
    with pytest.raises(TypeError) as caught:
        save_checkpoint(run, _learner(bug), TOKENIZER, step=1)
    assert caught.value is bug and list(run.checkpoints.iterdir()) == []
