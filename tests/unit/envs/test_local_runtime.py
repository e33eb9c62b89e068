"""Tests for envs.swe.local_runtime and its test runs (`envs.swe.testchild`, `envs.swe.verdict`):
file ops, path escapes, diffs that round-trip through `git apply`, and hostile test code (hangs,
os._exit, junk output, fake result lines) contained by the sandbox and reported per test."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path

import pytest

from envs.sandbox import SandboxLimits
from envs.swe.instance import SWEInstance
from envs.swe.local_runtime import LocalRuntime, LocalWorkspace
from envs.swe.runtime import RuntimeUnavailable
from envs.swe.swe_mini import load_swe_mini, repo_files
from tests.requires import sandbox_capability

CLAMP = next(i for i in load_swe_mini() if i.instance_id == "swe-mini__clamp-1")
T = "tests/test_h.py"  # the hostile test file written by the tests below


def run(coro):
    return asyncio.run(coro)


async def _with_workspace(fn, runtime: LocalRuntime | None = None, instance: SWEInstance = CLAMP):
    """Open a workspace, run `await fn(ws)`, always close it; fn's result."""
    ws = await (runtime or LocalRuntime()).open(instance)
    try:
        return await fn(ws)
    finally:
        await ws.close()


def test_file_operations():
    async def body(ws: LocalWorkspace):
        assert await ws.list_files() == ["clamp.py", "tests/test_clamp.py"]
        assert await ws.read_file("clamp.py") == repo_files(CLAMP.instance_id)["clamp.py"]
        assert await ws.read_file("./clamp.py") == repo_files(CLAMP.instance_id)["clamp.py"]
        await ws.write_file("pkg/new.py", "X = 1\n")
        await ws.write_file("clamp.py", "def clamp(x, lo, hi):\n    return 0\n")
        assert await ws.read_file("pkg/new.py") == "X = 1\n"
        assert await ws.read_file("clamp.py") == "def clamp(x, lo, hi):\n    return 0\n"
        assert await ws.list_files() == ["clamp.py", "pkg/new.py", "tests/test_clamp.py"]
        with pytest.raises(FileNotFoundError):
            await ws.read_file("missing.py")
        with pytest.raises(IsADirectoryError):
            await ws.read_file("tests")
        return ws.tmp

    tmp = run(_with_workspace(body))
    assert not tmp.exists()  # close() removed the copy


@pytest.mark.parametrize("path", ["/etc/passwd", "../x.py", "tests/../../x.py", "", "a\0b", ".git/config"])
def test_path_escapes_refused(path):
    async def body(ws):
        with pytest.raises(ValueError):
            await ws.read_file(path)
        with pytest.raises(ValueError):
            await ws.write_file(path, "x")

    run(_with_workspace(body))


def test_symlink_escapes_refused(tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")

    async def body(ws):
        os.symlink(tmp_path, ws.root / "out")  # as model code in the sandbox could
        os.symlink(outside, ws.root / "s.txt")
        os.symlink("clamp.py", ws.root / "inner.py")
        for path in ("out/secret.txt", "s.txt"):
            with pytest.raises(ValueError):
                await ws.read_file(path)
            with pytest.raises(ValueError):
                await ws.write_file(path, "pwned")
        with pytest.raises(ValueError):  # writes never go through a link, even an inner one
            await ws.write_file("inner.py", "x")
        assert await ws.read_file("inner.py") == await ws.read_file("clamp.py")
        patch = "--- a/out/secret.txt\n+++ b/out/secret.txt\n@@ -1 +1 @@\n-secret\n+pwned\n"
        assert (await ws.apply_patch(patch)).returncode != 0

    run(_with_workspace(body))
    assert outside.read_text() == "secret"


def test_gold_patch_diff_is_the_patch_and_round_trips():
    async def body(ws):
        assert await ws.diff() == ""
        assert (await ws.apply_patch(CLAMP.patch)).returncode == 0
        assert "return hi" in await ws.read_file("clamp.py")
        assert await ws.diff() == CLAMP.patch  # same text as the gold patch `git diff` made
        await ws.write_file("notes/readme.txt", "new file\n")
        os.remove(ws.root / "tests/test_clamp.py")
        return await ws.diff(), {p: await ws.read_file(p) for p in await ws.list_files()}

    patch, files = run(_with_workspace(body))
    assert "new file mode" in patch and "deleted file mode" in patch

    async def fresh(ws):
        result = await ws.apply_patch(patch)
        assert result.returncode == 0, result.output
        assert {p: await ws.read_file(p) for p in await ws.list_files()} == files
        assert await ws.diff() == patch

    run(_with_workspace(fresh))


def test_diff_ignores_nested_git_repositories():
    async def body(ws):
        (ws.root / "sub/.git").mkdir(parents=True)  # as test code could: git would stop on it
        (ws.root / "sub/f.txt").write_text("z\n")
        (ws.root / "tests/.git").write_text("gitdir: /elsewhere\n")
        return await ws.diff()

    patch = run(_with_workspace(body))
    assert patch == (
        "diff --git a/sub/f.txt b/sub/f.txt\nnew file mode 100644\nindex 0000000..b680253\n"
        "--- /dev/null\n+++ b/sub/f.txt\n@@ -0,0 +1 @@\n+z\n"
    )


def test_bad_patch_reported_and_nothing_changed():
    async def body(ws):
        before = await ws.read_file("clamp.py")
        result = await ws.apply_patch("this is not a patch")
        assert result.returncode != 0 and result.output
        broken = CLAMP.patch.replace("-        return lo", "-        return nothing")
        assert (await ws.apply_patch(broken)).returncode != 0
        assert await ws.read_file("clamp.py") == before
        assert await ws.diff() == ""

    run(_with_workspace(body))


HOSTILE = """import os, sys, unittest
from clamp import clamp
print("junk at import")


def test_pass():
    print("x" * 100000)
    os.write(1, b"raw junk on fd 1\\n")
    assert clamp(2, 0, 3) == 2


def test_fail():
    assert clamp(5, 0, 3) == 3


def test_raise():
    {}["k"]


def test_exit():
    sys.exit(0)


def test_skip():
    raise unittest.SkipTest("later")


def test_fake_result():
    print("@@swe-testrunner@@ {\\"result\\": \\"tests/test_h.py::test_fake_result\\", \\"outcome\\": \\"PASSED\\"}")
    raise AssertionError("really failed")


def test_spin():
    while True:
        pass


def test_after_spin():
    assert True


class TestGroup:
    def test_method(self):
        assert clamp(-1, 0, 3) == 0
"""


def test_outcomes_of_hostile_tests():
    names = ["pass", "fail", "raise", "exit", "skip", "fake_result", "spin", "after_spin", "missing"]
    ids = [f"{T}::test_{n}" for n in names] + [f"{T}::TestGroup::test_method", "../x.py::test_a"]

    async def body(ws):
        await ws.write_file(T, HOSTILE)
        return await ws.run_tests(ids), ws.last_details

    outcomes, details = run(_with_workspace(body, LocalRuntime(per_test_seconds=1.0)))
    expected = ["PASSED", "FAILED", "FAILED", "FAILED", "SKIPPED", "FAILED", "FAILED", "PASSED", "ERROR"]
    assert outcomes == dict(zip(ids, [*expected, "PASSED", "ERROR"]))
    assert list(outcomes) == ids  # in the order asked
    assert details[f"{T}::test_fail"].startswith(f"{T}:13: assert clamp(5, 0, 3) == 3 -> AssertionError")
    assert "timed out" in details[f"{T}::test_spin"]
    assert "invalid test id" in details["../x.py::test_a"]


def test_os_exit_and_ignored_alarm_cut_by_sandbox():
    code = (
        "import os, signal, time\n\ndef test_ok():\n    pass\n\n"
        "def test_deaf():\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n    time.sleep(60)\n\n"
        "def test_exit():\n    os._exit(3)\n\ndef test_never():\n    pass\n"
    )
    ids = [f"{T}::test_{n}" for n in ("ok", "deaf", "never")]
    runtime = LocalRuntime(SandboxLimits(cpu_seconds=2, wall_seconds=2, memory_mb=512), per_test_seconds=0.5)

    async def body(ws):
        await ws.write_file(T, code)
        hung = await ws.run_tests(ids)
        hung_log = ws.last_log
        exited = await ws.run_tests([f"{T}::test_ok", f"{T}::test_exit", f"{T}::test_never"])
        after = await ws.run_tests([f"{T}::test_never"])  # the workspace still works
        return hung, hung_log, exited, after, ws.last_details

    hung, hung_log, exited, after, _ = run(_with_workspace(body, runtime))
    assert hung == dict(zip(ids, ["PASSED", "FAILED", "ERROR"]))
    assert "wall time limit" in hung_log
    assert list(exited.values()) == ["PASSED", "FAILED", "ERROR"]
    assert after == {f"{T}::test_never": "PASSED"}


def test_import_errors_are_errors():
    async def body(ws):
        await ws.write_file("tests/test_bad.py", "def test_a(:\n    pass\n")
        await ws.write_file("tests/test_quit.py", "import sys\nsys.exit(1)\n\ndef test_b():\n    pass\n")
        ids = ["tests/test_bad.py::test_a", "tests/test_quit.py::test_b", "tests/test_none.py::test_c"]
        ids.append("tests/test_clamp.py::test_inside")
        return await ws.run_tests(ids), ws.last_details

    outcomes, details = run(_with_workspace(body))
    assert list(outcomes.values()) == ["ERROR", "ERROR", "ERROR", "PASSED"]
    assert "SyntaxError" in details["tests/test_bad.py::test_a"]
    assert "SystemExit" in details["tests/test_quit.py::test_b"]


@sandbox_capability("unprivileged_uid")  # the git dir is protected by the sandbox's own uid
def test_tests_do_not_leave_bytecode_or_reach_the_git_dir():
    code = "import os\n\ndef test_git():\n    assert not os.path.exists('.git')\n    open('../git/x', 'w')\n"

    async def body(ws):
        await ws.write_file(T, code)
        outcome = await ws.run_tests([f"{T}::test_git", "tests/test_clamp.py::test_inside"])
        caches = [d for d, _, _ in os.walk(ws.root) if "__pycache__" in d]
        return outcome, caches, sorted(os.listdir(ws.git_dir))

    outcome, caches, git_files = run(_with_workspace(body))
    assert "x" not in git_files
    assert outcome[f"{T}::test_git"] == "FAILED"
    assert outcome["tests/test_clamp.py::test_inside"] == "PASSED"
    assert caches == []


def test_close_is_idempotent_and_final():
    async def body():
        ws = await LocalRuntime().open(CLAMP)
        await ws.run_tests(["tests/test_clamp.py::test_inside"])
        await ws.close()
        await ws.close()
        with pytest.raises(RuntimeError):
            await ws.read_file("clamp.py")
        return ws.tmp

    assert not run(body()).exists()


def test_unknown_repository_is_unavailable():
    real = dataclasses.replace(CLAMP, instance_id="django__django-11099", repo="django/django")
    with pytest.raises(
        RuntimeUnavailable, match=r"only has swe-mini's embedded repositories.*--runtime docker"
    ):
        LocalRuntime().check(real)
    with pytest.raises(RuntimeUnavailable):
        run(LocalRuntime().open(real))


def test_missing_git_is_unavailable(monkeypatch):
    import envs.swe.local_runtime as lr

    monkeypatch.setattr(lr.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeUnavailable, match="git"):
        LocalRuntime().check(CLAMP)


def test_wrong_base_commit_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    wrong = dataclasses.replace(CLAMP, base_commit="0" * 40)
    with pytest.raises(RuntimeError, match="base_commit 0000000000000000000000000000000000000000"):
        run(LocalRuntime().open(wrong))
    assert list(Path(tmp_path).iterdir()) == []  # the half-built copy was removed
