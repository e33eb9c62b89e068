"""The `local` SWE runtime: temporary git working copies of swe-mini's embedded repositories
(and of swe-synth's generated ones).

`LocalRuntime.open(instance)` writes the instance's files (`envs.swe.swe_mini.repo_files`, or
`envs.swe.synthetic.bug_for_id` for a generated id) into a fresh temporary directory and
commits them with a fixed identity and date, which reproduces a swe-mini instance's
`base_commit` exactly (checked). Layout of one workspace:

    rlbench-swe-XXXX/      0700, the harness's
        repo/              the working copy: model-editable, the sandbox's working directory
        git/               the git directory, kept outside the working copy
        held/              the test modules, while a test run lasts

Why the git directory lives outside: tests run in `envs.sandbox` as the sandbox's own uid,
which owns `repo/` (the sandbox chowns it). Git itself runs as the harness, outside the
sandbox, so a `.git/config` or hook written by model code would run commands with the
harness's rights; outside `repo/` (and 0700) it is out of the sandbox's reach. Git also runs
without system/global config, hooks or fsmonitor, and diffs without external diff drivers.

Only test runs execute model-editable code, and only inside the sandbox. `run_tests` rewrites
each test file here (`envs.swe.oracle`: the assertions' expected sides stay in the harness),
takes the repository's test modules out of the working copy while the run lasts (into
`held/`, beside it), runs the rewritten modules with `envs.swe.testchild` (standard library
only, so pytest is not needed) and decides every outcome here from the values the run reports
(`envs.swe.verdict`). Grading resets test files and hook or compiled files a patch brings
(`envs.swe.grading`) and, these repositories being tiny and pure, vetoes any patch the diff
scan flags (`LocalRuntime.scan_veto`); `envs.swe`'s docstring has the threat model. Per
workspace the cost is a few small files and four git processes; the sandbox (a uid and a
chown) is created on the first test run.

A test module that imports another test module fails to import (both are out of the copy while
the run lasts); helpers in other files of `tests/` stay. Whatever the code under test leaves in
the copy (FIFOs, links, trees thousands of directories deep, directories without permissions)
is read, written, listed and removed through `envs.sandbox.files`, which never blocks, follows
a link or recurses.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import stat
import sys
import tempfile
import weakref
from pathlib import Path, PurePosixPath

from envs.sandbox import Sandbox, SandboxLimits
from envs.sandbox.files import read_regular, remove_tree, walk, write_regular
from envs.swe import oracle, testchild, verdict
from envs.swe.checks import RewrittenFile, SealedTest
from envs.swe.grading import TEST_DIRS, is_test_module, parse_status
from envs.swe.instance import SWEInstance
from envs.swe.local_git import commit_base, git_changes, git_ok, run_git, write_files
from envs.swe.runtime import CommandResult, Runtime, RuntimeUnavailable, Workspace
from envs.swe.scan import FileChange

_OUTPUT_CHARS = 4000  # of a git command's output kept in CommandResult
DEFAULT_LIMITS = SandboxLimits(
    cpu_seconds=10, wall_seconds=20, memory_mb=512, max_file_mb=8, max_output_chars=1 << 18
)
"""Sandbox limits of one `run_tests` call (the output holds every reported value)."""
MAX_READ_BYTES = 1 << 22
"""Largest file `read_file` returns (a bigger one is cut)."""


@functools.lru_cache(maxsize=3)
def _source(module) -> str:
    """A runner module's source, passed to `python -c` (nothing to copy into the sandbox)."""
    return Path(module.__file__).read_text(encoding="utf-8")


_SEALED = SealedTest("", ())


def _valid_test_id(test_id: str) -> bool:
    """`path/to/test_x.py::name` with a relative path that stays inside the repository."""
    path, sep, name = test_id.partition("::")
    parts = PurePosixPath(path).parts
    plain = "\0" not in test_id and "\n" not in test_id  # the runner's child request is NUL-separated
    return bool(
        plain and sep and name and path.endswith(".py") and parts and parts[0] != "/" and ".." not in parts
    )


def _remove_nested_git(root: Path) -> None:
    """Delete `.git` files/directories that test code created in the working copy (never
    part of a patch: the real git dir lives outside)."""
    for rel, _ in list(walk(root, skip=frozenset({".git"}))):
        if rel.rsplit("/", 1)[-1] == ".git":
            remove_tree(root / rel)


def _release(sandbox: Sandbox | None, remove_copy: weakref.finalize) -> None:
    """Close the sandbox (kills leftovers, frees its uid), then delete the copy, even when
    closing the sandbox failed."""
    try:
        if sandbox is not None:
            sandbox.close()
    finally:
        remove_copy()


class LocalWorkspace(Workspace):
    """A temporary git working copy at the base commit; tests run in its own `Sandbox`."""

    def __init__(
        self, instance: SWEInstance, tmp: Path, limits: SandboxLimits, per_test_seconds: float
    ) -> None:
        """Wrap an opened copy: `tmp/repo` (working tree) and `tmp/git` (git dir)."""
        self.instance = instance
        self.tmp = tmp
        self.root = tmp / "repo"
        self.git_dir = tmp / "git"
        self.limits = limits
        self.per_test_seconds = per_test_seconds
        self.last_details: dict[str, str] = {}
        """Why each test of the last `run_tests` failed (e.g. 'tests/t.py:7: assert ... -> AssertionError')."""
        self.last_log = ""
        """The sandbox's report of the last test run when it was cut (limit hit) or crashed."""
        self.last_tamper: dict[str, str] = {}
        """Signs of a forged report in the last `run_tests`, by test id (`envs.swe.verdict`)."""
        self.last_unsealed: dict[str, str] = {}
        """Tests of the last `run_tests` whose outcome is the sandboxed run's word, and why
        (`envs.swe.oracle`)."""
        self._sandbox: Sandbox | None = None
        self._closed = False
        self._finalizer = weakref.finalize(self, remove_tree, tmp)  # also if never closed

    # -- paths -------------------------------------------------------------------------------
    def _path(self, path: str) -> Path:
        """The absolute path of a repository-relative `path`; ValueError if it leads out."""
        if self._closed:
            raise RuntimeError("this workspace is closed")
        if not isinstance(path, str) or not path.strip() or "\0" in path:
            raise ValueError(f"not a file path: {path!r}")
        rel = PurePosixPath(path)
        if rel.is_absolute() or ".." in rel.parts:
            raise ValueError(f"path must be relative to the repository root and stay inside it: {path!r}")
        if ".git" in rel.parts:
            raise ValueError(f"paths inside .git are not part of the repository: {path!r}")
        target = self.root / rel
        # resolve() follows every symlink on the way: a link pointing out of the repo is refused.
        if not target.resolve().is_relative_to(self.root.resolve()):
            raise ValueError(f"path leads outside the repository (through a symlink): {path!r}")
        return target

    # -- Workspace API -----------------------------------------------------------------------
    async def list_files(self) -> list[str]:
        """Every file in the working copy (relative, sorted), without __pycache__ directories."""
        if self._closed:
            raise RuntimeError("this workspace is closed")
        entries = await asyncio.to_thread(list, walk(self.root, skip=frozenset({"__pycache__"})))
        return sorted(rel for rel, is_dir in entries if not is_dir)

    async def read_file(self, path: str) -> str:
        """The text of `path` (undecodable bytes replaced)."""
        target = self._path(path).resolve()
        if not target.exists():
            raise FileNotFoundError(f"no such file: {path}")
        if target.is_dir():
            raise IsADirectoryError(f"is a directory: {path}")
        # never blocks on a FIFO planted by test code
        return read_regular(target, MAX_READ_BYTES).decode("utf-8", errors="replace")

    async def write_file(self, path: str, text: str) -> None:
        """Create or replace `path`; parent directories are created."""
        self._path(path)  # refuses paths that lead out, .git, links on the way out
        # a new file renamed over the old one: a FIFO or link there is refused, never opened
        write_regular(self.root, path, text.encode("utf-8"))

    async def apply_patch(self, patch: str) -> CommandResult:
        """`git apply` (all hunks or nothing; refuses paths outside the repo or through symlinks)."""
        if self._closed:
            raise RuntimeError("this workspace is closed")
        if patch and not patch.endswith("\n"):
            patch += "\n"  # a missing final newline makes git call the patch corrupt
        result, _ = await run_git(
            self.git_dir, self.root, "apply", "--verbose", "--whitespace=nowarn", "-", stdin=patch
        )
        result.output = result.output[-_OUTPUT_CHARS:]
        return result

    async def diff(self) -> str:
        """Changes against the base commit, new and deleted files included (`git diff` format)."""
        if self._closed:
            raise RuntimeError("this workspace is closed")
        await asyncio.to_thread(_remove_nested_git, self.root)  # git would stage them as submodules
        await git_ok(self.git_dir, self.root, "add", "-A")  # stages new files (index is in git/)
        # HEAD is the only commit: the base (checked against `base_commit` for swe-mini at open)
        return await git_ok(
            self.git_dir, self.root, "diff", "--cached", "--no-ext-diff", "--no-textconv", "--binary", "HEAD"
        )

    async def changes(self) -> list[FileChange]:
        """Every path that differs from the base commit, with modes and contents as git stores
        them (git's view of the working copy: what the diff scan reads)."""
        if self._closed:
            raise RuntimeError("this workspace is closed")
        await asyncio.to_thread(_remove_nested_git, self.root)
        await git_ok(self.git_dir, self.root, "add", "-A")
        return await git_changes(self.git_dir, self.root)

    async def run_tests(self, test_ids: list[str]) -> dict[str, str]:
        """Run the tests in the sandbox; outcomes decided here from the reported values
        (module docstring; `envs.swe.verdict` has the rules)."""
        if self._closed:
            raise RuntimeError("this workspace is closed")
        ids = list(dict.fromkeys(test_ids))
        valid = [t for t in ids if _valid_test_id(t)]
        self.last_details = {t: f"invalid test id: {t!r}" for t in ids if t not in valid}
        self.last_tamper, self.last_unsealed = {}, {}
        outcomes = {t: "ERROR" for t in self.last_details}
        if not valid:
            return outcomes
        if self._sandbox is None:  # created on first use: a uid, and a chown of the copy
            self._sandbox = await asyncio.to_thread(Sandbox, self.limits, self.root)
        files = {path: self._rewrite(path) for path in dict.fromkeys(t.split("::", 1)[0] for t in valid)}
        runnable = []
        for path, rewritten in files.items():
            tests = [[t, t.partition("::")[2]] for t in valid if t.partition("::")[0] == path]
            tests = [pair for pair in tests if pair[1] in rewritten.tests]  # the others are ERRORs
            if tests and not rewritten.error:
                runnable.append({"path": path, "code": rewritten.code.hex(), "tests": tests})
        request = json.dumps({"per_test_seconds": self.per_test_seconds, "files": runnable})
        held = await asyncio.to_thread(self._hold_test_modules)  # a walk: off the event loop
        try:  # -S: no site module, so no .pth file or site/user customisation runs first
            res = await self._sandbox.arun(
                [sys.executable, "-I", "-S", "-B", "-c", _source(testchild)], stdin=request
            )
        finally:
            await asyncio.to_thread(self._restore, held)
        cut = res.killed_reason or (f"exit code {res.returncode}" if res.returncode else "")
        self.last_log = res.as_observation() if cut else ""
        found, details, self.last_tamper = verdict.judge(res.stdout, files, valid, cut)
        self.last_details.update(details)
        for t in valid:
            path, _, name = t.partition("::")
            if files[path].tests.get(name, _SEALED).unsealed:
                self.last_unsealed[t] = files[path].tests[name].unsealed
        merged = {**outcomes, **found}
        return {t: merged[t] for t in ids}

    def _rewrite(self, path: str) -> RewrittenFile:
        """The test file `path` as `envs.swe.oracle` rewrites it (an error when unreadable)."""
        try:
            source = read_regular(self._path(path), oracle.MAX_SOURCE_BYTES + 1)
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            return RewrittenFile(path, error=f"import failed: cannot read {path}: {why}")
        return oracle.rewrite(source, path, str(self.root.resolve() / path))

    def _hold_test_modules(self) -> list[tuple[str, Path]]:
        """Move every test module out of the working copy (into `held/`, which the sandbox cannot
        see) for the length of a run: the run gets their rewritten code, never their text."""
        held_dir = self.tmp / "held"
        held_dir.mkdir(mode=0o700, exist_ok=True)
        held = []
        for n, (rel, is_dir) in enumerate(walk(self.root, skip=frozenset({".git"}))):
            if not is_dir and is_test_module(rel) and not (self.root / rel).is_symlink():
                os.rename(self.root / rel, held_dir / str(n))
                held.append((rel, held_dir / str(n)))
        return held

    def _restore(self, held: list[tuple[str, Path]]) -> None:
        """Put the held test modules back where they were, replacing what the run put there;
        one whose directory the run replaced by a link or a file is dropped."""
        root = self.root.resolve()
        for rel, path in held:
            target = root / rel
            try:
                if target.parent.resolve() != target.parent:  # a link on the way: never follow it
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                remove_tree(target)
                os.rename(path, target)
            except OSError:
                continue
        remove_tree(self.tmp / "held")

    async def changed_paths(self) -> list[str]:
        """Modified, deleted and new files, ignored ones included (the copy starts from the
        base files alone, so an ignored file, e.g. a .pyc, came from a patch or a test run)."""
        if self._closed:
            raise RuntimeError("this workspace is closed")
        await asyncio.to_thread(_remove_nested_git, self.root)
        status = await git_ok(
            self.git_dir,
            self.root,
            "status",
            "--porcelain=v1",
            "-z",
            "--no-renames",
            "--untracked-files=all",
            "--ignored=matching",
        )
        return parse_status(status)

    async def reset_paths(self, paths: list[str]) -> None:
        """Files of the base commit get their base content back; the others are deleted (first,
        so that a symlink standing where a base directory was is gone before the checkout)."""
        if self._closed:
            raise RuntimeError("this workspace is closed")
        tree = await git_ok(self.git_dir, self.root, "ls-tree", "-r", "-z", "--name-only", "HEAD")
        base = set(tree.split("\0"))
        root = self.root.resolve()
        for rel in sorted(set(paths) - base):
            path = self.root / rel
            if not path.parent.resolve().is_relative_to(root):
                continue  # never created by `git apply`, which refuses to write through a symlink
            if path.is_dir() and not path.is_symlink():
                remove_tree(path)
            elif path.is_symlink() or path.exists():
                path.unlink()
        restore = sorted(set(paths) & base)
        if restore:
            await git_ok(self.git_dir, self.root, "--literal-pathspecs", "checkout", "HEAD", "--", *restore)

    async def close(self) -> None:
        """Stop the sandbox (kills leftovers, frees its uid) and delete the copy. Idempotent."""
        if self._closed:
            return
        self._closed = True
        sandbox, self._sandbox = self._sandbox, None
        # Off the event loop: killing leftovers scans /proc, and rmdir is slow on some disks.
        await asyncio.to_thread(_release, sandbox, self._finalizer)


class LocalRuntime(Runtime):
    """Workspaces on this machine for swe-mini's embedded repositories and swe-synth's
    generated ones (no Docker, no network)."""

    name = "local"
    scan_veto = True  # swe-mini/swe-synth fixes are one-line edits of small pure functions
    test_dirs = TEST_DIRS

    def __init__(self, limits: SandboxLimits = DEFAULT_LIMITS, per_test_seconds: float = 4.0) -> None:
        """`limits`: of each test run (sandbox); `per_test_seconds`: wall time of one test."""
        self.limits = limits
        self.per_test_seconds = per_test_seconds

    def check(self, instance: SWEInstance) -> None:
        """RuntimeUnavailable unless git exists and the instance's repository is embedded
        (swe-mini) or generated from its id (swe-synth)."""
        from envs.swe.swe_mini import has_repo
        from envs.swe.synthetic import is_generated_id

        if not (has_repo(instance.instance_id) or is_generated_id(instance.instance_id)):
            raise RuntimeUnavailable(
                f"{instance.instance_id} ({instance.repo}): the local runtime only has swe-mini's "
                "embedded repositories and swe-synth's generated ones; real SWE-bench instances "
                "need `--runtime docker`"
            )
        if shutil.which("git") is None:
            raise RuntimeUnavailable(
                "the local runtime needs git on PATH (install git, e.g. apt-get install git)"
            )

    async def open(self, instance: SWEInstance) -> LocalWorkspace:
        """A fresh working copy at `instance.base_commit` (rebuilt and checked against it; a
        generated swe-synth repository has no recorded commit, its id is what pins it)."""
        from envs.swe import synthetic
        from envs.swe.swe_mini import repo_files

        self.check(instance)
        generated = synthetic.is_generated_id(instance.instance_id)
        files = (
            synthetic.bug_for_id(instance.instance_id).files
            if generated
            else repo_files(instance.instance_id)
        )
        tmp = Path(tempfile.mkdtemp(prefix="rlbench-swe-"))  # 0700: only the harness (and
        try:  # the sandbox, through the bind mount of its workdir) can reach inside
            root, git_dir = tmp / "repo", tmp / "git"
            root.mkdir()
            write_files(root, files)
            head = await commit_base(git_dir, root)
            git_dir.chmod(stat.S_IRWXU)
            if not generated and head != instance.base_commit:
                raise RuntimeError(
                    f"{instance.instance_id}: rebuilding the repository gave commit {head}, but the "
                    f"instance says base_commit {instance.base_commit}; the embedded files and the "
                    "instance disagree (regenerate them with `python -m envs.swe.swe_mini_build`)"
                )
        except BaseException:
            remove_tree(tmp)
            raise
        return LocalWorkspace(instance, tmp, self.limits, self.per_test_seconds)
