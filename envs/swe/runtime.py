"""Where an SWE episode's repository lives and its tests run: the runtime protocol.

A `Runtime` opens a `Workspace` per episode: a working copy of one instance's repository at
its `base_commit`. The agent scaffold (`envs.swe.scaffold`) reads, searches and edits files
and runs tests only through this interface, so the same scaffold drives

* `local` (`envs.swe.local_runtime`): a temporary git working copy of an embedded repository
  (`swe-mini`), every test run inside `envs.sandbox` with limits;
* `docker` (`envs.swe.docker_runtime`): the official SWE-bench image of a real instance.

Grading follows SWE-bench: a fresh workspace at the base commit, the model's patch applied,
the files it may not change reset to the base commit (the test patch's files, as the harness
does, and test files, conftest/site hooks and compiled modules in general: `envs.swe.grading`),
then the instance's `test_patch`, then the FAIL_TO_PASS and PASS_TO_PASS tests run; the
instance is resolved when all of them succeed (`envs.swe.instance.is_resolved`), none of them
is unsealed (its outcome only the sandboxed run's word, `envs.swe.oracle`) and, where the
runtime vetoes, nothing points to tampering (`PatchGrade.tamper`; the threat model is in
`envs.swe`'s docstring).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from envs.swe.grading import TEST_DIRS_REAL, is_hook_path, protected, split_patch
from envs.swe.instance import SWEInstance, harness_tests_status, is_resolved
from envs.swe.scan import FileChange, changes_from_diff, scan_changes


class RuntimeUnavailable(RuntimeError):
    """The runtime cannot run here (no Docker daemon, missing extra, unknown repository);
    the message says what is missing and what to do instead."""


class WorkspaceLost(RuntimeUnavailable):
    """What ran an episode's workspace stopped under it (its container died or was removed, the
    daemon went away): the episode ends with reward 0 and the cause (`envs.swe.scaffold`)."""


@dataclass
class CommandResult:
    """Outcome of a command in a workspace; `output` is stdout and stderr, truncated."""

    returncode: int | None
    output: str
    timed_out: bool = False


@dataclass
class PatchGrade:
    """The SWE-bench verdict on one patch."""

    resolved: bool
    applied: bool
    tests: dict[str, str] = field(default_factory=dict)  # test id -> PASSED/FAILED/ERROR/SKIPPED
    tests_status: dict = field(default_factory=dict)  # the harness's FAIL_TO_PASS/PASS_TO_PASS split
    log: str = ""
    tamper: list[str] = field(default_factory=list)
    """Signs of tampering: findings of the diff scan, hook files the patch brought, and reports
    of the test run that conflict (`envs.swe.verdict`)."""
    reset: list[str] = field(default_factory=list)
    """Files of the model patch that grading reset to the base commit (tests, hooks, compiled)."""


class Workspace(ABC):
    """A working copy of `instance`'s repository; paths are relative to the repository root."""

    instance: SWEInstance

    @abstractmethod
    async def list_files(self) -> list[str]:
        """Every tracked or new file in the working copy (relative paths, sorted)."""

    @abstractmethod
    async def read_file(self, path: str) -> str:
        """The text of `path`; FileNotFoundError when it does not exist; ValueError when the
        path leaves the repository."""

    @abstractmethod
    async def write_file(self, path: str, text: str) -> None:
        """Replace (or create) `path` with `text`; ValueError when the path leaves the repository."""

    @abstractmethod
    async def run_tests(self, test_ids: list[str]) -> dict[str, str]:
        """Run the given tests (SWE-bench ids such as `tests/test_calc.py::test_add`) in the
        workspace's sandbox; each id -> PASSED, FAILED, ERROR or SKIPPED (missing = not run)."""

    @abstractmethod
    async def apply_patch(self, patch: str) -> CommandResult:
        """Apply a unified diff (`git apply`); returncode 0 when it applied cleanly."""

    @abstractmethod
    async def diff(self) -> str:
        """The working copy's changes against the base commit, as a git diff (the model patch)."""

    @abstractmethod
    async def close(self) -> None:
        """Delete the working copy and stop whatever runs it. Idempotent."""

    async def changes(self) -> list[FileChange]:
        """Every path that differs from the base commit, in git's view, for the diff scan
        (`envs.swe.scan`). By default the paths and modes of `diff()` (git's own output), without
        contents; runtimes that can read both versions of each file give them."""
        return changes_from_diff(await self.diff())

    async def changed_paths(self) -> list[str]:
        """Paths that differ from the base commit (modified, deleted or new), for grading; files
        the copy had before the patch but git ignores may be left out."""
        raise NotImplementedError(f"{type(self).__name__} cannot list its changes")

    async def reset_paths(self, paths: list[str]) -> None:
        """Put each path back as at the base commit (its base content, or no file at all)."""
        raise NotImplementedError(f"{type(self).__name__} cannot reset files")


class Runtime(ABC):
    """Opens workspaces for instances and grades patches the SWE-bench way."""

    name: ClassVar[str]
    scan_veto: ClassVar[bool] = False
    """Whether any finding of the diff scan (`envs.swe.scan.scan_changes` with its source
    patterns) means no reward: right for tiny repositories whose fixes never need those names."""
    test_dirs: ClassVar[frozenset[str]] = TEST_DIRS_REAL
    """Directory names whose files count as tests (reset before grading)."""

    @abstractmethod
    def check(self, instance: SWEInstance) -> None:
        """Raise RuntimeUnavailable, fast and with a clear message, if `instance` cannot run here."""

    @abstractmethod
    async def open(self, instance: SWEInstance) -> Workspace:
        """A fresh working copy of `instance` at its base commit."""

    async def grade(self, instance: SWEInstance, patch: str) -> PatchGrade:
        """Resolved or not: fresh workspace, model `patch`, the diff scan on git's view of what it
        changed, protected files reset, then `evaluate` (test_patch and the FAIL_TO_PASS +
        PASS_TO_PASS tests)."""
        workspace = await self.open(instance)
        try:
            findings: list[str] = []
            if patch.strip():
                applied = await workspace.apply_patch(patch)
                if applied.returncode != 0:
                    return PatchGrade(resolved=False, applied=False, log=applied.output)
                findings = scan_changes(
                    await workspace.changes(), sources=self.scan_veto, dirs=self.test_dirs
                )
            reset = await self.reset_protected(workspace, instance, patch)
            findings += [f"{p}: a file Python or pytest runs unasked" for p in reset if is_hook_path(p)]
            findings = list(dict.fromkeys(findings))
            if findings and self.scan_veto:  # the tests would prove nothing: not even run
                log = "not graded: the patch uses what only tampering needs here: " + "; ".join(findings)
                return PatchGrade(resolved=False, applied=True, log=log, tamper=findings, reset=reset)
            grade = await self.evaluate(workspace, instance)
            grade.tamper, grade.reset = [*findings, *grade.tamper], reset
            grade.resolved = grade.resolved and not (grade.tamper and self.scan_veto)
            return grade
        finally:
            await workspace.close()

    async def reset_protected(self, workspace: Workspace, instance: SWEInstance, patch: str) -> list[str]:
        """Reset what the model patch changed among protected paths (`envs.swe.grading`): the
        paths the workspace reports changed and those the patch's headers name (which catches
        files git ignores). Returns them, sorted."""
        test_patch_paths = frozenset(split_patch(instance.test_patch))
        named = {p for p in split_patch(patch) if p != ".." and not p.startswith(("/", "../"))}
        changed = set(await workspace.changed_paths()) | named
        paths = sorted(p for p in changed if protected(p, test_patch_paths, self.test_dirs))
        if paths:
            await workspace.reset_paths(paths)
        return paths

    async def evaluate(self, workspace: Workspace, instance: SWEInstance) -> PatchGrade:
        """The verdict on a workspace whose model patch is applied: `test_patch`, then the
        instance's tests through `run_tests`. Runtimes with their own evaluation (the Docker
        harness's eval script) override this step only."""
        if instance.test_patch.strip():
            result = await workspace.apply_patch(instance.test_patch)
            if result.returncode != 0:
                return PatchGrade(
                    resolved=False, applied=True, log="test patch did not apply:\n" + result.output
                )
        tests = await workspace.run_tests([*instance.fail_to_pass, *instance.pass_to_pass])
        status = harness_tests_status(tests, instance.fail_to_pass, instance.pass_to_pass)
        tamper = [f"{t}: {why}" for t, why in getattr(workspace, "last_tamper", {}).items()]
        unsealed = getattr(workspace, "last_unsealed", {})
        log = "".join(
            f"not resolved on the sandboxed run's word: {t}: {why}\n" for t, why in unsealed.items()
        )
        return PatchGrade(
            resolved=is_resolved(status) and not unsealed,
            applied=True,
            tests=tests,
            tests_status=status,
            log=log,
            tamper=tamper,
        )
