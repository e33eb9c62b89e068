"""The expectations of a test file, kept by the harness: the rewrite behind the local SWE grader.

The local runtime (`envs.swe.local_runtime`) never lets the sandbox see what a test expects.
Before a run, the harness parses each test file (`rewrite`) and turns every assertion of every
test function into a *check*: the sandboxed run (`envs.swe.testchild`) computes the values the
assertion compares and sends them as plain data; the comparison itself, with the literals and
operators of the assertion, stays here and is applied by `envs.swe.verdict`. The run receives
the rewritten module as a code object compiled here, with its assertions, assertion messages and
docstrings gone (comments never reach a code object), and the test files themselves are taken
out of the working copy while it runs. A forged report therefore has to carry the right values
without knowing them, i.e. the code under test has to compute them.

    assert to_roman(4) == "IV"         ->  __rlbench_check__(0, lambda: to_roman(4))
                                           kept here: v0 == 'IV'
    assert not is_leap(1900)           ->  __rlbench_check__(1, lambda: is_leap(1900))
                                           kept here: not v0
    try:                               ->  try:
        acc.withdraw(20)                       acc.withdraw(20)
    except ValueError:                     except BaseException as __rlbench_exc__:
        return                                 __rlbench_raised__(2, __rlbench_exc__)
    assert False, "should raise"           else:
                                               __rlbench_raised__(2, None)
                                           return
                                           kept here: the exception is a ValueError

Forms placed (a test whose assertions are all of these is *sealed*, `SealedTest.unsealed` ""):

1. `assert E` at the top level of the test's body: `and` at the top splits it into several
   checks; inside, comparisons (`==`, `<`, `in`, `is None`, chains), `not`, `and`, `or` and
   literals (what `ast.literal_eval` reads) stay here, every other sub-expression is computed by
   the run, each on its own (an exception there is sent as the value's outcome, so `or`
   short-circuits here as in Python, though the run evaluated both sides).
2. An expected exception: `with pytest.raises(E):`, `try: ... except E: return` followed by
   `assert False` / `raise AssertionError`, `try: ... except E: pass else: assert False`, and
   `try: ...; assert False except E: pass` (E a name, a dotted name or a tuple of them, not
   one that catches AssertionError itself). The run sends the raised exception's own class name
   and its nearest built-in ancestor; E matches the own name, or, for a built-in E, the
   ancestor's built-in hierarchy.

Anything else that could decide a test (an assertion inside `if`/`for`/`with`/`try`, a
`raise`, `return` or `yield` in the body, an assertion or `raise` in a helper function or at
module level, a decorator, `async def`, an assignment expression inside an assertion, no
assertion at all) leaves the test *unsealed*: its outcome is what the sandboxed run says, and
`envs.swe.verdict` says so in the test's detail; grading does not resolve an instance on one
(`envs.swe.runtime.Runtime.evaluate`).
"""

from __future__ import annotations

import ast
import marshal

from envs.swe.checks import NOT_LITERAL, Check, CheckKind, RewrittenFile, SealedTest, Split, literal

CHECK = "__rlbench_check__"
"""The function the rewritten test calls with each check's number and one thunk per value."""
RAISED = "__rlbench_raised__"
"""The function the rewritten test calls with an exception check's number and what was raised."""
_CAUGHT = "__rlbench_exc__"
MAX_SOURCE_BYTES = 1 << 20
"""Test files larger than this are not rewritten (their tests are errors)."""
_FAILS = {"AssertionError", "Exception", "BaseException"}  # names that would catch `assert False`


def _locate(new: ast.AST, old: ast.stmt) -> ast.AST:
    """`new` (generated) placed at `old`'s lines, wherever it has no location of its own."""
    for node in ast.walk(new):
        if "lineno" in node._attributes and not hasattr(node, "lineno"):
            ast.copy_location(node, old)
    return new


def _call(name: str, *args: ast.expr) -> ast.Expr:
    return ast.Expr(ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=list(args), keywords=[]))


def _thunk(node: ast.expr) -> ast.Lambda:
    empty = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
    return ast.Lambda(args=empty, body=node)


def _is_fail(stmt: ast.stmt) -> bool:
    """`assert False`/`assert 0`, `raise AssertionError[(...)]` or `pytest.fail(...)`."""
    if isinstance(stmt, ast.Assert):
        value = literal(stmt.test)
        return value is not NOT_LITERAL and not value
    if isinstance(stmt, ast.Raise) and stmt.exc is not None and stmt.cause is None:
        exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        return isinstance(exc, ast.Name) and exc.id == "AssertionError"
    return isinstance(stmt, ast.Expr) and _pytest_call(stmt.value, "fail")


def _pytest_call(node: ast.AST, attr: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == attr
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "pytest"
    )


def _exception_names(node: ast.expr | None) -> tuple[str, ...] | None:
    """`ValueError` -> ("ValueError",), `mod.Err` -> ("Err",), a tuple of those; else None."""
    if isinstance(node, ast.Tuple):
        names = [_exception_names(e) for e in node.elts]
        return None if not names or None in names else tuple(n for ns in names for n in ns)
    if isinstance(node, ast.Name):
        return (node.id,)
    if isinstance(node, ast.Attribute):
        return (node.attr,)
    return None


def _expected_raise(
    stmts: list[ast.stmt], i: int
) -> tuple[list[ast.stmt], tuple[str, ...], int, bool] | None:
    """(block, exception names, statements consumed, return after) when `stmts[i]` opens one of
    the expected-exception forms of the module docstring (item 2); else None."""
    stmt = stmts[i]
    if isinstance(stmt, ast.With) and len(stmt.items) == 1:
        item = stmt.items[0]
        call = item.context_expr
        if (
            item.optional_vars is None
            and _pytest_call(call, "raises")
            and len(call.args) == 1
            and not call.keywords
        ):
            names = _exception_names(call.args[0])
            return (stmt.body, names, 1, False) if names else None
        return None
    if not isinstance(stmt, ast.Try) or stmt.finalbody or len(stmt.handlers) != 1:
        return None
    handler = stmt.handlers[0]
    names = _exception_names(handler.type)
    if not names or len(handler.body) != 1:
        return None
    action = handler.body[0]
    if isinstance(action, ast.Return) and action.value is None and not stmt.orelse:
        if i + 1 < len(stmts) and _is_fail(stmts[i + 1]) and i + 2 == len(stmts):
            return stmt.body, names, 2, True
        return None
    if not isinstance(action, ast.Pass):
        return None
    if len(stmt.orelse) == 1 and _is_fail(stmt.orelse[0]):
        return stmt.body, names, 1, False
    if not stmt.orelse and len(stmt.body) > 1 and _is_fail(stmt.body[-1]) and not set(names) & _FAILS:
        return stmt.body[:-1], names, 1, False
    return None


_DECIDING = (ast.Assert, ast.Raise)  # anywhere, nested functions included
_LEAVING = (ast.Return, ast.Yield, ast.YieldFrom, ast.Await)  # in the test's own frame
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_UNITTEST = ("fail", "skipTest", "subTest")


def _verdict_call(node: ast.AST) -> str:
    """`pytest.<anything>`, `self.assert*()`, `self.fail()`: a verdict that is not a check."""
    if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Name):
        return ""
    if node.value.id == "pytest" or (
        node.value.id == "self" and (node.attr.startswith("assert") or node.attr in _UNITTEST)
    ):
        return f"{node.value.id}.{node.attr}"
    return ""


def _deciding(nodes: list[ast.stmt]) -> str:
    """What in `nodes` could decide a test without passing through a check ("" if nothing)."""
    todo = [(stmt, True) for stmt in nodes]
    while todo:
        node, own_frame = todo.pop()
        what = _verdict_call(node)
        if isinstance(node, _DECIDING) or (own_frame and isinstance(node, _LEAVING)):
            what = f"a {type(node).__name__.lower()}"
        if what:
            return f"{what} at line {node.lineno} is not a check"
        inner = own_frame and not isinstance(node, _SCOPES)
        todo.extend((child, inner) for child in ast.iter_child_nodes(node))
    return ""


def _in_assertion(stmt: ast.Assert) -> str:
    """What in an assertion keeps it from being a check ("" when nothing does)."""
    for node in ast.walk(stmt.test):
        if isinstance(node, ast.NamedExpr):
            return f"an assignment expression in the assertion at line {stmt.lineno}"
        if isinstance(node, ast.Yield | ast.YieldFrom | ast.Await) or _verdict_call(node):
            return (
                f"{_verdict_call(node) or type(node).__name__.lower()} in the assertion at line {stmt.lineno}"
            )
    return ""


class _Rewriter:
    """Rewrites the test functions of one file (numbering checks per test)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def _text(self, node: ast.stmt) -> str:
        line = self.lines[node.lineno - 1].strip() if 0 < node.lineno <= len(self.lines) else ""
        return line[:200]

    def _assert(self, stmt: ast.Assert, checks: list[Check]) -> list[ast.stmt]:
        test = stmt.test
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        out = []
        for part in parts:
            split = Split()
            predicate = split.build(part)
            k = len(checks)
            checks.append(
                Check(CheckKind.VALUES, stmt.lineno, self._text(stmt), predicate, len(split.computed))
            )
            out.append(_call(CHECK, ast.Constant(k), *[_thunk(c) for c in split.computed]))
        return [_locate(new, stmt) for new in out]

    def _raises(self, stmt: ast.stmt, block, names, checks: list[Check], then_return: bool) -> list[ast.stmt]:
        k = len(checks)
        checks.append(Check(CheckKind.RAISED, stmt.lineno, self._text(stmt), raises=names))
        caught = ast.Name(id=_CAUGHT, ctx=ast.Load())
        handler = ast.ExceptHandler(
            type=ast.Name(id="BaseException", ctx=ast.Load()),
            name=_CAUGHT,
            body=[_call(RAISED, ast.Constant(k), caught)],
        )
        wrapped = ast.Try(
            body=block or [ast.Pass()],
            handlers=[handler],
            orelse=[_call(RAISED, ast.Constant(k), ast.Constant(None))],
            finalbody=[],
        )
        return [
            _locate(new, stmt) for new in ([wrapped, ast.Return(value=None)] if then_return else [wrapped])
        ]

    def test(self, func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> SealedTest:
        """Rewrite `func`'s body in place; its `SealedTest`."""
        checks: list[Check] = []
        reason = ""
        if isinstance(func, ast.AsyncFunctionDef):
            reason = "an async test"
        elif func.decorator_list:
            reason = "a decorated test (the decorator may replace or repeat it)"
        body, i, stmts = [], 0, func.body
        while i < len(stmts):
            stmt = stmts[i]
            blocked = _in_assertion(stmt) if isinstance(stmt, ast.Assert) else ""
            found = None if isinstance(stmt, ast.Assert) else _expected_raise(stmts, i)
            if isinstance(stmt, ast.Assert) and not blocked:
                body += self._assert(stmt, checks)
                i += 1
            elif found is not None and not _deciding(found[0]):
                block, names, used, then_return = found
                body += self._raises(stmt, block, names, checks, then_return)
                i += used
            else:
                reason = reason or blocked or _deciding([stmt])
                body.append(stmt)
                i += 1
        if not checks:
            reason = reason or "no assertion the harness can check"
        func.body = body or [ast.Pass()]
        return SealedTest(name, tuple(checks), reason)


def _test_functions(tree: ast.Module):
    """(node, test name) of module-level test* functions and test* methods of top-level classes."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            yield node, node.name
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test"):
                    yield item, f"{node.name}::{item.name}"


def _strip_docstrings(tree: ast.Module) -> None:
    """Drop bare string statements (docstrings): they could spell out what a test expects."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and all(isinstance(s, ast.stmt) for s in body):
            kept = [
                s
                for s in body
                if not (
                    isinstance(s, ast.Expr)
                    and isinstance(s.value, ast.Constant)
                    and isinstance(s.value.value, str)
                )
            ]
            node.body = kept or [ast.Pass()]


def _drop_pytest_import(tree: ast.Module) -> None:
    """`import pytest` goes when nothing else uses it (its rewritten `raises` blocks needed it)."""
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "pytest"]
    if uses:
        return
    tree.body = [
        s
        for s in tree.body
        if not (
            isinstance(s, ast.Import) and [a.name for a in s.names] == ["pytest"] and not s.names[0].asname
        )
    ] or [ast.Pass()]


def _stray(tree: ast.Module, tests: set[int]) -> str:
    """An assertion or raise outside the test functions (helpers, module level); "" if none."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if id(node) in tests:
            continue
        if isinstance(node, ast.Assert | ast.Raise):
            return f"the file's helpers assert or raise (line {node.lineno}), outside any check"
        todo.extend(ast.iter_child_nodes(node))
    return ""


def rewrite(source: bytes, path: str, filename: str) -> RewrittenFile:
    """The rewritten module and the checks of every test in `source` (the file `path`, compiled
    under `filename`); `error` says why it cannot be run (then every test of it is an ERROR)."""
    if len(source) > MAX_SOURCE_BYTES:
        return RewrittenFile(path, error=f"import failed: {path} is larger than {MAX_SOURCE_BYTES} bytes")
    try:
        tree = ast.parse(source, filename)
        from importlib.util import decode_source

        lines = decode_source(source).splitlines()
        found = list(_test_functions(tree))
        stray = _stray(tree, {id(node) for node, _ in found})
        rewriter = _Rewriter(lines)
        tests = {}
        for node, name in found:
            sealed = rewriter.test(node, name)
            tests[name] = SealedTest(name, sealed.checks, stray or sealed.unsealed)
        _strip_docstrings(tree)
        _drop_pytest_import(tree)
        code = compile(ast.fix_missing_locations(tree), filename, "exec", dont_inherit=True)
        return RewrittenFile(path, marshal.dumps(code), "", tests, tuple(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError, TypeError) as exc:
        where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        return RewrittenFile(path, error=f"import failed: {type(exc).__name__}: {exc}{where}"[:300])
