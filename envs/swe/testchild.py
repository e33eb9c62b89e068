"""Tests of one file in a fresh interpreter, behind an audit guard: the SWE runner's child half.

`envs.swe.testrunner` (the parent, which never imports repository code) starts `envs.swe.testguard`'s
source followed by this one with `python -I -S -B -c` for one test file's ids, in the repository
root inside the sandbox. Request on stdin (no json: importing it costs more than a small test):
`token NUL per_test_seconds NUL error-or-"-" NUL id NUL id ... NUL NUL source`, the file's text as
the parent read it. Answer on the original stdout, a pipe only the parent reads, written by the
guard: per id STARTED then PASSED / FAILED / ERROR / SKIPPED (ERROR alone when the file cannot be
imported), or TAMPER, after which the guard ends the process (exit 86). The tests' own output goes
to /dev/null. The code under test runs in this process, so what the verdict rests on is set up
before the repository's first line runs, and nothing later relies on state it can reach:

1. The test file is compiled here from the parent's copy (a rewrite on disk changes nothing),
   and the function called must be the one compiled from it (same code object and globals).
   `sys.pycache_prefix` then points nowhere: no .pyc is read for anything imported later.
2. The guard (`envs.swe.testguard`) is installed; from then on `child` uses only locals bound
   before (builtins and helpers included): code under test may rebind globals and builtins.
3. `unittest.SkipTest` counts only as the real class raised by the test file's own code;
   rebinding a builtin counts as tampering.
"""

import _signal
import builtins
import os
import sys
import types

if __name__ != "__main__":  # imported by the harness or tests; as the child program the guard's
    from envs.swe.testguard import REPORT, install, module_name_readers  # source comes first

_NO_PYC = "/dev/null/no-pycache"  # under a file: nothing can be read or written there


class _TestTimeout(BaseException):
    """Raised by the per-test timer; a BaseException so `except Exception` in a test cannot eat it."""


def _silence() -> int:
    """Point fds 0, 1, 2 at /dev/null; return a private duplicate of the original stdout."""
    out, devnull = os.dup(1), os.open(os.devnull, os.O_RDWR)  # the duplicate is not inheritable
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    sys.stdin, sys.stdout = open(os.devnull), open(os.devnull, "w")  # live as long as the process
    sys.stderr = sys.stdout
    return out


def _resolver(type_=type, len_=len, range_=range, isinstance_=isinstance):
    """resolve(module_dict, name, module_code) -> (function, instance or None) of `func` or
    `Class::method`, checked to be the one compiled from the test file (same code object, same
    globals); (None, why) when it is missing or is something else. A closure: see `_helpers`."""
    type_vars = type.__dict__["__dict__"].__get__
    func_code, func_globals = types.FunctionType.__code__.__get__, types.FunctionType.__globals__.__get__
    function, code_type, class_type = types.FunctionType, types.CodeType, type

    def resolve(module_dict: dict, name: str, module_code):
        expected, namespace, owner, parts = module_code, module_dict, None, name.split("::")
        for i in range_(len_(parts)):
            found = [c for c in expected.co_consts if type_(c) is code_type and c.co_name == parts[i]]
            value = namespace.get(parts[i])
            if not found or value is None:
                return None, f"{parts[i]!r} is not defined in the test file"
            expected = found[-1]  # the last definition wins, as at run time
            if i < len_(parts) - 1:
                if not isinstance_(value, class_type):
                    return None, f"{parts[i]!r} is not a class"
                owner, namespace = value, type_vars(value)
        same = func_code(value) is expected and func_globals(value) is module_dict
        if type_(value) is not function or not same:
            return None, f"{name!r} is not the function the test file defines (decorated or replaced)"
        return value, owner

    return resolve


def _helpers(per_test: float, root: str, full: str, source: str):
    """(timed, detail, skipped_here, builtins_changed, trusted): the runner's steps as closures
    over names bound now, so that rebinding module globals or builtins cannot reach them (item
    2); `trusted`: the code objects among them that read frames (tracebacks)."""
    type_, str_, isinstance_, len_, exception = type, str.__str__, isinstance, len, BaseException
    tb_of = BaseException.__dict__["__traceback__"].__get__
    type_name = type.__dict__["__name__"].__get__
    set_handler, setitimer = _signal.signal, _signal.setitimer
    sigalrm, itimer, timeout, open_ = _signal.SIGALRM, _signal.ITIMER_REAL, _TestTimeout, open
    lines, builtins_dict, snapshot = {full: source.splitlines()}, vars(builtins), dict(vars(builtins))

    def on_alarm(signum, frame):
        raise timeout("test timed out")

    def timed(fn, *args):
        set_handler(sigalrm, on_alarm)
        setitimer(itimer, per_test)
        try:
            return fn(*args)
        finally:
            setitimer(itimer, 0)

    def line_of(name: str, number: int) -> str:
        if name not in lines:
            try:
                with open_(name, encoding="utf-8", errors="replace") as f:
                    lines[name] = f.read().splitlines()
            except exception:
                lines[name] = []
        text = lines[name]
        return text[number - 1].strip() if 0 < number <= len_(text) else ""

    def detail(exc) -> str:
        """'tests/test_x.py:7: assert f(1) == 2 -> AssertionError: msg' (the deepest repo frame)."""
        where, tb = "", tb_of(exc)
        while tb is not None:
            name = str_(tb.tb_frame.f_code.co_filename)  # the guard allows this code's frame reads
            if name.startswith(root + "/"):
                where = f"{name[len_(root) + 1 :]}:{tb.tb_lineno}: {line_of(name, tb.tb_lineno)} -> "
            tb = tb.tb_next
        try:
            message = exc.__str__()  # code under test may define it; it may raise
            message = str_(message) if isinstance_(message, str) else ""
        except exception:
            message = ""
        return (where + type_name(type_(exc)) + (": " + message if message else ""))[:300]

    def skipped_here(exc) -> bool:
        """Raised by the test file itself (its frame is the deepest): not a skip by code under test."""
        tb, last = tb_of(exc), None
        while tb is not None:
            last, tb = tb, tb.tb_next
        return last is not None and str_(last.tb_frame.f_code.co_filename) == full

    def builtins_changed() -> list[str]:
        names = [k for k, v in builtins_dict.items() if snapshot.get(k, snapshot) is not v]
        return names + [k for k in snapshot if k not in builtins_dict]

    trusted = frozenset({detail.__code__, skipped_here.__code__})
    return timed, detail, skipped_here, builtins_changed, trusted


def child() -> None:
    """Run the tests of the request on stdin and report them (see the module docstring)."""
    head, _, source = sys.stdin.read().partition("\0\0")
    token, per_test, failed, *ids = head.split("\0")
    out, root, per_test, failed = _silence(), os.getcwd(), float(per_test), "" if failed == "-" else failed
    path = ids[0].split("::", 1)[0]  # the parent sends one file's ids
    full = os.path.join(root, path)
    readers = module_name_readers(root, source)
    skip = None
    if "unittest" in source or "SkipTest" in source:  # the real class, before the repo is on sys.path
        import unittest

        skip = unittest.SkipTest
    timed, detail, skipped_here, builtins_changed, trusted = _helpers(per_test, root, full, source)
    resolve = _resolver()
    module = types.ModuleType(os.path.splitext(os.path.basename(path))[0])
    module.__file__, module_dict, report, isinstance_ = full, module.__dict__, REPORT, isinstance
    audit, exit_, exec_, exception = sys.audit, os._exit, exec, BaseException
    try:
        module_code = compile(source, full, "exec", dont_inherit=True)
    except exception as exc:
        module_code, failed = None, failed or "import failed: " + detail(exc)
    sys.path[:0] = [root, os.path.dirname(full)]  # pytest's default (prepend) import mode
    sys.modules[module.__name__] = module
    sys.pycache_prefix = _NO_PYC
    install(token, out, root, trusted, readers, len(ids))
    del token
    # From the exec below on, only locals: the code under test may rebind globals and builtins.
    if not failed:
        try:
            timed(exec_, module_code, module_dict)
        except exception as exc:  # import error, SystemExit, timeout
            failed = "import failed: " + detail(exc)
    for test_id in ids:
        if failed:
            audit(report, "ERROR", failed)
            continue
        audit(report, "STARTED", "")
        function, owner = resolve(module_dict, test_id.split("::", 1)[1], module_code)
        if function is None:
            audit(report, "ERROR", owner)
            continue
        passed, caught = False, None
        try:
            timed(function, *([] if owner is None else [owner()]))  # pytest-style class: no arguments
            passed = True
        except exception as exc:  # assertion, exception, SystemExit, timeout
            caught = exc
        why = "" if passed else detail(caught)  # may run code under test (its __str__): before the verdict
        rebound = builtins_changed()
        if rebound:
            audit(report, "TAMPER", "builtins rebound by the code under test: " + ", ".join(rebound[:5]))
        outcome = "PASSED" if passed else "FAILED"
        if not passed and skip is not None and isinstance_(caught, skip) and skipped_here(caught):
            outcome = "SKIPPED"
        audit(report, outcome, why)
    exit_(0)


if __name__ == "__main__":
    child()
