"""The `local` SWE runtime: temporary git working copies of swe-mini's embedded repositories
(and of swe-synth's generated ones).

`LocalRuntime.open(instance)` writes the instance's files (`envs.swe.swe_mini.repo_files`, or
`envs.swe.synthetic.bug_for_id` for a generated id) into a fresh temporary directory and
commits them with a fixed identity and date, which reproduces a swe-mini instance's
`base_commit` exactly (checked). Layout of one workspace:

    rlbench-swe-XXXX/      0700, the harness's
        repo/              the working copy: model-editable, the sandbox's working directory
        git/               the git directory, kept outside the working copy

Why the git directory lives outside: tests run in `envs.sandbox` as the sandbox's own uid,
which owns `repo/` (the sandbox chowns it). Git itself runs as the harness, outside the
sandbox, so a `.git/config` or hook written by model code would run commands with the
harness's rights; outside `repo/` (and 0700) it is out of the sandbox's reach. Git also runs
without system/global config, hooks or fsmonitor, and diffs without external diff drivers.

Only test runs execute model-editable code, and only inside the sandbox, through
`envs.swe.testrunner` (standard library only, so pytest is not needed), which runs each test
file in a fresh interpreter behind an audit guard (`envs.swe.testchild`, `envs.swe.testguard`). Grading resets test files and
hook or compiled files a patch brings (`envs.swe.grading`) and, these repositories being tiny
and pure, vetoes any patch the diff scan flags (`LocalRuntime.scan_veto`); `envs.swe`'s
docstring has the threat model. Per workspace the cost is a few small files and four git
processes; the sandbox (a uid and a chown) is created on the first test run.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import secrets
import shutil
import stat
import sys
import tempfile
import weakref
from pathlib import Path, PurePosixPath

from envs.sandbox import Sandbox, SandboxLimits
from envs.swe import testchild, testguard, testrunner
from envs.swe.grading import TEST_DIRS, parse_status
from envs.swe.instance import SWEInstance
from envs.swe.runtime import CommandResult, Runtime, RuntimeUnavailable, Workspace

BASE_DATE = "2024-01-01T00:00:00+0000"
BASE_MESSAGE = "swe-mini base"
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "swe-mini",
    "GIT_AUTHOR_EMAIL": "swe-mini@example.invalid",
    "GIT_AUTHOR_DATE": BASE_DATE,
    "GIT_COMMITTER_NAME": "swe-mini",
    "GIT_COMMITTER_EMAIL": "swe-mini@example.invalid",
    "GIT_COMMITTER_DATE": BASE_DATE,
}
"""Author, committer and dates of every base commit: with the files, they fix its hash."""

# Command-line config wins over the repository's; these keys would otherwise run programs.
_GIT_SAFETY = ["-c", "core.fsmonitor=false", "-c", f"core.hooksPath={os.devnull}", "-c", "safe.directory=*"]
_GIT_CONFIG = ["-c", "core.autocrlf=false", "-c", "core.quotepath=false", "-c", "init.defaultBranch=main"]
_OUTPUT_CHARS = 4000  # of a git command's output kept in CommandResult

DEFAULT_LIMITS = SandboxLimits(cpu_seconds=10, wall_seconds=20, memory_mb=512, max_file_mb=8)
"""Sandbox limits of one `run_tests` call."""


def git_env() -> dict[str, str]:
    """Environment for git: no system or user config (so results are the same anywhere)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "HOME": os.devnull,  # older git without GIT_CONFIG_GLOBAL reads $HOME/.gitconfig
        "LANG": "C",
        "LC_ALL": "C",
        **GIT_IDENTITY,
    }


async def run_git(
    git_dir: Path, work_tree: Path, *args: str, stdin: str | None = None
) -> tuple[CommandResult, str]:
    """Run `git args` on the (trusted) git directory and working tree: (result with stdout and
    stderr merged, stdout alone). Diffs use stdout alone so a git warning never enters a patch."""
    proc = await asyncio.create_subprocess_exec(
        "git",
        *_GIT_SAFETY,
        *_GIT_CONFIG,
        f"--git-dir={git_dir}",
        f"--work-tree={work_tree}",
        *args,
        cwd=work_tree,
        env=git_env(),
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(None if stdin is None else stdin.encode())
    stdout = out.decode("utf-8", "replace")
    return CommandResult(proc.returncode, stdout + err.decode("utf-8", "replace")), stdout


async def _git_ok(git_dir: Path, work_tree: Path, *args: str, stdin: str | None = None) -> str:
    """Output of a git command that must succeed (RuntimeError with its output otherwise)."""
    result, stdout = await run_git(git_dir, work_tree, *args, stdin=stdin)
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed ({result.returncode}): {result.output[-2000:]}")
    return stdout


def write_files(root: Path, files: dict[str, str]) -> None:
    """Write a repository's files (relative paths -> text) under `root` (trusted data)."""
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", newline="")


async def commit_base(git_dir: Path, work_tree: Path) -> str:
    """`git init` + commit everything in `work_tree` with the fixed identity; the commit hash."""
    await _git_ok(git_dir, work_tree, "init", "--quiet", "--template=")
    # __pycache__ never belongs to a patch; info/exclude is in the trusted git dir.
    (git_dir / "info").mkdir(exist_ok=True)
    (git_dir / "info" / "exclude").write_text("__pycache__/\n*.pyc\n")
    await _git_ok(git_dir, work_tree, "add", "-A")
    await _git_ok(git_dir, work_tree, "commit", "--quiet", "--no-verify", "-m", BASE_MESSAGE)
    return (await _git_ok(git_dir, work_tree, "rev-parse", "HEAD")).strip()


@functools.lru_cache(maxsize=3)
def _source(module) -> str:
    """A runner module's source, passed to `python -c` (nothing to copy into the sandbox)."""
    return Path(module.__file__).read_text(encoding="utf-8")


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
    part of a patch: the real git dir lives outside); rmtree does not follow symlinks."""
    for dirpath, dirs, files in os.walk(root):
        for name in [n for n in (*dirs, *files) if n == ".git"]:
            path = Path(dirpath) / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        dirs[:] = [d for d in dirs if d != ".git"]


def _release(sandbox: Sandbox | None, remove_copy: weakref.finalize) -> None:
    """Close the sandbox (kills leftovers, frees its uid), then delete the copy."""
    if sandbox is not None:
        sandbox.close()
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
        """What the runner's guard caught in the last `run_tests`, by test id."""
        self._sandbox: Sandbox | None = None
        self._closed = False
        self._finalizer = weakref.finalize(self, shutil.rmtree, tmp, True)  # if never closed

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
        found = []
        for dirpath, dirs, files in os.walk(self.root):  # does not follow symlinked directories
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            rel = Path(dirpath).relative_to(self.root)
            found += [(rel / f).as_posix() for f in files]
        return sorted(found)

    async def read_file(self, path: str) -> str:
        """The text of `path` (undecodable bytes replaced)."""
        target = self._path(path).resolve()
        if not target.exists():
            raise FileNotFoundError(f"no such file: {path}")
        if target.is_dir():
            raise IsADirectoryError(f"is a directory: {path}")
        if not target.is_file():  # a FIFO or device planted by test code would block or leak
            raise ValueError(f"not a regular file: {path}")
        return target.read_text(encoding="utf-8", errors="replace")

    async def write_file(self, path: str, text: str) -> None:
        """Create or replace `path`; parent directories are created."""
        target = self._path(path)
        if target.is_symlink() or (target.exists() and not target.is_file()):
            raise ValueError(f"not a regular file: {path}")
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)

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
        _remove_nested_git(self.root)  # git would stage them as submodules or stop
        await _git_ok(self.git_dir, self.root, "add", "-A")  # stages new files (index is in git/)
        # HEAD is the only commit: the base (checked against `base_commit` for swe-mini at open)
        return await _git_ok(
            self.git_dir, self.root, "diff", "--cached", "--no-ext-diff", "--no-textconv", "--binary", "HEAD"
        )

    async def run_tests(self, test_ids: list[str]) -> dict[str, str]:
        """Run the tests in the sandbox with `envs.swe.testrunner`; see its output protocol."""
        if self._closed:
            raise RuntimeError("this workspace is closed")
        ids = list(dict.fromkeys(test_ids))
        valid = [t for t in ids if _valid_test_id(t)]
        self.last_details = {t: f"invalid test id: {t!r}" for t in ids if t not in valid}
        outcomes = {t: "ERROR" for t in self.last_details}
        if not valid:
            return outcomes
        if self._sandbox is None:  # created on first use: a uid, and a chown of the copy
            self._sandbox = await asyncio.to_thread(Sandbox, self.limits, self.root)
        nonce = secrets.token_hex(16)
        request = {"nonce": nonce, "ids": valid, "per_test_seconds": self.per_test_seconds}
        request["child"] = _source(testguard) + "\n" + _source(testchild)  # one program, guard first
        # -S: no site module, so no .pth file or site/user customisation runs before the runner
        res = await self._sandbox.arun(
            [sys.executable, "-I", "-S", "-B", "-c", _source(testrunner)], stdin=json.dumps(request)
        )
        cut = res.killed_reason or (f"exit code {res.returncode}" if res.returncode else "")
        self.last_log = res.as_observation() if cut else ""
        found, details = testrunner.parse_events(res.stdout, nonce, valid, cut)
        self.last_details.update(details)
        self.last_tamper = testrunner.parse_tamper(res.stdout, nonce)
        merged = {**outcomes, **found}
        return {t: merged[t] for t in ids}

    async def changed_paths(self) -> list[str]:
        """Modified, deleted and new files, ignored ones included (the copy starts from the
        base files alone, so an ignored file, e.g. a .pyc, came from a patch or a test run)."""
        if self._closed:
            raise RuntimeError("this workspace is closed")
        _remove_nested_git(self.root)
        status = await _git_ok(
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
        tree = await _git_ok(self.git_dir, self.root, "ls-tree", "-r", "-z", "--name-only", "HEAD")
        base = set(tree.split("\0"))
        root = self.root.resolve()
        for rel in sorted(set(paths) - base):
            path = self.root / rel
            if not path.parent.resolve().is_relative_to(root):
                continue  # never created by `git apply`, which refuses to write through a symlink
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            elif path.is_symlink() or path.exists():
                path.unlink()
        restore = sorted(set(paths) & base)
        if restore:
            await _git_ok(self.git_dir, self.root, "--literal-pathspecs", "checkout", "HEAD", "--", *restore)

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
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return LocalWorkspace(instance, tmp, self.limits, self.per_test_seconds)
