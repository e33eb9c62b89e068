"""What the SWE grader resets in a model patch, and the names of paths and patches it reads.

`protected(path)`: files a model patch may not bring into grading. They are reset to the base
commit after the model patch is applied and before the test patch (`Runtime.grade`), as the
SWE-bench harness does for the test patch's own files, extended to test files in general and to
what Python runs on its own: conftest.py, sitecustomize.py, usercustomize.py, *.pth, compiled
modules (.pyc/.so) and __pycache__. SWE-bench's gold patches never touch test files (the PR's
test changes are the separate test patch), so a gold patch keeps resolving. This runs in the
harness, on the fresh grading copy, where the code under test cannot reach it.

`split_patch` reads the paths a patch's headers name (for the reset, which also takes the
paths git reports changed); the diff scan (`envs.swe.scan`) reads git's view instead.
"""

from __future__ import annotations

import posixpath

HOOK_NAMES = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py"})
"""Files that pytest or the interpreter's site module import without being asked."""
COMPILED_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd", ".pth")
"""Loaded instead of or beside the source (.pth: executed by site at start-up)."""
TEST_DIRS = frozenset({"tests", "test", "testing"})
"""Directory names whose files are tests. Used for swe-mini/swe-synth and real repositories
alike; `django/test/` is library code, so real repositories use `TEST_DIRS_REAL` instead."""
TEST_DIRS_REAL = frozenset({"tests"})


def is_test_path(path: str, dirs: frozenset = TEST_DIRS) -> bool:
    """A test file: in a directory named like `dirs`, or named test_*.py / *_test.py / conftest.py."""
    parts = path.split("/")
    name = parts[-1]
    return (
        any(part in dirs for part in parts[:-1])
        or name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
    )


def is_test_module(path: str) -> bool:
    """A module pytest collects tests from by default: test_*.py or *_test.py."""
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def is_hook_path(path: str) -> bool:
    """A file Python or pytest runs unasked, or a compiled module (see the module docstring)."""
    parts = path.split("/")
    return parts[-1] in HOOK_NAMES or path.endswith(COMPILED_SUFFIXES) or "__pycache__" in parts


def protected(path: str, test_patch_paths: frozenset = frozenset(), dirs: frozenset = TEST_DIRS) -> bool:
    """Whether grading resets `path` to the base commit (module docstring)."""
    return path in test_patch_paths or is_test_path(path, dirs) or is_hook_path(path)


def _unquote(name: str) -> str:
    """A path as git writes it in a diff header: C-quoted when unusual ("a/\\303\\244.py")."""
    if not (name.startswith('"') and name.endswith('"')):
        return name
    raw = name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    return raw.encode("latin-1", "replace").decode("utf-8", "replace")


def _header_path(line: str) -> str | None:
    """The repository path a diff header line names, or None (`/dev/null`, other lines)."""
    for head, strip in (
        ("--- ", True),
        ("+++ ", True),
        ("rename from ", False),
        ("rename to ", False),
        ("copy from ", False),
        ("copy to ", False),
        ("Index: ", False),
    ):
        if line.startswith(head):
            name = _unquote(line[len(head) :].split("\t")[0].rstrip())
            if name == "/dev/null":
                return None
            if strip and name[:2] in ("a/", "b/"):
                name = name[2:]
            return posixpath.normpath(name)
    return None


def split_patch(patch: str) -> dict[str, list[str]]:
    """Path -> lines the patch adds to it, for every path a header of the patch names (both
    sides of a rename or copy; git's `diff --git a/X b/Y` line too)."""
    files: dict[str, list[str]] = {}
    current: list[str] = []
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            names = line[len("diff --git ") :].split(" b/", 1)
            current = []
            for name in (names[0].removeprefix("a/"), names[-1]):
                files.setdefault(posixpath.normpath(_unquote(name)), current)
            continue
        path = _header_path(line)
        if path is not None:
            current = files.setdefault(path, current if line.startswith("+++ ") else [])
        elif line.startswith("+") and not line.startswith("+++ "):
            current.append(line[1:])
    return files


def parse_status(porcelain: str) -> list[str]:
    """Paths of `git status --porcelain=v1 -z --no-renames` output ("XY path\\0" entries);
    a directory listed by --ignored loses its trailing slash."""
    return [entry[3:].rstrip("/") for entry in porcelain.split("\0") if len(entry) > 3]
