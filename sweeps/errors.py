"""The error type of comparisons and sweeps: a spec, arms file, budget, search space or storage
that cannot be used as asked. `bench.cli` prints it as one line and exits with code 2, like
every user error (this package does not import `bench`)."""


class ExperimentError(ValueError):
    """A comparison or sweep that cannot be set up or resumed as asked (one-line message)."""
