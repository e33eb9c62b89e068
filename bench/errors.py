"""User-facing errors: anything a user can fix by changing their command or config.

The CLI turns these (and the ValueErrors subclasses that leaf packages raise for bad names)
into a one-line message and exit code 2, never a traceback.
"""


class UsageError(ValueError):
    """Bad input from the user: unknown name, invalid config value, missing file."""
