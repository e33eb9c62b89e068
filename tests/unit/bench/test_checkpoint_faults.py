"""A checkpoint that cannot be written (a full or read-only disk, seen through torch's and
safetensors' own errors, which name no file and no errno) leaves no partial checkpoint, keeps
the earlier ones, and is an OSError naming it, which the CLI prints as one line; torch
distributed checkpoint's own failure (a BaseException) too."""

from __future__ import annotations

import errno
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.distributed.checkpoint.api import CheckpointException

from bench.train import checkpoints
from bench.train.checkpoints import save_checkpoint
from bench.train.distributed import Dist
from results.rundir import RunDir


def _learner(error: BaseException | None, monkeypatch) -> SimpleNamespace:
    """A one-process learner whose state write leaves part of a file, then fails with `error`."""

    def save_learner_state(learner, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "__0_0.distcp").write_bytes(b"\0" * 64)  # part of it was written
        if error is not None:
            raise error

    monkeypatch.setattr(checkpoints, "save_learner_state", save_learner_state)
    monkeypatch.setattr(checkpoints, "export_policy", lambda learner, tokenizer, directory: directory.mkdir())
    return SimpleNamespace(dist=Dist(), state_dict=lambda: {"w": torch.zeros(2)})


TOKENIZER = SimpleNamespace(save_pretrained=lambda directory: None)


FULL = "Error while serializing: I/O error: No space left on device (os error 28)"


@pytest.mark.parametrize(
    "full",
    [
        RuntimeError(FULL),
        CheckpointException("save", {0: (RuntimeError(FULL), None)}),
    ],  # DCP's: a BaseException
    ids=["error", "dcp"],
)
def test_a_checkpoint_that_fails_on_a_full_disk_is_named_and_the_earlier_one_kept(
    tmp_path, monkeypatch, full
):
    run = RunDir(tmp_path / "run")
    save_checkpoint(run, _learner(None, monkeypatch), TOKENIZER, step=1)
    with pytest.raises(OSError) as caught:
        save_checkpoint(run, _learner(full, monkeypatch), TOKENIZER, step=2)
    assert caught.value.errno == errno.ENOSPC and caught.value.__cause__ is full
    assert caught.value.filename == str(run.checkpoints / ".tmp_step_000002")
    assert sorted(p.name for p in run.checkpoints.iterdir()) == ["step_000001"]


def test_any_other_error_is_raised_as_it_is_and_leaves_no_partial_checkpoint(tmp_path, monkeypatch):
    run = RunDir(tmp_path / "run")
    bug = TypeError("a bug in a save")
    with pytest.raises(TypeError) as caught:
        save_checkpoint(run, _learner(bug, monkeypatch), TOKENIZER, step=1)
    assert caught.value is bug and list(run.checkpoints.iterdir()) == []
