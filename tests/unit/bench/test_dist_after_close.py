"""A launched rank keeps its `Dist` after the process group is closed: `bench run` asks
`current_dist().is_main` after training, and joining again there hung both ranks of a 2-rank
launch in gloo's connect (the launcher's store still held the first join's keys)."""

from __future__ import annotations

import torch

from bench.train import distributed


def test_a_launched_rank_does_not_join_again_after_close(monkeypatch):
    closed = distributed.Dist(1, 2, 1, torch.device("cpu"), grouped=True)  # rank 1 of 2, group destroyed
    monkeypatch.setattr(distributed, "_current", closed)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")

    def join_again():
        raise AssertionError("joined the process group a second time")

    monkeypatch.setattr(distributed, "_join", join_again)
    assert not torch.distributed.is_initialized()
    got = distributed.current_dist()
    assert got is closed and not got.is_main
