"""A run records how it ended in its own directory, typed: each way a run stops itself has its
outcome, an exception or a SIGTERM that ends the training block is written before it
propagates, and the SIGTERM handler is the run's only while it trains."""

from __future__ import annotations

import os
import signal
import time

import pytest

from bench.engines.http_engine import ServerFailed
from bench.errors import RunStopped, RunTerminated
from bench.train.collect import RolloutStarved
from bench.train.learner import TrainingDiverged
from bench.train.outcome import ending, recorded_outcome, terminate_raises
from results.rundir import RunDir, RunOutcome


def test_every_way_a_run_stops_itself_names_its_outcome():
    assert {cls: cls.outcome for cls in RunStopped.__subclasses__()} == {
        TrainingDiverged: RunOutcome.NON_FINITE,
        RolloutStarved: RunOutcome.STARVED,
        ServerFailed: RunOutcome.FAILED,  # a rollout server lost (the http engine)
    }


@pytest.mark.parametrize(
    "exc, outcome, detail",
    [
        (
            TrainingDiverged("3 consecutive non-finite losses"),
            RunOutcome.NON_FINITE,
            "3 consecutive non-finite losses",
        ),
        (RolloutStarved("rejected 200 groups"), RunOutcome.STARVED, "rejected 200 groups"),
        (RunTerminated(), RunOutcome.KILLED, "terminated (SIGTERM)"),
        (KeyboardInterrupt(), RunOutcome.KILLED, "interrupted (Ctrl-C)"),
        (
            RuntimeError("no rollout finished in 600 s\nmore"),
            RunOutcome.FAILED,
            "RuntimeError: no rollout finished in 600 s",
        ),
    ],
)
def test_the_exception_that_ends_a_run_is_recorded_before_it_propagates(exc, outcome, detail, tmp_path):
    assert ending(exc) == (outcome, detail)
    run = RunDir(tmp_path)
    with pytest.raises(type(exc)), recorded_outcome(run, main=True):
        assert run.read_outcome().outcome is RunOutcome.KILLED  # marked running, but nobody holds it
        raise exc
    end = run.read_outcome()
    assert (end.outcome, end.detail, end.stopped_by, end.pid) == (outcome, detail, None, os.getpid())


def test_other_ranks_write_nothing(tmp_path):
    with pytest.raises(RuntimeError), recorded_outcome(RunDir(tmp_path), main=False):
        raise RuntimeError("boom")
    assert RunDir(tmp_path).read_outcome() is None


def test_sigterm_raises_while_training_and_the_previous_handler_comes_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RunTerminated), terminate_raises():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises at once
    assert signal.getsignal(signal.SIGTERM) is before
