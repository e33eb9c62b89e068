"""The pieces behind honest SWE rewards: the diff scan and the reset rule (`envs.swe.grading`),
the test runner's parent and guarded child (`envs.swe.testrunner`, `envs.swe.testchild`,
`envs.swe.testguard`) run
through the local runtime's `run_tests`, and what each lets through on purpose."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from envs.sandbox import Sandbox, SandboxLimits
from envs.swe import synthetic, testguard, testrunner
from envs.swe.grading import TEST_DIRS, protected, scan_patch, split_patch
from envs.swe.local_runtime import LocalRuntime
from envs.swe.swe_mini import load_swe_mini, repo_files
from envs.swe.workspace_memory import file_diff
from tests.requires import sandbox_capability

CLAMP = next(i for i in load_swe_mini() if i.instance_id == "swe-mini__clamp-1")
T = "tests/test_g.py"


def run_file(code: str, names: list[str], module: str | None = None) -> tuple[dict, dict, dict]:
    """(outcomes, details, tamper) of running `names` of a test file with `code` in a clamp-1
    workspace (`module`: replaces clamp.py, the code under test)."""

    async def body():
        ws = await LocalRuntime(per_test_seconds=2.0).open(CLAMP)
        try:
            await ws.write_file(T, code)
            if module is not None:
                await ws.write_file("clamp.py", module)
            outcomes = await ws.run_tests([f"{T}::{n}" for n in names])
            return outcomes, ws.last_details, ws.last_tamper
        finally:
            await ws.close()

    return asyncio.run(body())


def test_a_tampering_test_fails_and_the_rest_run_in_a_fresh_child():
    code = (
        "import sys\nfrom clamp import clamp\n\n\ndef test_a():\n    assert clamp(1, 0, 3) == 1\n\n\n"
        "def test_peek():\n    sys._getframe(0)\n\n\ndef test_b():\n    assert clamp(2, 0, 3) == 2\n"
    )
    outcomes, details, tamper = run_file(code, ["test_a", "test_peek", "test_b"])
    assert list(outcomes.values()) == ["PASSED", "FAILED", "PASSED"]
    assert tamper == {f"{T}::test_peek": f"sys._getframe at {T}:10"}
    assert details[f"{T}::test_peek"].startswith("tampering: sys._getframe")


def test_tampering_at_import_fails_every_test_of_the_file():
    outcomes, _, tamper = run_file(
        "import gc\ngc.get_referrers(1)\n\n\ndef test_a():\n    pass\n", ["test_a"]
    )
    assert outcomes == {f"{T}::test_a": "FAILED"} and "gc.get_referrers" in tamper[f"{T}::test_a"]


def test_skips_count_only_when_the_test_itself_skips():
    code = (
        "import unittest\nfrom clamp import clamp\n\n\ndef test_skip():\n    raise unittest.SkipTest('later')\n\n\n"
        "def test_code_skips():\n    clamp(1, 0, 3)\n"
    )
    module = "import unittest\n\n\ndef clamp(x, lo, hi):\n    raise unittest.SkipTest('not me')\n"
    outcomes, details, _ = run_file(code, ["test_skip", "test_code_skips"], module)
    assert list(outcomes.values()) == ["SKIPPED", "FAILED"]
    assert "SkipTest: not me" in details[f"{T}::test_code_skips"]


def test_only_the_functions_compiled_from_the_file_are_called():
    code = (
        "import functools\n\n\ndef deco(f):\n    @functools.wraps(f)\n    def wrapper():\n        return None\n"
        "    return wrapper\n\n\n@deco\ndef test_wrapped():\n    assert False\n\n\n"
        "def test_later():\n    pass\n\n\ntest_later = lambda: None\n"
    )
    outcomes, details, tamper = run_file(code, ["test_wrapped", "test_later"])
    assert list(outcomes.values()) == ["ERROR", "ERROR"] and not tamper
    assert "is not the function the test file defines" in details[f"{T}::test_wrapped"]


def test_ordinary_standard_library_use_is_not_tampering():
    module = (
        "import collections, dataclasses, enum, functools, json, re, typing\n\n"
        "P = collections.namedtuple('P', 'x y')\n\n\n@dataclasses.dataclass\nclass D:\n    a: int = 1\n\n\n"
        "class Color(enum.Enum):\n    RED = 1\n\n\nclass N(typing.NamedTuple):\n    a: int\n\n\n"
        "@functools.lru_cache\ndef clamp(x, lo, hi):\n    json.dumps(re.findall('a', 'aa'))\n"
        "    return max(lo, min(x, hi))\n"
    )
    code = "from clamp import clamp\n\n\ndef test_a():\n    assert clamp(5, 0, 3) == 3\n"
    outcomes, details, tamper = run_file(code, ["test_a"], module)
    assert outcomes == {f"{T}::test_a": "PASSED"} and not tamper, details


def test_no_site_hooks_and_no_bytecode_reach_the_runner():
    # present in the working copy (as after a test run in an episode): the runner must ignore them
    async def body():
        ws = await LocalRuntime().open(CLAMP)
        try:
            (ws.root / "sitecustomize.py").write_text("import os; os._exit(7)\n")
            (ws.root / "usercustomize.py").write_text("import os; os._exit(7)\n")
            (ws.root / "zz.pth").write_text("import os; os._exit(7)\n")
            return await ws.run_tests(["tests/test_clamp.py::test_inside"]), ws.last_log
        finally:
            await ws.close()

    outcomes, log = asyncio.run(body())
    assert outcomes == {"tests/test_clamp.py::test_inside": "PASSED"} and log == ""


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_a.py",
        "tests/helpers.py",
        "pkg/tests/x.py",
        "test/x.py",
        "testing/x.py",
        "test_a.py",
        "pkg/a_test.py",
        "conftest.py",
        "pkg/conftest.py",
        "sitecustomize.py",
        "usercustomize.py",
        "a.pth",
        "__pycache__/a.cpython-311.pyc",
        "pkg/__pycache__",
        "a.so",
        "a.pyc",
        "account.py",
        "pkg/testdata.py",
        "contest.py",
        "attest.py",
        "latest/x.py",
        "tests",
    ],
)
def test_the_child_guard_and_the_grader_protect_the_same_paths(path):
    _, changes_protected = testguard._path_checks("/repo")
    assert changes_protected(("/repo/" + path,)) == protected(path, dirs=TEST_DIRS)
    assert not changes_protected(("/elsewhere/" + path,))


def test_scan_is_silent_on_gold_patches_and_whole_base_sources():
    bugs = [synthetic.bug_for_id(synthetic.generated_id("eval0", i)) for i in range(300)]
    cases = [(i.patch, repo_files(i.instance_id)) for i in load_swe_mini()]
    cases += [(b.instance.patch, b.files) for b in bugs]
    for patch, files in cases:
        assert scan_patch(patch) == [], patch
        assert not [p for p in split_patch(patch) if protected(p, dirs=TEST_DIRS)]
        for path, text in files.items():  # even a patch rewriting every source line stays clean
            if not protected(path, dirs=TEST_DIRS):
                assert scan_patch(file_diff(path, None, text)) == [], (path, text)


@pytest.mark.parametrize(
    "added, finding",
    [
        ("f = sys._getframe(1)", "stack frames"),
        ("x = globals()['y']", "dynamic code"),
        ("m = __import__('sys').modules", "introspection"),
        ("sys.modules['t'].test_a = None", "module table"),
        ("import signal", "hooks"),
        ("os._exit(0)", "processes"),
        ("open('tests/test_a.py', 'w')", "files"),
        ("print('PASSED')", "test runner"),
    ],
)
def test_scan_findings(added, finding):
    findings = scan_patch(file_diff("calc.py", "x = 1\n", f"x = 1\n{added}\n"))
    assert any(f.startswith(f"calc.py: {finding}") for f in findings), findings
    assert scan_patch(file_diff("tests/test_calc.py", "", f"{added}\n")) == []  # reset, not scanned


def test_scan_structural_findings():
    symlink = "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+/proc\n"
    binary = "diff --git a/a.py b/a.py\nindex 1..2 100644\nGIT binary patch\nliteral 1\n"
    shadow = file_diff("json.py", None, "x = 1\n")
    hook = file_diff("pkg/conftest.py", None, "x = 1\n")
    assert "the patch makes a symlink" in scan_patch(symlink)
    assert "the patch has binary content" in scan_patch(binary)
    assert scan_patch(shadow) == ["json.py: shadows the standard library's json"]
    assert scan_patch(hook, sources=False) == ["pkg/conftest.py: a file Python or pytest runs unasked"]


def test_base_grade_resets_protected_files_of_an_in_memory_workspace():
    from envs.swe.runtime import PatchGrade, Runtime
    from envs.swe.workspace_memory import InMemoryWorkspace
    from tests.fixtures.swe_demo import demo_instance

    seen = {}

    class Memory(Runtime):
        name = "memory-test"

        def check(self, instance):
            pass

        async def open(self, instance):
            return InMemoryWorkspace(instance, {"calc.py": "x = 1\n", "tests/test_calc.py": "t = 1\n"})

        async def evaluate(self, workspace, instance):
            seen.update(workspace.files)
            return PatchGrade(resolved=True, applied=True)

    patch = file_diff("calc.py", "x = 1\n", "x = 2\n") + file_diff("tests/test_calc.py", "t = 1\n", "t = 2\n")
    patch += file_diff("conftest.py", None, "c = 1\n")
    grade = asyncio.run(Memory().grade(demo_instance(""), patch))
    assert seen == {"calc.py": "x = 2\n", "tests/test_calc.py": "t = 1\n"}
    assert grade.reset == ["conftest.py", "tests/test_calc.py"] and grade.resolved  # reported, no veto


@sandbox_capability("unprivileged_uid")  # as root without a sandbox uid, dumpability does not limit /proc
def test_a_child_cannot_open_the_parents_pipe_or_memory(tmp_path):
    # what a child that got past its guard would try: the parent's pipe to the harness (fd 1)
    # and its memory (the nonce); the parent made itself undumpable before starting children
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_x.py").write_text("def test_a():\n    pass\n")
    probe = (
        "import os, sys\nsys.stdin.read()\nfound = []\nfor what in ('fd/1', 'mem'):\n    try:\n"
        "        os.close(os.open(f'/proc/{os.getppid()}/{what}', os.O_RDONLY))\n"
        "        found.append(what)\n    except OSError:\n        pass\n"
        "open('probe.txt', 'w').write(' '.join(found) or 'none')\n"
    )
    request = {"nonce": "n", "ids": ["tests/test_x.py::test_a"], "per_test_seconds": 2, "child": probe}
    with Sandbox(SandboxLimits(), tmp_path) as sandbox:
        argv = [sys.executable, "-I", "-S", "-B", "-c", Path(testrunner.__file__).read_text()]
        sandbox.run(argv, stdin=json.dumps(request))
    assert (tmp_path / "probe.txt").read_text() == "none"
