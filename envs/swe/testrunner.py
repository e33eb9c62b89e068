"""A tiny pytest stand-in for SWE test runs: standard library only, robust to hostile test code.

The local runtime (`envs.swe.local_runtime`) executes this file's source with `python -I -B -c`
inside `envs.sandbox`, with the repository root as working directory, so it works where pytest
is not installed. It reads one JSON request from stdin, `{"nonce": str, "ids": [test ids],
"per_test_seconds": float}`, where a test id is SWE-bench's `tests/test_x.py::test_name` (or
`path::Class::method`). Each test file is imported by path (repository root and the file's
directory on `sys.path`, as pytest's default import mode does) and each named function called
without arguments: plain `assert` tests, no fixtures, no parametrisation.

Output protocol: every line it prints starts with `MARK + nonce + " "` followed by a JSON
object, written as soon as it is known so that a run cut short still reports what finished:

* `{"running": <file or id>}` before importing a file / calling a test;
* `{"result": <id>, "outcome": "PASSED"|"FAILED"|"ERROR"|"SKIPPED", "detail": <why>}`;
* at the end, `{"results": {<id>: <outcome>, ...}}`: the one line mapping each id to its outcome.

Outcomes follow pytest: a test that returns passes; one that raises anything (assertion,
exception, `sys.exit`, its per-test timer) fails; `unittest.SkipTest` skips; an id whose file
cannot be imported, or whose function does not exist, is an ERROR.

Why the precautions: tests and the code they import are model-written. Their stdout/stderr
go to /dev/null (at the file-descriptor level, so printing junk cannot garble or flood the
protocol); results go to a private duplicate of the original stdout; the nonce comes on stdin
and is never printed, so a program printing fake result lines is not believed (the harness
keeps only lines with the nonce); a per-test wall-clock timer (SIGALRM) turns a hanging
test into a failure and the run goes on; `os._exit` at the end skips atexit handlers and
non-daemon threads. What the timer cannot interrupt (a C-level loop, `os._exit` inside a
test, a replaced signal handler) is cut by the sandbox limits; `parse_events` then marks
the test that was running FAILED and every id not reported ERROR.
"""

from __future__ import annotations

import json
import os
import signal
import sys

MARK = "@@swe-testrunner@@"
"""Prefix of every protocol line (followed by the run's nonce and a space)."""


class _TestTimeout(BaseException):
    """Raised by the per-test timer; a BaseException so `except Exception` in a test cannot eat it."""


def _on_alarm(signum, frame):
    raise _TestTimeout("test timed out")


def _detail(exc: BaseException, root: str) -> str:
    """'tests/test_x.py:7: assert f(1) == 2 -> AssertionError: msg' (the deepest repo frame)."""
    import linecache
    import traceback

    where = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename.startswith(root + os.sep):
            line = (frame.line or linecache.getline(frame.filename, frame.lineno)).strip()
            where = f"{os.path.relpath(frame.filename, root)}:{frame.lineno}: {line} -> "
    try:
        message = str(exc)  # model-defined __str__ may raise; still report the type
    except BaseException:  # anything from hostile code
        message = ""
    text = type(exc).__name__ + (f": {message}" if message else "")
    return (where + text)[:300]


def _silence() -> int:
    """Point fds 0, 1, 2 at /dev/null; return a private duplicate of the original stdout."""
    out = os.dup(1)  # not inheritable: subprocesses of the tests do not get it
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    sys.stdin = open(os.devnull)  # lives as long as the process
    sys.stdout = sys.stderr = open(os.devnull, "w")
    return out


def _import(path: str, root: str):
    """Import the test file at `path` (relative to root) under a fresh module name."""
    import importlib.util

    full = os.path.join(root, path)
    if not os.path.isfile(full):
        raise FileNotFoundError(f"no such test file: {path}")
    sys.path.insert(1, os.path.dirname(full))  # pytest's default (prepend) import mode
    name = os.path.splitext(os.path.basename(path))[0]
    if name in sys.modules:
        name = "swe_test_" + path.replace("/", "_").replace(".", "_")
    spec = importlib.util.spec_from_file_location(name, full)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _call(module, name: str, root: str) -> tuple[str, str]:
    """(outcome, detail) of calling `name` (`func` or `Class::method`) from `module`."""
    import unittest

    try:
        target = module
        parts = name.split("::")
        for i, part in enumerate(parts):
            target = getattr(target, part)
            if i < len(parts) - 1 and isinstance(target, type):
                target = target()  # pytest-style test class: instantiated without arguments
        if not callable(target):
            return "ERROR", f"{name} is not a function"
    except BaseException as exc:
        return "ERROR", _detail(exc, root)
    try:
        target()
        return "PASSED", ""
    except unittest.SkipTest as exc:
        return "SKIPPED", _detail(exc, root)
    except BaseException as exc:  # assertion, exception, SystemExit, timeout
        return "FAILED", _detail(exc, root)


def _timed(per_test: float, fn, *args):
    """Run fn(*args) under a wall-clock timer; a late timeout becomes a failure, not a crash."""
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, per_test)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def main() -> None:
    """Read the request from stdin, run the tests, report them (see the module docstring)."""
    sys.dont_write_bytecode = True  # -I ignores PYTHONDONTWRITEBYTECODE; keep the repo clean
    request = json.loads(sys.stdin.read())
    prefix = f"{MARK}{request['nonce']} ".encode()
    per_test = float(request.get("per_test_seconds", 5.0))
    root = os.getcwd()
    out = _silence()
    dumps, write = json.dumps, os.write  # bound now: tests may monkeypatch the modules

    def emit(event: dict) -> None:
        data = prefix + dumps(event).encode() + b"\n"
        while data:
            data = data[write(out, data) :]

    sys.path.insert(0, root)
    by_file: dict[str, list[str]] = {}
    for test_id in request["ids"]:
        by_file.setdefault(test_id.split("::", 1)[0], []).append(test_id)
    results: dict[str, str] = {}
    for path, ids in by_file.items():
        emit({"running": path})
        try:
            module = _timed(per_test, _import, path, root)
            error = None
        except BaseException as exc:  # import error, SystemExit, timeout
            module, error = None, "import failed: " + _detail(exc, root)
        for test_id in ids:
            if module is None or "::" not in test_id:
                outcome, detail = "ERROR", error or f"not a test id: {test_id}"
            else:
                emit({"running": test_id})
                try:
                    outcome, detail = _timed(per_test, _call, module, test_id.split("::", 1)[1], root)
                except _TestTimeout:  # fired after the test returned, inside our bookkeeping
                    outcome, detail = "FAILED", "test timed out"
            results[test_id] = outcome
            emit({"result": test_id, "outcome": outcome, "detail": detail})
    emit({"results": results})
    os._exit(0)


def parse_events(stdout: str, nonce: str, ids: list[str], cut: str = "") -> tuple[dict, dict]:
    """(outcomes, details) for `ids` from a run's stdout; only lines carrying `nonce` count.

    An id never reported is FAILED if it was the test running when the run ended (it hung
    or killed the process) and ERROR otherwise; `cut` (e.g. the sandbox's limit) goes into
    its detail.
    """
    prefix = f"{MARK}{nonce} "
    outcomes: dict[str, str] = {}
    details: dict[str, str] = {}
    running = None
    for line in stdout.splitlines():
        if not line.startswith(prefix):
            continue
        try:
            event = json.loads(line[len(prefix) :])
        except ValueError:
            continue
        if "running" in event:
            running = event["running"]
        elif "result" in event and event.get("outcome") in ("PASSED", "FAILED", "ERROR", "SKIPPED"):
            outcomes[event["result"]] = event["outcome"]
            details[event["result"]] = str(event.get("detail", ""))
            running = None
    why = f" ({cut})" if cut else ""
    for test_id in ids:
        if test_id not in outcomes:
            hung = test_id == running
            outcomes[test_id] = "FAILED" if hung else "ERROR"
            details[test_id] = ("the test did not finish" if hung else "the test did not run") + why
    return outcomes, details


if __name__ == "__main__":
    main()
