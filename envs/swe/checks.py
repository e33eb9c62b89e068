"""The checks the SWE grader keeps in the harness: one per assertion of a test.

`envs.swe.oracle` makes them from a test file and `envs.swe.verdict` applies them to the values
a sandboxed run reports. A VALUES check keeps the assertion's expression with every sub-expression
the run must compute replaced by a name (`v0`, `v1`, ...): the literals, comparison operators,
`not`, `and` and `or` stay here (`split`). A RAISED check keeps the names of the exceptions a
block must raise.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from enum import StrEnum

_SINGLETONS = (None, True, False, Ellipsis)


class CheckKind(StrEnum):
    """What the run sends for a check: computed VALUES, or what a block RAISED."""

    VALUES = "values"
    RAISED = "raised"


@dataclass(frozen=True)
class Check:
    """One assertion as the harness keeps it.

    VALUES: `predicate` is an expression over the names `v0`, `v1`, ... (the values the run
    sends, `values` of them) and literals; RAISED: `raises` are the accepted exception names.
    """

    kind: CheckKind
    line: int
    text: str
    predicate: ast.expr | None = None
    values: int = 0
    raises: tuple[str, ...] = ()


@dataclass(frozen=True)
class SealedTest:
    """A test function's checks, in the order they run; `unsealed`: why its outcome rests on the
    sandboxed run's word ("" when it does not)."""

    name: str
    checks: tuple[Check, ...]
    unsealed: str = ""


@dataclass(frozen=True)
class RewrittenFile:
    """A test file after `rewrite`: the module the run executes (marshalled code object), its
    tests by name (`func` or `Class::method`), or `error` when it cannot be compiled; `lines`:
    its source lines, for details (never sent to the run)."""

    path: str
    code: bytes = b""
    error: str = ""
    tests: dict[str, SealedTest] = field(default_factory=dict)
    lines: tuple[str, ...] = ()


NOT_LITERAL = object()
"""What `literal` returns for an expression that is not a literal."""


def literal(node: ast.AST):
    """The value of a literal expression (`ast.literal_eval`'s language), else `NOT_LITERAL`."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_LITERAL


class Split:
    """Splits an assertion's expression into what stays here (`build`'s result) and what the run
    computes (`computed`, in the order of the `vN` names)."""

    def __init__(self) -> None:
        self.computed: list[ast.expr] = []

    def _leaf(self, node: ast.expr) -> ast.expr:
        self.computed.append(node)
        return ast.Name(id=f"v{len(self.computed) - 1}", ctx=ast.Load())

    def build(self, node: ast.expr) -> ast.expr:
        """The kept expression for `node` (literals copied, computed parts as `vN` names)."""
        if literal(node) is not NOT_LITERAL:
            return node
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return ast.UnaryOp(op=ast.Not(), operand=self.build(node.operand))
        if isinstance(node, ast.BoolOp):
            return ast.BoolOp(op=node.op, values=[self.build(v) for v in node.values])
        if isinstance(node, ast.Compare) and self._comparable_here(node):
            left = self.build(node.left)
            return ast.Compare(left=left, ops=node.ops, comparators=[self.build(c) for c in node.comparators])
        return self._leaf(node)

    @staticmethod
    def _comparable_here(node: ast.Compare) -> bool:
        """Identity compares only against None/True/False/...: values sent as data are copies."""
        operands = [node.left, *node.comparators]
        for i, op in enumerate(node.ops):
            if isinstance(op, ast.Is | ast.IsNot):
                pair = (literal(operands[i]), literal(operands[i + 1]))
                if not any(v is not NOT_LITERAL and any(v is s for s in _SINGLETONS) for v in pair):
                    return False
        return True


def builtin_exception(name: str) -> type[BaseException] | None:
    """The built-in exception class called `name`, or None."""
    value = getattr(builtins, name, None)
    return value if isinstance(value, type) and issubclass(value, BaseException) else None
