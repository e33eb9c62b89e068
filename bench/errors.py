"""User-facing errors: anything a user can fix by changing their command or config.

The CLI turns these (and the ValueErrors subclasses that leaf packages raise for bad names)
into a one-line message and exit code 2, never a traceback.
"""


class UsageError(ValueError):
    """Bad input from the user: unknown name, invalid config value, missing file."""


class RunStopped(RuntimeError):
    """A run that stopped itself for a reason the user should read (diverged, starved).

    The CLI prints the message without a traceback and exits with code 1; completed
    checkpoints and metrics stay on disk."""


class ModelLoadError(UsageError):
    """A model spec that cannot be loaded (missing directory, hub unreachable, bad files)."""
