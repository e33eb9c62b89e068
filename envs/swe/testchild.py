"""The sandboxed half of the local SWE test runner: runs rewritten test modules, reports values.

The local runtime (`envs.swe.local_runtime`) runs this file's source with `python -I -S -B -c`
inside `envs.sandbox`, in the repository root: no site module (no .pth file, sitecustomize or
usercustomize), no bytecode written, and no .pyc read (`sys.pycache_prefix` points nowhere).
Standard library only. Request on stdin, JSON:

    {"per_test_seconds": float,
     "files": [{"path": "tests/test_x.py", "code": hex of a marshalled code object,
                "tests": [[test id, "name" or "Class::method"], ...]}, ...]}

Each code object is a test module rewritten by `envs.swe.oracle` in the harness: its assertions
call `__rlbench_check__(k, thunk, ...)` with one thunk per value to compare, its expected
exceptions call `__rlbench_raised__(k, exception or None)`. This program executes each module,
calls each test (a per-test timer, SIGALRM, raises a BaseException in it) and prints the reports
of `envs.swe.verdict` (`MARK` + a JSON array per line) on a private duplicate of its stdout; the
tests' own output goes to /dev/null. Nothing here is trusted: code under test runs in this
process and can rewrite any of it. What the verdict rests on is in `envs.swe.verdict`.
"""

import _signal
import json
import marshal
import os
import sys
import types

MARK = "@@rlbench-swe@@ "  # envs.swe.verdict.MARK (this program imports nothing of the project)
CHECK, RAISED = "__rlbench_check__", "__rlbench_raised__"  # envs.swe.oracle's names
MAX_ITEMS, MAX_DEPTH = 100_000, 60
_NO_PYC = "/dev/null/no-pycache"  # under a file: nothing can be read or written there


class _TestTimeout(BaseException):
    """Raised by the per-test timer; a BaseException so `except Exception` in a test cannot eat it."""


def _silence() -> int:
    """Point fds 0, 1, 2 at /dev/null; return a private duplicate of the original stdout."""
    out, devnull = os.dup(1), os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    sys.stdin, sys.stdout = open(os.devnull), open(os.devnull, "w")
    sys.stderr = sys.stdout
    return out


def encode(value, budget: list, depth: int = 0):
    """`value` as plain data (`envs.swe.verdict`'s format); exact built-in types only, so that
    no method of the code under test runs here; `budget`: items left (one-element list)."""
    budget[0] -= 1
    kind = type(value)
    if budget[0] < 0 or depth > MAX_DEPTH:
        return {"o": "too large"}
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value if value.bit_length() < 10_000 else {"o": "int too large"}
    if kind is float:
        return value if value - value == 0 else {"x": repr(value)}  # inf, -inf, nan
    if kind is list:
        return [encode(v, budget, depth + 1) for v in value]
    if kind is tuple or kind is set or kind is frozenset:
        tag = "t" if kind is tuple else "s" if kind is set else "f"
        return {tag: [encode(v, budget, depth + 1) for v in value]}
    if kind is dict:
        return {"d": [[encode(k, budget, depth + 1), encode(v, budget, depth + 1)] for k, v in value.items()]}
    if kind is bytes:
        return {"b": value.hex()}
    if kind is complex:
        return {"c": [value.real, value.imag]}
    return {"o": str(type.__dict__["__name__"].__get__(kind))}


def _message(exc: BaseException) -> str:
    """'ValueError: msg' (the message may come from code under test and may raise)."""
    name = type.__dict__["__name__"].__get__(type(exc))
    try:
        text = str(exc)
    except BaseException:
        text = ""
    return f"{name}: {text}" if text else name


def _where(exc: BaseException, root: str) -> list:
    """[path, line, text] of the deepest frame of `exc`'s traceback inside the repository."""
    found, tb = ["", 0, ""], exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if isinstance(name, str) and name.startswith(root + "/"):
            found = [name[len(root) + 1 :], tb.tb_lineno, ""]
        tb = tb.tb_next
    if found[0]:
        try:
            with open(os.path.join(root, found[0]), encoding="utf-8", errors="replace") as f:
                lines = f.read(1 << 20).splitlines()
            found[2] = lines[found[1] - 1].strip()[:200] if 0 < found[1] <= len(lines) else ""
        except (OSError, ValueError):
            pass
    return found


def _builtin_base(kind) -> str:
    """The name of the nearest built-in class in `kind`'s MRO."""
    for base in kind.__mro__:
        if base.__module__ == "builtins":
            return base.__name__
    return "BaseException"


def _runner(send, per_test: float, root: str):
    """(timed, check, raised, current): the per-test timer and the two functions the rewritten
    modules call; `current[0]` is the id of the test running."""
    current = [None]

    def on_alarm(signum, frame):
        raise _TestTimeout("test timed out")

    def timed(fn, *args):
        _signal.signal(_signal.SIGALRM, on_alarm)
        _signal.setitimer(_signal.ITIMER_REAL, per_test)
        try:
            return fn(*args)
        finally:
            _signal.setitimer(_signal.ITIMER_REAL, 0)

    def check(k, *thunks):
        values, budget = [], [MAX_ITEMS]
        for thunk in thunks:
            try:
                values.append(encode(thunk(), budget))
            except Exception as exc:  # sent as the operand's outcome; BaseException ends the test
                values.append({"r": _message(exc)[:300]})
        send("V", current[0], k, values)

    def raised(k, exc):
        seen = None if exc is None else [type(exc).__name__, _builtin_base(type(exc))]
        send("X", current[0], k, seen)
        if isinstance(exc, _TestTimeout):
            raise exc

    return timed, check, raised, current


def run_file(spec: dict, root: str, per_test: float, send) -> None:
    """Execute one rewritten module and call its requested tests, reporting each."""
    path = spec["path"]
    full = os.path.join(root, path)
    module = types.ModuleType(os.path.splitext(os.path.basename(path))[0])
    module.__file__ = full
    timed, check, raised, current = _runner(send, per_test, root)
    module.__dict__[CHECK], module.__dict__[RAISED] = check, raised
    sys.path[:0] = [root, os.path.dirname(full)]  # pytest's default (prepend) import mode
    sys.modules[module.__name__] = module
    try:
        timed(exec, marshal.loads(bytes.fromhex(spec["code"])), module.__dict__)
    except BaseException as exc:
        send("I", path, [*_where(exc, root), _message(exc)[:300]])
        return
    for test_id, name in spec["tests"]:
        current[0] = test_id
        send("S", test_id)
        owner, _, method = name.rpartition("::")
        try:
            target = module.__dict__.get(owner or method)
            if owner:
                target = getattr(target(), method)  # pytest-style class: no arguments
            if not callable(target):
                raise LookupError
        except BaseException:
            send("E", test_id, "error", f"{name!r} is not defined in {path}")
            continue
        try:
            timed(target)
            send("E", test_id, "returned", "")
        except BaseException as exc:
            where = _where(exc, root)
            skipped = type(exc).__name__ == "SkipTest" and type(exc).__module__ == "unittest.case"
            skipped = skipped and where[0] == path  # raised by the test file itself, not the code
            send("E", test_id, "skipped" if skipped else "raised", [*where, _message(exc)[:300]])


def main() -> None:
    """Read the request, run every file's tests, report (module docstring)."""
    request = json.loads(sys.stdin.buffer.read())
    out, root = _silence(), os.getcwd()
    sys.pycache_prefix = _NO_PYC

    def send(*event) -> None:
        data = (MARK + json.dumps(event) + "\n").encode("utf-8", "surrogatepass")
        while data:
            data = data[os.write(out, data) :]

    for spec in request["files"]:
        run_file(spec, root, float(request["per_test_seconds"]), send)
    os._exit(0)  # no atexit handler of the code under test runs


if __name__ == "__main__":
    main()
