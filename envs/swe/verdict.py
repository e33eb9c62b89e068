"""Test outcomes decided in the harness from what a sandboxed run reported (the local SWE grader).

`envs.swe.testchild` runs the modules that `envs.swe.oracle.rewrite` made and prints one report
per line, `MARK` then a JSON array:

    ["I", path, detail]              the file could not be imported: its tests are ERRORs
    ["S", id]                        the test started
    ["V", id, k, [value, ...]]       the values of check k (`encode`d plain data)
    ["X", id, k, null | [own, base]] what check k's block raised: the exception's class name and
                                     its nearest built-in ancestor's (null: nothing)
    ["E", id, how, detail]           the test ended: "returned", "raised", "skipped" or "error"

Nothing in these lines is trusted: code under test can write any of them. A sealed test
(`SealedTest.unsealed` == "") PASSES only when every one of its checks was reported exactly once
and the check, applied here to the reported values, holds; the run's own word ("raised",
"skipped", a missing end) can only make it fail. A second report of a check or a report of an
unknown check fails the test and is reported as tampering. An unsealed test's outcome is the
run's word, and its detail says so.

Values are plain data: JSON's types plus tagged objects (`{"t": [...]}` tuple, `{"s": ...}` set,
`{"f": ...}` frozenset, `{"d": [[k, v], ...]}` dict, `{"b": hex}` bytes, `{"c": [re, im]}`,
`{"x": "inf"|"-inf"|"nan"}`, `{"o": type name}` a value of any other type, `{"r": "Type: msg"}`
the expression raised). No pickle, no object of the run's ever reaches the harness; decoded
values are built-in types, compared with built-in operations only.
"""

from __future__ import annotations

import ast
import json
import operator

from envs.swe.checks import Check, CheckKind, RewrittenFile, SealedTest, builtin_exception

MARK = "@@rlbench-swe@@ "
"""Prefix of every report line (framing only: it proves nothing)."""
MAX_DEPTH = 64
_OPS = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: operator.contains(b, a),
    ast.NotIn: lambda a, b: not operator.contains(b, a),
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


class Opaque:
    """A reported value of a type that is not plain data: equal to nothing, ordered with nothing."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other) -> bool:
        return False

    def __ne__(self, other) -> bool:
        return True

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"<{self.name} object>"


class Raised(Exception):
    """An operand whose evaluation raised in the run; using it fails the check."""


def decode(data, depth: int = 0):
    """The built-in value of one reported value (ValueError when it is not well formed)."""
    if depth > MAX_DEPTH:
        raise ValueError("nested too deeply")
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is list:
        return [decode(x, depth + 1) for x in data]
    if type(data) is not dict or len(data) != 1:
        raise ValueError("not a tagged value")
    ((tag, body),) = data.items()
    if tag == "o" and type(body) is str:
        return Opaque(body[:100])
    if tag == "r" and type(body) is str:
        return Raised(body[:300])
    if tag == "x" and body in ("inf", "-inf", "nan"):
        return float(body)
    if tag == "b" and type(body) is str:
        return bytes.fromhex(body)
    if tag == "c" and type(body) is list and len(body) == 2 and all(type(x) in (int, float) for x in body):
        return complex(*body)
    if type(body) is not list:
        raise ValueError(f"bad tagged value {tag!r}")
    items = [decode(x, depth + 1) for x in body]
    if tag == "t":
        return tuple(items)
    if tag == "s":
        return set(items)  # TypeError on unhashable items: caught by the caller
    if tag == "f":
        return frozenset(items)
    if tag == "d" and all(type(p) is list and len(p) == 2 for p in items):
        return dict((k, v) for k, v in items)
    raise ValueError(f"bad tagged value {tag!r}")


def _evaluate(node: ast.expr, values: list):
    """The kept expression of a check on the decoded values (Raised when it needs an operand
    whose evaluation raised); short-circuits like Python."""
    if isinstance(node, ast.Name):
        value = values[int(node.id[1:])]
        if isinstance(value, Raised):
            raise value
        return value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _evaluate(node.operand, values)
    if isinstance(node, ast.BoolOp):
        result = None
        for part in node.values:
            result = _evaluate(part, values)
            if bool(result) is isinstance(node.op, ast.Or):
                return result
        return result
    if isinstance(node, ast.Compare):
        left = _evaluate(node.left, values)
        for op, right_node in zip(node.ops, node.comparators):
            right = _evaluate(right_node, values)
            if not _OPS[type(op)](left, right):
                return False
            left = right
        return True
    return ast.literal_eval(node)


def _exception_ok(check: Check, reported) -> bool:
    """Whether a RAISED check holds: own class named as expected, or a built-in expected class
    that the reported built-in ancestor derives from (the ancestor must be a real built-in)."""
    if not (type(reported) is list and len(reported) == 2 and all(type(x) is str for x in reported)):
        return False
    own, base = reported
    ancestor = builtin_exception(base)
    if builtin_exception(own) is not None and own != base:
        return False  # a built-in class is its own nearest built-in: one guess, not two
    for name in check.raises:
        expected = builtin_exception(name)
        if own == name or (expected is not None and ancestor is not None and issubclass(ancestor, expected)):
            return True
    return False


def _shown(values: list) -> str:
    return ", ".join(repr(v) if not isinstance(v, Raised) else f"raised {v}" for v in values)[:150]


def check_failure(path: str, check: Check, report) -> str:
    """Why `check` fails on `report` (its reported data), or "" when it holds."""
    where = f"{path}:{check.line}: {check.text}"
    if check.kind is CheckKind.RAISED:
        if _exception_ok(check, report):
            return ""
        got = (
            "nothing was raised"
            if report is None
            else f"raised {report[0] if type(report) is list and report else report!r}"
        )
        return f"{where} -> expected {' or '.join(check.raises)}, {got}"[:300]
    try:
        values = [decode(v) for v in report] if type(report) is list else None
        if values is None or len(values) != check.values:
            return f"{where} -> the run reported {len(report) if type(report) is list else 'no'} values for {check.values}"
        if _evaluate(check.predicate, values):
            return ""
        return f"{where} -> AssertionError (got {_shown(values)})"[:300]
    except Raised as exc:
        return f"{where} -> {exc}"[:300]
    except (ValueError, TypeError, RecursionError, MemoryError, OverflowError) as exc:
        return f"{where} -> {type(exc).__name__}: {exc}"[:300]


class _Test:
    """What the run reported about one test."""

    def __init__(self) -> None:
        self.started, self.end, self.detail = False, "", ""
        self.reports: dict[int, object] = {}
        self.tamper = ""


def _detail(data, files: dict[str, RewrittenFile]) -> str:
    """A reported [path, line, text, message] as 'path:line: text -> message' (a test file's line
    text from the harness's copy: the run cannot read it); other data as text."""
    if not (type(data) is list and len(data) == 4 and type(data[0]) is str and type(data[1]) is int):
        return str(data)[:300]
    path, line, text, message = data
    if path in files and 0 < line <= len(files[path].lines):
        text = files[path].lines[line - 1].strip()
    where = f"{path}:{line}: {str(text)[:200]} -> " if path else ""
    return f"{where}{str(message)[:300]}"


def _collect(
    stdout: str, tests: dict[str, SealedTest], files
) -> tuple[dict[str, _Test], dict[str, str], str]:
    """(per test id, import failures by path, a stray line's tamper note) from the run's stdout."""
    seen = {test_id: _Test() for test_id in tests}
    failed: dict[str, str] = {}
    stray = ""
    for line in stdout.splitlines():
        if not line.startswith(MARK):
            continue
        try:
            event = json.loads(line[len(MARK) :])
            what, key = event[0], event[1]
        except (ValueError, TypeError, IndexError, KeyError, RecursionError):
            stray = stray or "an unreadable report line"
            continue
        if what == "I" and type(key) is str and len(event) == 3:
            failed.setdefault(key, "import failed: " + _detail(event[2], files))
            continue
        test = seen.get(key) if type(key) is str else None
        if test is None:
            stray = stray or f"a report for a test that was not asked for: {str(key)[:80]!r}"
        elif what == "S" and not test.started and not test.end:
            test.started = True
        elif what in ("V", "X") and len(event) == 4 and test.started and not test.end:
            k, sealed = event[2], tests[key]
            wanted = CheckKind.VALUES if what == "V" else CheckKind.RAISED
            if type(k) is not int or not 0 <= k < len(sealed.checks) or sealed.checks[k].kind is not wanted:
                test.tamper = test.tamper or f"a report of check {str(k)[:20]} that the test does not have"
            elif k in test.reports:
                test.tamper = test.tamper or f"check {k} (line {sealed.checks[k].line}) reported twice"
            else:
                test.reports[k] = event[3]
        elif what == "E" and len(event) == 4 and test.started and not test.end and type(event[2]) is str:
            test.end, test.detail = event[2], _detail(event[3], files)
        else:
            test.tamper = test.tamper or f"a report out of order ({str(what)[:10]})"
    return seen, failed, stray


def _sealed_outcome(path: str, sealed: SealedTest, test: _Test) -> tuple[str, str]:
    for k, check in enumerate(sealed.checks):
        if k not in test.reports:
            if test.end == "raised":
                return "FAILED", test.detail
            return "FAILED", f"{path}:{check.line}: {check.text} -> not reached"
        why = check_failure(path, check, test.reports[k])
        if why:
            return "FAILED", why
    if test.end == "returned":
        return "PASSED", ""
    if test.end == "skipped":
        return "FAILED", f"a skip that the test's own code does not raise ({test.detail})"[:300]
    return "FAILED", test.detail or f"the test ended with {test.end!r}"


_WORD = {"returned": "PASSED", "raised": "FAILED", "skipped": "SKIPPED"}


def judge(
    stdout: str, files: dict[str, RewrittenFile], ids: list[str], cut: str = ""
) -> tuple[dict, dict, dict]:
    """(outcomes, details, tamper) for `ids` (`path::name`) from a run's stdout (module docstring);
    `cut` (the sandbox's limit, when one ended the run) goes into the details of tests that did
    not finish (FAILED) or did not run (ERROR)."""
    tests = {}
    for test_id in ids:
        path, _, name = test_id.partition("::")
        rewritten = files.get(path)
        if rewritten is not None and name in rewritten.tests:
            tests[test_id] = rewritten.tests[name]
    seen, failed, stray = _collect(stdout, tests, files)
    outcomes, details, tamper = {}, {}, {}
    why = f" ({cut})" if cut else ""
    for test_id in ids:
        path, _, name = test_id.partition("::")
        rewritten, test, sealed = files.get(path), seen.get(test_id), tests.get(test_id)
        if rewritten is None or rewritten.error or path in failed:
            outcome, detail = (
                "ERROR",
                (rewritten.error if rewritten else "") or failed.get(path) or "import failed",
            )
        elif sealed is None:
            outcome, detail = "ERROR", f"{name!r} is not a test function of {path}"
        elif test.tamper:
            outcome, detail = "FAILED", f"tampering: {test.tamper}"
            tamper[test_id] = test.tamper
        elif not test.started:
            outcome, detail = "ERROR", "the test did not run" + why
        elif not test.end:
            outcome, detail = "FAILED", "the test did not finish" + why
        elif test.end == "error":
            outcome, detail = "ERROR", test.detail
        elif sealed.unsealed:
            outcome = _WORD.get(test.end, "FAILED")
            detail = f"{test.detail} [outcome as the sandboxed run reported it: {sealed.unsealed}]".lstrip()
        else:
            outcome, detail = _sealed_outcome(path, sealed, test)
        outcomes[test_id], details[test_id] = outcome, detail[:400]
    if stray:
        for test_id in ids:
            tamper.setdefault(test_id, stray)
            if outcomes[test_id] == "PASSED":
                outcomes[test_id], details[test_id] = "FAILED", f"tampering: {stray}"
    return outcomes, details, tamper
