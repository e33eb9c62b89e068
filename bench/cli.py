"""The `bench` command line. Each subcommand lives in `bench.commands.<name>` (its options and
its handler, which imports what it needs lazily), so `bench --help` and a bad name answer fast.
A user mistake (unknown name, bad config value, missing file, a damaged results file) ends with
a one-line `bench: error: ...` and exit code 2, never a traceback; so does a fault of the machine
under an output (a full disk, a read-only or forbidden directory, a name too long:
`results.files.fault_message`), before or during the work, which keeps what it completed
(checkpoints, finished runs). Other endings, each one line: a run
directory another process holds (`results.rundir.BUSY_EXIT_CODE`, 75), a run that stopped itself
(1), Ctrl-C (130), SIGTERM (143).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import logging
import os
import sys

from bench.commands import COMMANDS
from bench.errors import RunStopped, RunTerminated, UsageError


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (`bench: error: ...`, exit 2) instead of usage dumps."""

    def error(self, message: str):  # type: ignore[override]
        print(
            f"bench: error: {message}{self._flag_hint(message)} (see `{self._help_command()}`)",
            file=sys.stderr,
        )
        sys.exit(2)

    def _commands(self) -> dict[str, argparse.ArgumentParser]:
        """The subcommands' parsers by name (none for a subcommand's own parser)."""
        return {
            name: parser
            for action in self._actions
            if isinstance(action, argparse._SubParsersAction)
            for name, parser in action.choices.items()
        }

    def _given_command(self) -> str | None:
        """The subcommand named in the arguments being parsed, if any."""
        commands = self._commands()
        return next((t for t in getattr(self, "_argv", []) if t in commands), None)

    def _help_command(self) -> str:
        given = self._given_command()
        return f"{self.prog} {given} --help" if given else f"{self.prog} --help"

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        self._argv = list(sys.argv[1:] if args is None else args)  # for `_flag_hint`
        return super().parse_known_args(args, namespace)

    def _flag_hint(self, message: str) -> str:
        """` (did you mean --steps?)` for a misspelt option among the unrecognized arguments, from
        the options of the command given (another command's option is named as such)."""
        if not message.startswith("unrecognized arguments:"):
            return ""
        commands, given = self._commands(), self._given_command()
        parsers = [self, commands[given]] if given else [self, *commands.values()]
        options = {o for p in parsers for a in p._actions for o in a.option_strings if o.startswith("--")}
        for token in message.split(":", 1)[1].split():
            name = token.split("=")[0]
            if not name.startswith("--"):
                continue
            if name in RETIRED_OPTIONS:
                return f" ({name} is retired: {RETIRED_OPTIONS[name]})"
            close = difflib.get_close_matches(name, options, n=1)
            if close and close[0] != name:
                return f" (did you mean {close[0]}?)"
            if given and not close:
                return f" ({name} is not an option of `{self.prog} {given}`)"
        return ""


RETIRED_OPTIONS = {
    "--lease-seconds": "a run is taken over as soon as its holder's process is gone, with no lease; "
    "several machines: --cluster ray (docs/cluster.md)",
}
"""Options that no longer exist -> what replaced them (said instead of a close match)."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `bench` command (every option documented)."""
    parser = _Parser(
        prog="bench",
        description="Experiment harness for RL of LLMs: compare SAO, GRPO, DAPO, PPO and plugins "
        "under one asynchronous training loop.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"bench.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `bench` console script."""
    _one_line_warnings()
    code = _dispatch(argv)
    if int(os.environ.get("WORLD_SIZE") or 1) > 1:  # a rank of `accelerate launch`/torchrun
        _exit_without_finalization(code)
    return code


def _exit_without_finalization(code: int) -> None:
    """End a data-parallel rank now, everything written, skipping interpreter finalization.

    Why: in CI a rank aborted at exit ("terminate called without an active exception",
    SIGABRT) even after its process group was destroyed; not reproduced locally. The suspected
    cause: gloo's worker threads drop their last reference to a finished collective (tensors
    with Python objects) a moment after the caller sees it complete, and on a loaded machine
    that moment can fall inside finalization, where a non-main thread taking the GIL is made to
    exit mid-C++. The run directory, checkpoints and trackers are closed by then
    (`bench.train.loop.train` also ends the process group), so only the teardown is skipped.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _one_line_warnings() -> None:
    """Old forms that are still accepted (`algorithms.deprecation`: an old config name, a plugin
    written to the previous contract) and environment faults that ended an episode
    (`envs.base.EnvFaultWarning`) warn as one `bench: warning: ...` line on stderr."""
    import warnings

    from algorithms.deprecation import DeprecatedFormWarning
    from envs.base import EnvFaultWarning

    show = warnings.showwarning

    def one_line(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, DeprecatedFormWarning | EnvFaultWarning):
            print(f"bench: warning: {message}", file=sys.stderr, flush=True)
        else:
            show(message, category, filename, lineno, file, line)

    warnings.showwarning = one_line


def _dispatch(argv: list[str] | None) -> int:
    """Parse `argv` and run its subcommand; a user error or a stopped run becomes its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as given: `bench run` relaunches itself
    from results.files import fault_message
    from results.rundir import BUSY_EXIT_CODE, RunDirBusy

    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    except RunTerminated:
        print("bench: terminated", file=sys.stderr)
        return 143
    except RunDirBusy as exc:  # not the user's mistake: another process trains this run
        print(f"bench: error: {exc}", file=sys.stderr)
        return BUSY_EXIT_CODE
    except _user_error_types() as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        fault = fault_message(exc)
        if fault is None:  # not the machine's fault: a bug, with its traceback
            raise
        print(f"bench: error: {fault}", file=sys.stderr)
        return 2
    except RunStopped as exc:
        print(f"bench: run stopped: {exc}", file=sys.stderr)
        return 1


def _user_error_types() -> tuple[type[BaseException], ...]:
    """The exception types that mean "the user asked for something invalid" (exit 2).

    Leaf packages cannot import `bench`, so each defines its own ValueError subclass; they
    are collected here. Any other exception is a bug and keeps its traceback.
    """
    from algorithms.registry import RegistryError
    from benchmarks.base import BenchmarkDataError
    from benchmarks.registry import UnknownBenchmarkError
    from envs.registry import UnknownTaskError
    from results.evals import EvalStoreError
    from results.files import DamagedFileError
    from results.rundir import RunDirError
    from sweeps.errors import ExperimentError

    # a ReportError exists only once its package is loaded; importing it (pandas, scipy: ~1.5 s)
    # just to name the type would slow every one-line error, e.g. `bench compare` under torchrun
    report = sys.modules.get("results.report")

    return (
        UsageError,
        RegistryError,
        UnknownTaskError,
        UnknownBenchmarkError,
        BenchmarkDataError,
        RunDirError,
        EvalStoreError,
        DamagedFileError,
        *([report.ReportError] if report is not None else []),
        ExperimentError,
    )


if __name__ == "__main__":
    sys.exit(main())
