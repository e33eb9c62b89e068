"""`InMemoryWorkspace`: a repository held in a dict, for demonstrations and tests.

No git, no sandbox, no processes: files are strings, `diff` is computed with difflib in git's
format and `apply_patch` understands exactly the unified diffs that `diff` writes (plus new
and deleted files). It cannot run tests (`run_tests` raises NotImplementedError), so it is only
for the scripted demonstrations of `envs.swe.synthetic` and for unit tests of the scaffold;
episodes that need tests use a real runtime (`local`, `docker`). `InMemoryRuntime` serves such
workspaces and grades by comparing files with known solutions (no code runs).
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Mapping

from envs.swe.instance import SWEInstance
from envs.swe.runtime import CommandResult, PatchGrade, Runtime, Workspace
from envs.swe.scan import FileChange

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def clean_path(path: str) -> str:
    """`path` normalised relative to the repository root; ValueError when it leaves the root."""
    path = path.strip()
    norm = posixpath.normpath(path) if path else ""
    if not norm or norm == "." or norm.startswith("/") or norm == ".." or norm.startswith("../"):
        raise ValueError(f"path {path!r} is outside the repository")
    return norm


def file_diff(path: str, old: str | None, new: str | None) -> str:
    """A git-style diff of one file (`old`/`new` None for a created/deleted file); "" if equal.

    Lines are compared with their newlines; a file whose last line lacks one gets git's
    "\\ No newline at end of file" marker, so `apply_unified_diff` restores it exactly.
    """
    if old == new:
        return ""
    head = [f"diff --git a/{path} b/{path}"]
    if old is None:
        head.append("new file mode 100644")
    if new is None:
        head.append("deleted file mode 100644")
    head += [
        f"--- {'/dev/null' if old is None else 'a/' + path}",
        f"+++ {'/dev/null' if new is None else 'b/' + path}",
    ]
    body = []
    a, b = (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True)
    for line in list(difflib.unified_diff(a, b, n=3))[2:]:  # drop difflib's own ---/+++ lines
        body.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "\n".join(head) + "\n" + "".join(body)


def apply_unified_diff(files: Mapping[str, str], patch: str) -> dict[str, str]:
    """`files` with `patch` applied (a new dict); ValueError naming the file when a hunk's
    context does not match. Supports what `file_diff` writes: modified, new, deleted files."""
    result = dict(files)
    for section in re.split(r"^(?=diff --git )", patch, flags=re.MULTILINE):
        if not section.startswith("diff --git "):
            continue
        lines = section.splitlines(keepends=True)
        old_name = next((ln[4:].strip() for ln in lines if ln.startswith("--- ")), None)
        new_name = next((ln[4:].strip() for ln in lines if ln.startswith("+++ ")), None)
        if old_name is None or new_name is None:
            raise ValueError(f"malformed diff section: {lines[0].strip()}")
        path = clean_path((new_name if new_name != "/dev/null" else old_name).split("/", 1)[1])
        if old_name != "/dev/null" and path not in result:
            raise ValueError(f"{path}: file does not exist")
        source = [] if old_name == "/dev/null" else result[path].splitlines(keepends=True)
        out = _apply_hunks(path, source, lines)
        if new_name == "/dev/null":
            result.pop(path, None)
        else:
            result[path] = "".join(out)
    return result


def _apply_hunks(path: str, source: list[str], lines: list[str]) -> list[str]:
    """The lines of one file after the hunks found in `lines` (its diff section)."""
    out: list[str] = []
    pos = 0  # next unconsumed index of `source`
    i = 0
    while i < len(lines):
        match = _HUNK.match(lines[i])
        i += 1
        if not match:
            continue
        start = int(match.group(1)) - (0 if match.group(2) == "0" else 1)
        if start < pos:
            raise ValueError(f"{path}: overlapping hunks")
        out += source[pos:start]
        pos = start
        while i < len(lines) and not lines[i].startswith(("@@", "diff --git ")):
            line = lines[i]
            tag, text = line[:1], line[1:]
            if i + 1 < len(lines) and lines[i + 1].startswith("\\"):
                text = text.rstrip("\n")  # "\ No newline at end of file" belongs to this line
            if tag in (" ", "-"):
                if pos >= len(source) or source[pos] != text:
                    raise ValueError(f"{path}: patch does not apply at line {pos + 1}")
                pos += 1
            if tag in (" ", "+"):
                out.append(text)
            i += 2 if i + 1 < len(lines) and lines[i + 1].startswith("\\") else 1
    return out + source[pos:]


class InMemoryWorkspace(Workspace):
    """A working copy held in memory: `files` maps relative paths to their text.

    The base state is a copy of `files` taken at construction; `diff` compares against it.
    """

    def __init__(self, instance: SWEInstance, files: Mapping[str, str]):
        """Start from `files` (path -> text); `instance` is the SWE instance it belongs to."""
        self.instance = instance
        self.base = {clean_path(p): t for p, t in files.items()}
        self.files = dict(self.base)
        self.closed = False

    async def list_files(self) -> list[str]:
        """Every file, sorted."""
        return sorted(self.files)

    async def read_file(self, path: str) -> str:
        """The text of `path` (FileNotFoundError when absent)."""
        path = clean_path(path)
        if path not in self.files:
            raise FileNotFoundError(f"no such file: {path}")
        return self.files[path]

    async def write_file(self, path: str, text: str) -> None:
        """Replace or create `path`."""
        self.files[clean_path(path)] = text

    async def run_tests(self, test_ids: list[str]) -> dict[str, str]:
        """Not possible in memory: raises NotImplementedError (the scaffold reports it)."""
        raise NotImplementedError("this workspace cannot run tests (in-memory, demonstrations only)")

    async def apply_patch(self, patch: str) -> CommandResult:
        """Apply a diff in `file_diff`'s format; returncode 1 and the reason when it does not apply."""
        try:
            self.files = apply_unified_diff(self.files, patch)
        except (ValueError, IndexError) as exc:
            return CommandResult(returncode=1, output=f"error: {exc}")
        return CommandResult(returncode=0, output="")

    async def diff(self) -> str:
        """Changes against the base state, file by file in path order (git's format)."""
        paths = sorted(set(self.base) | set(self.files))
        return "".join(file_diff(p, self.base.get(p), self.files.get(p)) for p in paths)

    async def changes(self) -> list[FileChange]:
        """Every path whose text differs from the base state, as regular files (mode 0o100644)."""
        return [
            FileChange(
                p,
                0o100644 if p in self.base else 0,
                0o100644 if p in self.files else 0,
                None if p not in self.base else self.base[p].encode(),
                None if p not in self.files else self.files[p].encode(),
            )
            for p in await self.changed_paths()
        ]

    async def changed_paths(self) -> list[str]:
        """Paths whose text differs from the base state (modified, deleted, new)."""
        return sorted(p for p in set(self.base) | set(self.files) if self.base.get(p) != self.files.get(p))

    async def reset_paths(self, paths: list[str]) -> None:
        """Back to the base text, or gone when the base has no such file."""
        for path in paths:
            if path in self.base:
                self.files[path] = self.base[path]
            else:
                self.files.pop(path, None)

    async def close(self) -> None:
        """Nothing to release; marks the workspace closed (idempotent)."""
        self.closed = True


class InMemoryRuntime(Runtime):
    """In-memory repositories; a patch "resolves" an instance when, applied to the base files,
    it yields exactly the solution's text for every file the solution names.

    No code is executed, so it is safe for any patch, but an equivalent alternative fix counts
    as unresolved: it is for demonstrations and tests, never for training rewards.
    """

    name = "memory"

    def __init__(self) -> None:
        """An empty runtime; `add` repositories to it."""
        self.repos: dict[str, dict[str, str]] = {}
        self.solutions: dict[str, dict[str, str]] = {}

    def add(self, instance_id: str, files: Mapping[str, str], solution: Mapping[str, str]) -> None:
        """Serve `files` for `instance_id`; `solution`: path -> text of the fixed files."""
        self.repos[instance_id], self.solutions[instance_id] = dict(files), dict(solution)

    def check(self, instance: SWEInstance) -> None:
        """KeyError for instances never added."""
        if instance.instance_id not in self.repos:
            raise KeyError(f"unknown in-memory instance {instance.instance_id!r}")

    async def open(self, instance: SWEInstance) -> InMemoryWorkspace:
        """A fresh copy of the instance's files."""
        self.check(instance)
        return InMemoryWorkspace(instance, self.repos[instance.instance_id])

    async def grade(self, instance: SWEInstance, patch: str) -> PatchGrade:
        """Resolved iff `patch` applies and produces the solution's files exactly."""
        workspace = await self.open(instance)
        applied = await workspace.apply_patch(patch)
        if applied.returncode != 0:
            return PatchGrade(resolved=False, applied=False, log=applied.output)
        solution = self.solutions[instance.instance_id]
        return PatchGrade(
            resolved=all(workspace.files.get(p) == t for p, t in solution.items()), applied=True
        )
