"""User-facing errors: anything a user can fix by changing their command or config, and the
ways a run ends early.

The CLI turns these (and the ValueErrors subclasses that leaf packages raise for bad names)
into a one-line message and exit code 2, never a traceback. A run that stops itself or is
terminated records how it ended in its run directory first (`bench.train.outcome`).
"""

from __future__ import annotations

from typing import ClassVar

from results.rundir import RunOutcome


class UsageError(ValueError):
    """Bad input from the user: unknown name, invalid config value, missing file."""


class RunStopped(RuntimeError):
    """A run that stopped itself for a reason the user should read (non-finite losses, starved
    rollouts); each subclass names the outcome the run records (`outcome`).

    The CLI prints the message without a traceback and exits with code 1; completed
    checkpoints and metrics stay on disk."""

    outcome: ClassVar[RunOutcome]


class RunTerminated(BaseException):
    """SIGTERM reached a training run (`bench.train.outcome.terminate_raises`): like Ctrl-C,
    not an error of the run, so no `except Exception` on the way swallows it."""


class ModelLoadError(UsageError):
    """A model spec that cannot be loaded (missing directory, hub unreachable, bad files)."""
