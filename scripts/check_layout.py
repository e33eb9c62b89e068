"""Layout checks of the source tree: no import circles (module and package level), imports that
flow the documented way, no file over 400 lines, no function over 80.

    python scripts/check_layout.py        # exit 1 and a list of problems, or "layout ok"

Circles are looked for between modules and between sub-packages (a module directly in a
top-level package is a node of its own). Packages and what each may import (`../shared/docs/architecture.md`): algorithms/ and envs/
are leaves; benchmarks/ uses envs/; results/ uses benchmarks/ (scoring) and never bench/ or
torch; bench/ composes them all (its subcommands in bench/commands/ also start sweeps/);
sweeps/ drives runs as `bench` child processes, so it imports nothing from bench/ (the command
validates the config layers it produces).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("algorithms", "envs", "benchmarks", "results", "bench", "sweeps")
ALLOWED = {
    "algorithms": set(),
    "envs": set(),
    "benchmarks": {"envs"},
    "results": {"benchmarks", "envs"},
    "bench": {"algorithms", "envs", "benchmarks", "results"},
    "sweeps": {"algorithms", "envs", "benchmarks", "results"},
}
CLI_MAY_IMPORT = {"bench.commands": {"sweeps"}, "bench.cli": {"sweeps"}}
"""The command line sits on top of everything: `bench compare` and `bench sweep` start sweeps/,
and `bench.cli` turns its error type into a one-line message."""
FORBIDDEN_THIRD_PARTY = {"results": {"torch", "transformers", "optuna"}}
MAX_FILE_LINES, MAX_FUNCTION_LINES = 400, 80


def module_name(path: Path) -> str:
    """`bench/train/loop.py` -> `bench.train.loop`; a package's `__init__.py` -> the package."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module this one imports, at any depth (lazy imports count: they still are arrows)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found |= {f"{target}.{alias.name}" for alias in node.names}
    return found


def main() -> int:
    """Print every layout problem; exit 1 if there is any."""
    files = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))
    modules = {module_name(p): p for p in files}
    graph: dict[str, set[str]] = {}
    problems: list[str] = []
    for name, path in modules.items():
        text = path.read_text()
        tree = ast.parse(text)
        targets = imports_of(tree, name, path.name == "__init__.py")
        graph[name] = {t for t in targets if t in modules and t != name}
        top = name.split(".")[0]
        for t in targets:
            root = t.split(".")[0]
            extra = next(
                (v for k, v in CLI_MAY_IMPORT.items() if name == k or name.startswith(k + ".")), set()
            )
            if root in PACKAGES and root != top and root not in ALLOWED[top] | extra:
                problems.append(f"{name} imports {t}: {top}/ may not import {root}/")
            if root in FORBIDDEN_THIRD_PARTY.get(top, ()):
                problems.append(f"{name} imports {t}: {top}/ must not need {root}")
        lines = text.count("\n")
        if lines > MAX_FILE_LINES:
            problems.append(f"{path.relative_to(ROOT)}: {lines} lines (> {MAX_FILE_LINES})")
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    problems.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines")
    problems += [f"import circle: {' -> '.join(c)}" for c in circles(graph)]
    package_graph: dict[str, set[str]] = {}
    for name, targets in graph.items():
        src = package_of(name, modules)
        package_graph.setdefault(src, set()).update(
            package_of(t, modules) for t in targets if package_of(t, modules) != src
        )
    problems += [f"package circle: {' -> '.join(c)}" for c in circles(package_graph)]
    for p in problems:
        print(p)
    print("layout ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


def package_of(module: str, modules: dict[str, Path]) -> str:
    """The node a module counts as in the package graph: its sub-package (`bench.train.loop`
    -> `bench.train`); a module directly in a top-level package stands for itself (`bench.cli`
    at the top and `bench.config` at the bottom share a folder, not a layer)."""
    path = modules[module]
    if path.name == "__init__.py":
        return module
    parent = module.rpartition(".")[0]
    return module if "." not in parent else parent


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    sys.exit(main())
