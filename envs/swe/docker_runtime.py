"""The `docker` SWE runtime: real SWE-bench instances in their official per-instance images.

Needs the `swe` extra (`pip install -e '.[swe]'`: swebench 5 and the `docker` SDK it depends
on) and a reachable Docker daemon; both are imported lazily, on first use only. The swebench
calls live in `envs.swe.swebench_adapter`, the container policy (no network, limits, labels,
removal) in `envs.swe.docker_containers`.

- Instances: SWE-bench Verified rows in the swebench 5 schema; the image, eval script, log
  parser and eval type come from the row (`SWEInstance.image`, ...), through `make_test_spec`.
- Workspace: one container per episode, files read with `cat`, written with `put_archive`,
  searched with `git grep -F`; the model patch is `git diff` of /testbed against HEAD (after
  `git add -A`, so new files count). HEAD, not `base_commit`: the image's setup commit sits
  on top of `base_commit` and the harness applies predictions to that state.
- `run_tests` (the agent's tool): the eval script's set-up and test command, without the test
  patch (`SwebenchHarness.test_script`), parsed by the row's log parser (`get_logs_eval`).
- `grade`: the 5.x harness's flow: fresh container; the model patch applied as the harness
  does (`git apply`, `--3way`, `--reject`, `patch --forward --fuzz=5`, the tree reset between
  attempts, then an already-applied check); then what the patch changed among test files
  (`tests/` directories, test_*.py, *_test.py, conftest.py), site hooks and compiled modules
  reset to HEAD (`envs.swe.grading`; the eval script resets only the test patch's own files, so
  a new conftest.py or an edited test helper would otherwise be graded); the spec's eval
  script; then swebench's own `get_eval_report` decides (`SwebenchHarness.report`). The diff
  scan only reports here (`PatchGrade.tamper`): in real repositories the names it looks for are
  ordinary. Code under test runs inside pytest as root in the container, so it can print result
  lines the log parser believes, as in the SWE-bench harness itself (swebench 5 refuses an
  all-PASSED log whose test command exited non-zero); so a patch that rule resolves is graded
  again by the sealed tests in a fresh container (`envs.swe.docker_sealed`), where they apply.
- Faults: a container that cannot start (an image missing and not pullable) or that dies under an
  episode raises `RuntimeUnavailable` / `WorkspaceLost` naming the instance and the cause; the
  scaffold ends that episode with reward 0 (`envs.swe.scaffold`).

All Docker calls are blocking SDK calls run in threads (`asyncio.to_thread`), so concurrent
episodes overlap; `max_containers` optionally caps live containers per event loop.
"""

from __future__ import annotations

import asyncio
import io
import posixpath
import tarfile
import time
from typing import Any

from envs.swe.docker_containers import ContainerLimits, Containers, remove
from envs.swe.docker_sealed import sealed_grade
from envs.swe.grading import parse_status
from envs.swe.instance import SWEInstance
from envs.swe.runtime import CommandResult, PatchGrade, Runtime, RuntimeUnavailable, Workspace, WorkspaceLost
from envs.swe.swebench_adapter import (
    ALREADY_APPLIED_CHECK,
    GIT_APPLY_CMDS,
    RESET_BETWEEN_ATTEMPTS,
    SwebenchHarness,
)
from envs.swe.workspace_memory import clean_path

MISSING_EXTRA = (
    "--runtime docker needs swebench 5 and the docker package (the swe extra): pip install -e '.[swe]'"
)
NO_DAEMON = "--runtime docker needs a running Docker daemon: {error}"
__all__ = ["GIT_APPLY_CMDS", "MISSING_EXTRA", "RESET_SCRIPT", "DockerRuntime", "SwebenchHarness"]
WORKDIR = "/testbed"
_OUTPUT_CHARS = 20000  # of a command's output kept in a CommandResult / grade log
RESET_SCRIPT = (
    'for p in "$@"; do if git cat-file -e "HEAD:$p" 2>/dev/null; '
    'then git --literal-pathspecs checkout -q HEAD -- "$p"; else rm -rf -- "$p"; fi; done'
)
"""Puts each path argument back as at HEAD (`bash -c RESET_SCRIPT reset PATH...`: no quoting)."""


def one_line(exc: BaseException) -> str:
    """An SDK error in one line: the daemon's explanation when it gave one, else the message."""
    text = str(getattr(exc, "explanation", None) or exc) or type(exc).__name__
    return " ".join(text.split())[:300]


def _tar(path: str, data: bytes) -> bytes:
    """A tar archive holding one file `path` (relative) with `data`."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(path)
        info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class DockerWorkspace(Workspace):
    """/testbed of one running container of the instance image."""

    def __init__(self, runtime: DockerRuntime, instance: SWEInstance, container: Any, spec: Any, release):
        """Wrap a started `container`; `release` is called once when it is removed."""
        self.runtime, self.instance, self.container, self.spec = runtime, instance, container, spec
        self._release = release
        self.closed = False

    async def _sdk(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """`container.<method>(...)` in a thread; any failure of it (the container died or was
        removed, the daemon went away) is the workspace's loss, not the model's doing."""
        try:
            return await asyncio.to_thread(getattr(self.container, method), *args, **kwargs)
        except Exception as exc:  # docker.errors.NotFound / APIError 409, requests' errors
            name = getattr(self.container, "name", "")
            raise WorkspaceLost(
                f"{self.instance.instance_id}: the episode's container {name} failed: {one_line(exc)}"
            ) from None

    async def exec_bytes(self, *argv: str, timeout: float | None = None) -> tuple[int | None, bytes]:
        """(exit code, stdout and stderr as bytes) of `argv` run in /testbed as root (under
        coreutils `timeout` when given)."""
        if timeout is not None:
            argv = ("timeout", str(int(timeout)), *argv)
        result = await self._sdk("exec_run", list(argv), workdir=WORKDIR, user="root")
        return result.exit_code, result.output or b""

    async def exec(self, *argv: str, timeout: float | None = None) -> CommandResult:
        """`exec_bytes`, its output decoded (undecodable bytes replaced)."""
        code, raw = await self.exec_bytes(*argv, timeout=timeout)
        timed_out = timeout is not None and code == 124
        return CommandResult(code, raw.decode("utf-8", errors="replace"), timed_out)

    async def put(self, path: str, data: bytes) -> None:
        """Write `data` at absolute `path` in the container (parent directories created)."""
        parent, name = posixpath.split(path)
        await self.exec("mkdir", "-p", parent)
        ok = await self._sdk("put_archive", parent, _tar(name, data))
        if ok is False:
            raise OSError(f"could not write {path} in the container")

    async def list_files(self) -> list[str]:
        """Tracked and untracked (not ignored) files."""
        result = await self.exec("git", "ls-files", "--cached", "--others", "--exclude-standard")
        return sorted(set(result.output.splitlines()))

    async def read_file(self, path: str) -> str:
        """The text of `path` (FileNotFoundError when missing, UnicodeDecodeError for binary)."""
        path = clean_path(path)
        code, raw = await self.exec_bytes("cat", "--", path)
        if code != 0:
            raise FileNotFoundError(f"no such file: {path}")
        return raw.decode("utf-8")

    async def write_file(self, path: str, text: str) -> None:
        """Replace or create `path`."""
        await self.put(posixpath.join(WORKDIR, clean_path(path)), text.encode("utf-8"))

    async def search(self, text: str, limit: int) -> list[str]:
        """Up to `limit` `path:N:line` hits of the fixed string `text` (`git grep`)."""
        result = await self.exec("git", "grep", "-n", "-I", "-F", "-e", text, "--")
        return result.output.splitlines()[:limit] if result.returncode == 0 else []

    async def run_tests(self, test_ids: list[str]) -> dict[str, str]:
        """The eval script's test command (no test patch; `SwebenchHarness.test_script`), statuses
        of `test_ids` by the row's log parser (an id the command did not run is left out)."""
        harness = self.runtime.harness()
        await self.put("/tmp/run_tests.sh", harness.test_script(self.spec, test_ids).encode())
        result = await self.exec("/bin/bash", "/tmp/run_tests.sh", timeout=self.runtime.test_timeout)
        status, _ = await asyncio.to_thread(harness.parse, self.spec, result.output)
        return {t: status[t] for t in test_ids if t in status}

    async def apply_patch(self, patch: str) -> CommandResult:
        """As swebench 5's harness: each fallback of `GIT_APPLY_CMDS` in turn, the tree reset
        before every retry; when all fail, applied all the same if the patch reverses cleanly."""
        await self.put("/tmp/patch.diff", patch.encode("utf-8"))
        result = CommandResult(returncode=1, output="")
        for attempt, command in enumerate(GIT_APPLY_CMDS):
            if attempt:
                await self.exec("/bin/bash", "-c", RESET_BETWEEN_ATTEMPTS)
            result = await self.exec("/bin/bash", "-c", f"{command} /tmp/patch.diff")
            if result.returncode == 0:
                break
        else:
            check = await self.exec("/bin/bash", "-c", f"{ALREADY_APPLIED_CHECK} /tmp/patch.diff")
            if check.returncode == 0:
                result = CommandResult(0, "the patch was already applied (it reverses cleanly)")
        return CommandResult(result.returncode, result.output[-_OUTPUT_CHARS:], result.timed_out)

    async def diff(self) -> str:
        """`git diff` of the working tree (new files included) against HEAD."""
        result = await self.exec(
            "/bin/bash", "-c", "git add -A && git -c core.fileMode=false diff --cached HEAD"
        )
        if result.returncode != 0:
            raise RuntimeError(f"git diff failed: {result.output[-500:]}")
        return result.output

    async def changed_paths(self) -> list[str]:
        """Modified, deleted and new files against HEAD; not files git ignores (the image has
        build outputs among them; `Runtime.reset_protected` adds the paths the patch names)."""
        result = await self.exec(
            "git", "status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all"
        )
        if result.returncode != 0:
            raise RuntimeError(f"git status failed: {result.output[-500:]}")
        return parse_status(result.output)

    async def reset_paths(self, paths: list[str]) -> None:
        """Files of HEAD get their content back, the others are deleted (`RESET_SCRIPT`)."""
        result = await self.exec("/bin/bash", "-c", RESET_SCRIPT, "reset", *sorted(paths))
        if result.returncode != 0:
            raise RuntimeError(f"resetting {len(paths)} file(s) failed: {result.output[-500:]}")

    async def close(self) -> None:
        """Remove the container (idempotent)."""
        if self.closed:
            return
        self.closed = True
        try:
            await asyncio.to_thread(remove, self.container)
        finally:
            self._release()


class DockerRuntime(Runtime):
    """Workspaces in SWE-bench's per-instance images; grading by the eval script and swebench's report."""

    name = "docker"

    def __init__(
        self,
        client: Any = None,
        harness: Any = None,
        test_timeout: int = 1800,
        max_containers: int | None = None,
        limits: ContainerLimits | None = None,
        run: str | None = None,
    ):
        """`client`/`harness`: a docker client and a `SwebenchHarness` (made lazily when None,
        and then the containers get the watchdog; tests pass fakes). `test_timeout`: seconds per
        test run. `max_containers`: live containers per event loop (None: no cap). `limits`,
        `run`: see `envs.swe.docker_containers`."""
        self._client, self._harness = client, harness
        self.test_timeout, self.max_containers = test_timeout, max_containers
        self.containers = Containers(limits, run, watchdog=client is None)
        self._daemon_ok = client is not None
        self._limits: dict[Any, asyncio.Semaphore] = {}

    def harness(self) -> Any:
        """The swebench adapter; RuntimeUnavailable (install hint) when the extra is missing."""
        if self._harness is None:
            try:
                import docker  # noqa: F401 - only to fail here, with the hint, when it is missing

                self._harness = SwebenchHarness()
            except ImportError:
                raise RuntimeUnavailable(MISSING_EXTRA) from None
        return self._harness

    def client(self) -> Any:
        """The docker client (its read timeout outlasts the longest test run)."""
        if self._client is None:
            self.harness()
            import docker

            self._client = docker.from_env(timeout=self.test_timeout + 120)
        return self._client

    def check(self, instance: SWEInstance) -> None:
        """Fast: packages importable, instance runnable by swebench 5, daemon answering a ping (once, 3 s)."""
        harness = self.harness()
        reason = harness.unsupported(instance)
        if reason:
            raise RuntimeUnavailable(reason)
        if not self._daemon_ok:
            try:
                import docker
            except ImportError:
                raise RuntimeUnavailable(MISSING_EXTRA) from None
            try:
                docker.from_env(timeout=3).ping()
            except Exception as exc:  # DockerException, connection refused, missing socket...
                raise RuntimeUnavailable(NO_DAEMON.format(error=exc)) from None
            self._daemon_ok = True

    def _limit(self) -> asyncio.Semaphore | None:
        if self.max_containers is None:
            return None
        loop = asyncio.get_running_loop()
        return self._limits.setdefault(loop, asyncio.Semaphore(self.max_containers))

    async def open(self, instance: SWEInstance) -> DockerWorkspace:
        """Start a container of the instance's image (pulled if missing; `Containers.start`);
        RuntimeUnavailable, naming the instance and the cause, when none starts."""
        self.check(instance)
        limit = self._limit()
        if limit is not None:
            await limit.acquire()
        release = limit.release if limit is not None else (lambda: None)
        try:
            spec = await asyncio.to_thread(self.harness().spec, instance)
            image = self.harness().image(spec)
            try:
                container = await asyncio.to_thread(
                    self.containers.start, self.client(), image, instance.instance_id, WORKDIR
                )
            except Exception as exc:  # ImageNotFound, a failed pull (no network), APIError
                pull = type(exc).__name__ == "ImageNotFound" or "images/create" in str(exc)
                what = (
                    f"image {image} is not on this machine and could not be pulled"
                    if pull
                    else "no container"
                )
                raise RuntimeUnavailable(f"{instance.instance_id}: {what}: {one_line(exc)}") from None
        except BaseException:
            release()
            raise
        return DockerWorkspace(self, instance, container, spec, release)

    async def grade(self, instance: SWEInstance, patch: str) -> PatchGrade:
        """`Runtime.grade` by swebench's rule (`evaluate`); a patch it resolves is graded again
        by the sealed tests in a fresh container (`envs.swe.docker_sealed`), and stays resolved
        only if they agree (or cannot decide: then the log says why)."""
        grade = await super().grade(instance, patch)
        if not grade.resolved:
            return grade
        sealed = await sealed_grade(self, instance, patch)
        if sealed.resolved is None:
            grade.log += f"\nsealed tests not run ({sealed.why}): swebench's rule alone decided"
        elif not sealed.resolved:
            grade.resolved = False
            grade.log += (
                f"\nnot resolved: swebench's log parser passed it, the sealed tests did not: {sealed.why}"
            )
            grade.tamper += ["the log parser and the sealed tests disagree", *sealed.tamper]
        return grade

    async def evaluate(self, workspace: DockerWorkspace, instance: SWEInstance) -> PatchGrade:
        """The harness's evaluation (module docstring): the spec's eval script (it applies
        `test_patch` and runs the tests), then `get_eval_report` on its output."""
        harness = self.harness()
        await workspace.put("/eval.sh", harness.eval_script(workspace.spec).encode())
        result = await workspace.exec("/bin/bash", "/eval.sh", timeout=self.test_timeout)
        log = result.output[-_OUTPUT_CHARS:]
        if result.timed_out:
            return PatchGrade(
                resolved=False, applied=True, log=f"tests timed out ({self.test_timeout} s)\n{log}"
            )
        tests, _ = await asyncio.to_thread(harness.parse, workspace.spec, result.output)
        # the patch is already applied; get_eval_report only tells a None patch from a present one
        report = await asyncio.to_thread(harness.report, workspace.spec, "", result.output)
        if not report.get("patch_successfully_applied"):
            why = report.get("infra_failure_reason") or "no valid test run in the log"
            return PatchGrade(
                resolved=False, applied=True, log=f"the evaluation did not run the tests ({why})\n{log}"
            )
        status = {
            k: v for k, v in report.get("tests_status", {}).items() if k in ("FAIL_TO_PASS", "PASS_TO_PASS")
        }
        return PatchGrade(
            resolved=bool(report["resolved"]), applied=True, tests=tests, tests_status=status, log=log
        )
