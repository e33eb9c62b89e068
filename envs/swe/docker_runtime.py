"""The `docker` SWE runtime: real SWE-bench instances in their official per-instance images.

Needs the `swe` extra (`pip install -e '.[swe]'`: the `swebench` package and the `docker` SDK
it depends on) and a reachable Docker daemon; both are imported lazily, on first use only.

- Image: `swebench`'s `make_test_spec(instance).instance_image_key` (namespace "swebench": the
  prebuilt images on Docker Hub; pulled on first use when missing). The image holds the repo
  at /testbed, checked out at `base_commit` plus the harness's setup commit, and a conda env
  named `testbed`.
- Workspace: one container per episode (`tail -f /dev/null`), files read with `cat`, written
  with `put_archive`, searched with `git grep -F`; the model patch is `git diff` of /testbed
  against HEAD (after `git add -A`, so new files count). HEAD, not `base_commit`: the image's
  setup commit sits on top of `base_commit` and the harness applies predictions to that state.
- `run_tests` (the agent's tool): the repository's test command (`MAP_REPO_VERSION_TO_SPECS`)
  on the test files of the given ids (pytest ids) or of the instance's `test_patch`, between
  the harness's start/end markers, parsed by the harness's log parser (`get_logs_eval`).
- `grade`: the harness's own flow: fresh container, the model patch applied with the
  harness's three fallbacks (`git apply`, `git apply --reject`, `patch --fuzz=5`), then what the
  patch changed among test files (`tests/` directories, test_*.py, *_test.py, conftest.py), site
  hooks and compiled modules reset to HEAD (`envs.swe.grading`; the eval script resets only the
  test patch's own files, so a new conftest.py or an edited test helper would otherwise be
  graded), the spec's `eval_script` (applies `test_patch`, runs the tests), `get_logs_eval`,
  then `is_resolved`. The diff scan only reports here (`PatchGrade.tamper`): in real
  repositories the names it looks for are ordinary. Not contained: code under test runs inside
  pytest as root in the container, so it can print result lines the log parser believes, as in
  the SWE-bench harness itself.

All Docker calls are blocking SDK calls run in threads (`asyncio.to_thread`), so concurrent
episodes overlap; `max_containers` optionally caps live containers per event loop.
"""

from __future__ import annotations

import asyncio
import io
import posixpath
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from envs.swe.grading import parse_status
from envs.swe.instance import SWEInstance, harness_tests_status, is_resolved
from envs.swe.runtime import CommandResult, PatchGrade, Runtime, RuntimeUnavailable, Workspace
from envs.swe.workspace_memory import clean_path

MISSING_EXTRA = (
    "--runtime docker needs the swebench and docker packages (the swe extra): pip install -e '.[swe]'"
)
NO_DAEMON = "--runtime docker needs a running Docker daemon: {error}"
GIT_APPLY_CMDS = ("git apply --verbose", "git apply --verbose --reject", "patch --batch --fuzz=5 -p1 -i")
"""The harness's patch-application fallbacks (`swebench.harness.run_evaluation`)."""
WORKDIR = "/testbed"
_OUTPUT_CHARS = 20000  # of a command's output kept in a CommandResult / grade log
RESET_SCRIPT = (
    'for p in "$@"; do if git cat-file -e "HEAD:$p" 2>/dev/null; '
    'then git --literal-pathspecs checkout -q HEAD -- "$p"; else rm -rf -- "$p"; fi; done'
)
"""Puts each path argument back as at HEAD (`bash -c RESET_SCRIPT reset PATH...`: no quoting)."""


class SwebenchHarness:
    """The parts of the `swebench` package this runtime uses (imported here, lazily).

    Tests substitute an object with the same methods, so the runtime is testable without it.
    """

    def __init__(self, namespace: str | None = "swebench"):
        """ImportError when swebench is not installed. `namespace`: where images are pulled from."""
        from swebench.harness import constants
        from swebench.harness.grading import get_logs_eval
        from swebench.harness.test_spec.test_spec import make_test_spec

        self.constants, self.get_logs_eval, self.make_test_spec = constants, get_logs_eval, make_test_spec
        self.namespace = namespace
        self._specs: dict[str, Any] = {}

    def unsupported(self, instance: SWEInstance) -> str | None:
        """Why the harness cannot run `instance` (unknown repository/version), or None."""
        specs = self.constants.MAP_REPO_VERSION_TO_SPECS
        if instance.repo not in specs or instance.version not in specs[instance.repo]:
            return f"swebench has no spec for {instance.repo} version {instance.version!r} ({instance.instance_id})"
        return None

    def spec(self, instance: SWEInstance) -> Any:
        """The harness's TestSpec of `instance` (cached; may fetch requirements the first time)."""
        if instance.instance_id not in self._specs:
            self._specs[instance.instance_id] = self.make_test_spec(
                instance.to_record(), namespace=self.namespace
            )
        return self._specs[instance.instance_id]

    def image(self, spec: Any) -> str:
        """The per-instance image name."""
        return spec.instance_image_key

    def eval_script(self, spec: Any) -> str:
        """The official evaluation script (applies the test patch, runs the tests, reverts them)."""
        return spec.eval_script

    def test_script(self, spec: Any, instance: SWEInstance, test_ids: list[str]) -> str:
        """A bash script running the repository's test command on `test_ids`' files, between
        the harness's output markers (so `parse` reads it like an evaluation log)."""
        specs = self.constants.MAP_REPO_VERSION_TO_SPECS[instance.repo][instance.version]
        command = specs["test_cmd"] if isinstance(specs["test_cmd"], str) else specs["test_cmd"][-1]
        if all("::" in t for t in test_ids):  # pytest ids name their file
            directives = sorted({t.split("::", 1)[0] for t in test_ids})
        else:
            from swebench.harness.test_spec.python import get_test_directives

            directives = get_test_directives(instance.to_record())
        lines = [
            "#!/bin/bash",
            "set -uxo pipefail",
            "source /opt/miniconda3/bin/activate",
            "conda activate testbed",
        ]
        lines += [f"cd {WORKDIR}", *specs.get("eval_commands", [])]
        lines += [f": '{self.constants.START_TEST_OUTPUT}'", " ".join([command, *directives])]
        return "\n".join([*lines, f": '{self.constants.END_TEST_OUTPUT}'"]) + "\n"

    def parse(self, spec: Any, log: str) -> tuple[dict[str, str], bool]:
        """(test id -> status, whether the tests ran) from a log, via `get_logs_eval`."""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "test_output.txt"
            path.write_text(log)
            return self.get_logs_eval(spec, str(path))


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

    async def exec(self, *argv: str, timeout: float | None = None) -> CommandResult:
        """Run `argv` in /testbed as root (under coreutils `timeout` when given)."""
        if timeout is not None:
            argv = ("timeout", str(int(timeout)), *argv)
        result = await asyncio.to_thread(self.container.exec_run, list(argv), workdir=WORKDIR, user="root")
        output = (result.output or b"").decode("utf-8", errors="replace")
        timed_out = timeout is not None and result.exit_code == 124
        return CommandResult(returncode=result.exit_code, output=output, timed_out=timed_out)

    async def put(self, path: str, data: bytes) -> None:
        """Write `data` at absolute `path` in the container (parent directories created)."""
        parent, name = posixpath.split(path)
        await self.exec("mkdir", "-p", parent)
        ok = await asyncio.to_thread(self.container.put_archive, parent, _tar(name, data))
        if ok is False:
            raise OSError(f"could not write {path} in the container")

    async def list_files(self) -> list[str]:
        """Tracked and untracked (not ignored) files."""
        result = await self.exec("git", "ls-files", "--cached", "--others", "--exclude-standard")
        return sorted(set(result.output.splitlines()))

    async def read_file(self, path: str) -> str:
        """The text of `path` (FileNotFoundError when missing, UnicodeDecodeError for binary)."""
        path = clean_path(path)
        result = await asyncio.to_thread(
            self.container.exec_run, ["cat", "--", path], workdir=WORKDIR, user="root"
        )
        if result.exit_code != 0:
            raise FileNotFoundError(f"no such file: {path}")
        return (result.output or b"").decode("utf-8")

    async def write_file(self, path: str, text: str) -> None:
        """Replace or create `path`."""
        await self.put(posixpath.join(WORKDIR, clean_path(path)), text.encode("utf-8"))

    async def search(self, text: str, limit: int) -> list[str]:
        """Up to `limit` `path:N:line` hits of the fixed string `text` (`git grep`)."""
        result = await self.exec("git", "grep", "-n", "-I", "-F", "-e", text, "--")
        return result.output.splitlines()[:limit] if result.returncode == 0 else []

    async def run_tests(self, test_ids: list[str]) -> dict[str, str]:
        """The repository's test command on the files of `test_ids`; statuses by the harness's parser."""
        harness = self.runtime.harness()
        await self.put("/tmp/run_tests.sh", harness.test_script(self.spec, self.instance, test_ids).encode())
        result = await self.exec("/bin/bash", "/tmp/run_tests.sh", timeout=self.runtime.test_timeout)
        status, _ = await asyncio.to_thread(harness.parse, self.spec, result.output)
        return {t: status[t] for t in test_ids if t in status}

    async def apply_patch(self, patch: str) -> CommandResult:
        """The harness's fallbacks in order; the first that succeeds wins."""
        await self.put("/tmp/patch.diff", patch.encode("utf-8"))
        result = CommandResult(returncode=1, output="")
        for command in GIT_APPLY_CMDS:
            result = await self.exec("/bin/bash", "-c", f"{command} /tmp/patch.diff")
            if result.returncode == 0:
                break
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
            await asyncio.to_thread(self.container.remove, force=True)
        finally:
            self._release()


class DockerRuntime(Runtime):
    """Workspaces in SWE-bench's per-instance images; grading by the harness's eval script."""

    name = "docker"

    def __init__(
        self,
        client: Any = None,
        harness: Any = None,
        namespace: str | None = "swebench",
        test_timeout: int = 1800,
        max_containers: int | None = None,
    ):
        """`client`/`harness`: a docker client and a `SwebenchHarness` (made lazily when None;
        tests pass fakes). `test_timeout`: seconds per test run. `max_containers`: live
        containers per event loop (None: no cap)."""
        self._client, self._harness, self.namespace = client, harness, namespace
        self.test_timeout, self.max_containers = test_timeout, max_containers
        self._daemon_ok = client is not None
        self._limits: dict[Any, asyncio.Semaphore] = {}

    def harness(self) -> Any:
        """The swebench adapter; RuntimeUnavailable (install hint) when the extra is missing."""
        if self._harness is None:
            try:
                import docker  # noqa: F401 - only to fail here, with the hint, when it is missing

                self._harness = SwebenchHarness(self.namespace)
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
        """Fast: packages importable, daemon answering a ping (once, 3 s), instance known to swebench."""
        harness = self.harness()
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
        reason = harness.unsupported(instance)
        if reason:
            raise RuntimeUnavailable(reason)

    def _limit(self) -> asyncio.Semaphore | None:
        if self.max_containers is None:
            return None
        loop = asyncio.get_running_loop()
        return self._limits.setdefault(loop, asyncio.Semaphore(self.max_containers))

    async def open(self, instance: SWEInstance) -> DockerWorkspace:
        """Start a container of the instance's image (pulled if missing)."""
        self.check(instance)
        limit = self._limit()
        if limit is not None:
            await limit.acquire()
        release = limit.release if limit is not None else (lambda: None)
        try:
            spec = await asyncio.to_thread(self.harness().spec, instance)
            container = await asyncio.to_thread(
                self.client().containers.run,
                self.harness().image(spec),
                command="tail -f /dev/null",
                detach=True,
                working_dir=WORKDIR,
            )
        except BaseException:
            release()
            raise
        return DockerWorkspace(self, instance, container, spec, release)

    async def evaluate(self, workspace: DockerWorkspace, instance: SWEInstance) -> PatchGrade:
        """The harness's evaluation (module docstring): the spec's eval script (it applies
        `test_patch` and runs the tests), its log parser, then the resolved rule."""
        harness = self.harness()
        await workspace.put("/eval.sh", harness.eval_script(workspace.spec).encode())
        result = await workspace.exec("/bin/bash", "/eval.sh", timeout=self.test_timeout)
        log = result.output[-_OUTPUT_CHARS:]
        if result.timed_out:
            return PatchGrade(
                resolved=False, applied=True, log=f"tests timed out ({self.test_timeout} s)\n{log}"
            )
        tests, found = await asyncio.to_thread(harness.parse, workspace.spec, result.output)
        if not found:
            return PatchGrade(
                resolved=False, applied=True, log="the evaluation did not run the tests\n" + log
            )
        status = harness_tests_status(tests, instance.fail_to_pass, instance.pass_to_pass)
        return PatchGrade(
            resolved=is_resolved(status), applied=True, tests=tests, tests_status=status, log=log
        )
