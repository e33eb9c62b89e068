"""Git for the local SWE runtime: the trusted git directory outside the working copy.

Git runs as the harness, outside the sandbox, on a git directory the sandbox cannot reach, with
no system or user config, no hooks and no fsmonitor (command-line config wins over the
repository's), and diffs without external diff drivers or text conversion. `git_changes` is the
diff scan's view of a patched copy (`envs.swe.scan`): paths, numeric modes and whole contents
as git staged them.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from envs.swe.runtime import CommandResult
from envs.swe.scan import FileChange

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


def _args(git_dir: Path, work_tree: Path, *args: str) -> list[str]:
    return ["git", *_GIT_SAFETY, *_GIT_CONFIG, f"--git-dir={git_dir}", f"--work-tree={work_tree}", *args]


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
        *_args(git_dir, work_tree, *args),
        cwd=work_tree,
        env=git_env(),
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(None if stdin is None else stdin.encode())
    stdout = out.decode("utf-8", "replace")
    return CommandResult(proc.returncode, stdout + err.decode("utf-8", "replace")), stdout


async def git_ok(git_dir: Path, work_tree: Path, *args: str, stdin: str | None = None) -> str:
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
    await git_ok(git_dir, work_tree, "init", "--quiet", "--template=")
    # __pycache__ never belongs to a patch; info/exclude is in the trusted git dir.
    (git_dir / "info").mkdir(exist_ok=True)
    (git_dir / "info" / "exclude").write_text("__pycache__/\n*.pyc\n")
    await git_ok(git_dir, work_tree, "add", "-A")
    await git_ok(git_dir, work_tree, "commit", "--quiet", "--no-verify", "-m", BASE_MESSAGE)
    return (await git_ok(git_dir, work_tree, "rev-parse", "HEAD")).strip()


async def _git_bytes(git_dir: Path, work_tree: Path, *args: str, stdin: bytes = b"") -> bytes:
    """Raw stdout of a git command that must succeed (RuntimeError otherwise)."""
    proc = await asyncio.create_subprocess_exec(
        *_args(git_dir, work_tree, *args),
        cwd=work_tree,
        env=git_env(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(stdin)
    if proc.returncode != 0:
        raise RuntimeError(
            f"git {' '.join(args)} failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}"
        )
    return out


async def git_changes(git_dir: Path, work_tree: Path) -> list[FileChange]:
    """Every path the index differs in from HEAD (stage the copy first, `git add -A`), with both
    modes and both contents, as git stored them (`git diff --raw`, `git cat-file --batch`)."""
    raw = await _git_bytes(
        git_dir, work_tree, "diff", "--cached", "--raw", "-z", "--no-renames", "--no-abbrev", "HEAD"
    )
    fields = raw.split(b"\0")
    entries = []
    for meta, path in zip(fields[0::2], fields[1::2]):
        old_mode, new_mode, old_sha, new_sha, _ = meta.lstrip(b":").split(b" ")
        entries.append(
            (path.decode("utf-8", "surrogateescape"), int(old_mode, 8), int(new_mode, 8), old_sha, new_sha)
        )
    wanted = [sha for e in entries for sha in e[3:] if sha.strip(b"0")]
    blobs = await _cat_files(git_dir, work_tree, wanted)
    return [
        FileChange(path, old_mode, new_mode, blobs.get(old_sha), blobs.get(new_sha))
        for path, old_mode, new_mode, old_sha, new_sha in entries
    ]


async def _cat_files(git_dir: Path, work_tree: Path, shas: list[bytes]) -> dict[bytes, bytes]:
    """Object id -> content of blobs (submodule commits and missing objects are left out)."""
    if not shas:
        return {}
    out = await _git_bytes(git_dir, work_tree, "cat-file", "--batch", stdin=b"\n".join(shas) + b"\n")
    found, pos = {}, 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        header = out[pos:end].split(b" ")
        pos = end + 1
        if len(header) != 3:  # "<sha> missing"
            continue
        size = int(header[2])
        if header[1] == b"blob":
            found[header[0]] = out[pos : pos + size]
        pos += size + 1
    return found
