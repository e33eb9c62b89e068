"""A tiny pytest stand-in for SWE test runs: standard library only, robust to hostile test code.

The local runtime (`envs.swe.local_runtime`) executes this file's source with `python -I -S -B
-c` inside `envs.sandbox`, with the repository root as working directory: no site module, so no
.pth file, sitecustomize or usercustomize runs, and nothing outside the standard library is
needed. It reads one JSON request from stdin, `{"nonce": str, "ids": [test ids],
"per_test_seconds": float, "child": <the child program: envs.swe.testguard's source, then
envs.swe.testchild's>}`, where a test id is
SWE-bench's `tests/test_x.py::test_name` (or `path::Class::method`). Plain `assert` tests: no
fixtures, no parametrisation.

This process (the parent) never imports repository code. It reads each test file itself and
runs that file's tests in a fresh child interpreter (`envs.swe.testchild`, started the same way;
one process per file, as pytest shares one process among tests), handing it the source, so a
rewrite on disk during the run changes nothing. It decides each outcome from what the child
reports under a one-time token only that child was given, and from how the child ended; the
child compiles the file, calls the tests and sits behind an audit guard (`envs.swe.testguard`).
When the guard ends a child during a test, that test fails as tampering and a fresh child runs
the rest. The parent makes itself undumpable, so the children (same uid) can neither read its
memory (the nonce) nor open its file descriptors (the pipe to the harness).

Output protocol: every line it prints starts with `MARK + nonce + " "` followed by a JSON
object, written as soon as it is known so that a run cut short still reports what finished:

* `{"running": <id>}` when its child starts calling a test;
* `{"result": <id>, "outcome": "PASSED"|"FAILED"|"ERROR"|"SKIPPED", "detail": <why>}`, plus
  `"tamper": <what>` when the child's guard caught the code under test tampering;
* at the end, `{"results": {<id>: <outcome>, ...}}`: the one line mapping each id to its outcome.

Outcomes follow pytest: a test that returns passes; one that raises anything (assertion,
exception, `sys.exit`, its per-test timer) fails; `unittest.SkipTest` raised by the test skips;
an id whose file cannot be imported, or whose function does not exist, is an ERROR; tampering
fails. A child that ends without a result (`os._exit` in a test, a crash) ends the run, as one
process running every test would: its test FAILED if it had started and ERROR if its import had
not finished, every later id ERROR (`parse_events`). What the per-test timer (SIGALRM in the
child) cannot interrupt is cut by the sandbox limits.

Why the precautions: tests and the code they import are model-written. The nonce comes on stdin
and is never printed, so lines without it are not believed (the harness keeps only lines with
the nonce); the children's output is read only by this process; `os._exit` at the end skips
atexit handlers.
"""

from __future__ import annotations

import json
import os
import sys

MARK = "@@swe-testrunner@@"
"""Prefix of every protocol line (followed by the run's nonce and a space)."""
CHILD_OUTPUT_LIMIT = 1 << 20
"""Bytes of a child's stdout read at most; a child writing more is killed (it floods)."""
_OUTCOMES = ("PASSED", "FAILED", "ERROR", "SKIPPED")


def _silence() -> int:
    """Point fds 0, 1, 2 at /dev/null; return a private duplicate of the original stdout."""
    out = os.dup(1)  # not inheritable: the children do not get it
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    return out


def _undumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0): processes of the same uid (the children) can no longer attach
    to this one, read its memory or open its /proc/PID/fd entries. Best effort (Linux, ctypes)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass


def _ended(status: int) -> str:
    """'exit status 3' or 'signal 9' from a waitpid status."""
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def _spawn(source: str, request: bytes) -> tuple[int, int]:
    """Start a child (`python -I -S -B -c source`) with `request` on its stdin: (pid, read end of
    its stdout). Its stderr goes to /dev/null; it inherits no other descriptor."""
    child_in, to_child = os.pipe()
    from_child, child_out = os.pipe()
    devnull = os.open(os.devnull, os.O_RDWR)
    actions = [(os.POSIX_SPAWN_DUP2, fd, n) for fd, n in ((child_in, 0), (child_out, 1), (devnull, 2))]
    argv = [sys.executable, "-I", "-S", "-B", "-c", source]
    try:
        pid = os.posix_spawn(sys.executable, argv, dict(os.environ), file_actions=actions)
    finally:
        for fd in (child_in, child_out, devnull):
            os.close(fd)
    try:
        while request:  # blocks while the child reads (before it runs any repository code)
            request = request[os.write(to_child, request) :]
    except BrokenPipeError:
        pass
    os.close(to_child)
    return pid, from_child


def _lines(pid: int, fd: int, token: str):
    """(WHAT, detail) of each line of the child's stdout carrying `token`, as they come; a child
    writing more than CHILD_OUTPUT_LIMIT bytes is killed. Closes `fd`."""
    mark, pending, size = token.encode() + b" ", b"", 0
    try:
        while chunk := os.read(fd, 65536):
            size += len(chunk)
            if size > CHILD_OUTPUT_LIMIT:
                os.kill(pid, 9)
                return
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                what, _, data = line[len(mark) :].partition(b" ")
                if line.startswith(mark):
                    try:
                        yield (
                            what.decode("ascii"),
                            bytes.fromhex(data.decode("ascii")).decode("utf-8", "replace"),
                        )
                    except ValueError:
                        continue
    finally:
        os.close(fd)


def _read_source(path: str) -> tuple[str, str]:
    """(text, "") of a test file, or ("", why it cannot be read). Read here, before any child
    runs, so that code under test rewriting it on disk changes nothing."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), ""
    except (OSError, UnicodeDecodeError) as exc:
        return "", f"import failed: cannot read {path}: {getattr(exc, 'strerror', None) or exc}"


def run_file(source: str, ids: list[str], per_test: float, emit) -> bool:
    """Run one file's tests in a child and `emit` their events (module docstring). After the
    guard ends a child during a test, that test FAILED (tampering) and a fresh child runs the
    rest; during the import, every id FAILED. False when a child ended without its results:
    the run stops there."""
    pending, (text, failed) = list(ids), _read_source(ids[0].split("::", 1)[0])
    while pending:
        token = os.urandom(16).hex()
        request = "\0".join([token, repr(per_test), failed or "-", *pending]) + "\0\0" + text
        pid, fd = _spawn(source, request.encode("utf-8", "surrogateescape"))
        done, current, tamper = 0, None, ""
        for what, detail in _lines(pid, fd, token):
            if what == "TAMPER":
                tamper = detail or "tampering"
            elif what == "STARTED" and current is None and done < len(pending):
                current = pending[done]
                emit({"running": current})
            elif what in _OUTCOMES and done < len(pending):
                emit({"result": pending[done], "outcome": what, "detail": detail})
                done, current = done + 1, None
            else:  # a second STARTED, a result too many: only with the token, so it leaked
                tamper = tamper or f"the child reported out of order ({what})"
        status = os.waitpid(pid, 0)[1]
        if tamper:
            hit = [current] if current is not None else pending[done:]  # a test, or the import
            for test_id in hit:
                emit(
                    {
                        "result": test_id,
                        "outcome": "FAILED",
                        "detail": f"tampering: {tamper}",
                        "tamper": tamper,
                    }
                )
            pending = pending[done + 1 :] if current is not None else []
            continue
        if done == len(pending) and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            return True
        if current is not None:
            emit(
                {
                    "result": current,
                    "outcome": "FAILED",
                    "detail": f"the test did not finish ({_ended(status)})",
                }
            )
        else:
            emit(
                {
                    "result": pending[done],
                    "outcome": "ERROR",
                    "detail": f"its process ended first ({_ended(status)})",
                }
            )
        return False
    return True


def main() -> None:
    """Read the request from stdin, run each file's tests in a child, report (module docstring)."""
    request = json.loads(sys.stdin.read())
    prefix = f"{MARK}{request['nonce']} ".encode()
    per_test = float(request.get("per_test_seconds", 5.0))
    out = _silence()
    _undumpable()
    results: dict[str, str] = {}

    def emit(event: dict) -> None:
        if "outcome" in event:
            results[event["result"]] = event["outcome"]
        data = prefix + json.dumps(event).encode() + b"\n"
        while data:
            data = data[os.write(out, data) :]

    by_file: dict[str, list[str]] = {}
    for test_id in request["ids"]:
        if "::" in test_id:
            by_file.setdefault(test_id.split("::", 1)[0], []).append(test_id)
        else:
            emit({"result": test_id, "outcome": "ERROR", "detail": f"not a test id: {test_id}"})
    for ids in by_file.values():
        if not run_file(request["child"], ids, per_test, emit):
            os._exit(3)  # every later id: ERROR, "the test did not run" (parse_events)
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


def parse_tamper(stdout: str, nonce: str) -> dict[str, str]:
    """Test id -> what the child's guard caught, from a run's stdout (lines with `nonce` only)."""
    prefix, found = f"{MARK}{nonce} ", {}
    for line in stdout.splitlines():
        if line.startswith(prefix):
            try:
                event = json.loads(line[len(prefix) :])
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("tamper") and "result" in event:
                found[str(event["result"])] = str(event["tamper"])
    return found


if __name__ == "__main__":
    main()
