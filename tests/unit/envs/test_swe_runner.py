"""The local SWE test runner through `LocalWorkspace.run_tests` (`envs.swe.oracle` rewrites,
`envs.swe.testchild` runs in the sandbox, `envs.swe.verdict` decides), the reset rule
(`envs.swe.grading.protected`), and what each lets through on purpose. Issue 34 replaced the
child's audit guard: code under test may now read frames or walk objects (nothing there decides
a verdict), so the guard's tests gave way to these."""

from __future__ import annotations

import asyncio
import os

import pytest

from envs.swe.grading import TEST_DIRS, protected
from envs.swe.local_runtime import LocalRuntime
from envs.swe.swe_mini import load_swe_mini
from envs.swe.workspace_memory import file_diff

CLAMP = next(i for i in load_swe_mini() if i.instance_id == "swe-mini__clamp-1")
T = "tests/test_g.py"


def run_file(code: str, names: list[str], module: str | None = None) -> tuple[dict, dict, dict, dict]:
    """(outcomes, details, tamper, unsealed) of running `names` of a test file with `code` in a
    clamp-1 workspace (`module`: replaces clamp.py, the code under test)."""

    async def body():
        ws = await LocalRuntime(per_test_seconds=2.0).open(CLAMP)
        try:
            await ws.write_file(T, code)
            if module is not None:
                await ws.write_file("clamp.py", module)
            outcomes = await ws.run_tests([f"{T}::{n}" for n in names])
            return outcomes, ws.last_details, ws.last_tamper, ws.last_unsealed
        finally:
            await ws.close()

    return asyncio.run(body())


def test_a_forging_test_fails_and_the_others_are_decided_on_their_values():
    code = (
        "import sys\nfrom clamp import clamp\n\n\ndef test_a():\n    assert clamp(1, 0, 3) == 1\n\n\n"
        "def test_forge():\n    assert clamp(9, 0, 3) == 3\n    f = sys._getframe()\n"
        "    while 'send' not in f.f_locals:\n        f = f.f_back\n"
        "    f.f_locals['send']('V', f.f_locals['test_id'], 0, [3])\n\n\n"
        "def test_b():\n    assert clamp(2, 0, 3) == 2\n"
    )
    outcomes, details, tamper, _ = run_file(code, ["test_a", "test_forge", "test_b"])
    assert list(outcomes.values()) == ["PASSED", "FAILED", "PASSED"], details
    assert "reported twice" in tamper[f"{T}::test_forge"]


def test_test_files_are_out_of_the_copy_while_tests_run_and_back_after():
    code = "import os\n\n\ndef test_sees():\n    assert sorted(os.listdir('tests')) == []\n"

    async def body():
        ws = await LocalRuntime().open(CLAMP)
        try:
            await ws.write_file(T, code)
            before = sorted(os.listdir(ws.root / "tests"))
            outcomes = await ws.run_tests([f"{T}::test_sees"])
            return before, outcomes, sorted(os.listdir(ws.root / "tests")), os.path.exists(ws.tmp / "held")
        finally:
            await ws.close()

    before, outcomes, after, held = asyncio.run(body())
    assert outcomes == {f"{T}::test_sees": "PASSED"}
    assert before == after == ["test_clamp.py", "test_g.py"] and not held


def test_skips_count_only_when_the_test_itself_skips():
    code = (
        "import unittest\nfrom clamp import clamp\n\n\ndef test_skip():\n    raise unittest.SkipTest('later')\n\n\n"
        "def test_code_skips():\n    clamp(1, 0, 3)\n"
    )
    module = "import unittest\n\n\ndef clamp(x, lo, hi):\n    raise unittest.SkipTest('not me')\n"
    outcomes, details, _, unsealed = run_file(code, ["test_skip", "test_code_skips"], module)
    assert list(outcomes.values()) == ["SKIPPED", "FAILED"]
    assert "SkipTest: not me" in details[f"{T}::test_code_skips"] and len(unsealed) == 2


def test_decorated_or_replaced_tests_are_unsealed_and_never_resolve_an_instance():
    code = (
        "import functools\nfrom clamp import clamp\n\n\ndef deco(f):\n    @functools.wraps(f)\n    def wrapper():\n"
        "        return None\n    return wrapper\n\n\n@deco\ndef test_wrapped():\n    assert clamp(5, 0, 3) == 3\n"
    )
    outcomes, details, _, unsealed = run_file(code, ["test_wrapped"])
    assert outcomes == {f"{T}::test_wrapped": "PASSED"} and "decorated" in unsealed[f"{T}::test_wrapped"]
    assert "as the sandboxed run reported it" in details[f"{T}::test_wrapped"]

    async def grade():  # an instance whose FAIL_TO_PASS test is unsealed: not resolved
        import dataclasses

        instance = dataclasses.replace(
            CLAMP, test_patch=file_diff(T, None, code), fail_to_pass=(f"{T}::test_wrapped",), pass_to_pass=()
        )
        return await LocalRuntime().grade(instance, "")

    result = asyncio.run(grade())
    assert result.tests == {f"{T}::test_wrapped": "PASSED"} and not result.resolved
    assert "on the sandboxed run's word" in result.log


def test_ordinary_standard_library_use_passes():
    module = (
        "import collections, dataclasses, enum, functools, json, re, typing\n\n"
        "P = collections.namedtuple('P', 'x y')\n\n\n@dataclasses.dataclass\nclass D:\n    a: int = 1\n\n\n"
        "class Color(enum.Enum):\n    RED = 1\n\n\nclass N(typing.NamedTuple):\n    a: int\n\n\n"
        "@functools.lru_cache\ndef clamp(x, lo, hi):\n    json.dumps(re.findall('a', 'aa'))\n"
        "    return max(lo, min(x, hi))\n"
    )
    code = "from clamp import clamp\n\n\ndef test_a():\n    assert clamp(5, 0, 3) == 3\n"
    outcomes, details, tamper, _ = run_file(code, ["test_a"], module)
    assert outcomes == {f"{T}::test_a": "PASSED"} and not tamper, details


def test_no_site_hooks_and_no_bytecode_reach_the_run():
    # present in the working copy (as after a test run in an episode): the run must ignore them
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
    "path, reset",
    [
        ("tests/test_a.py", True),
        ("tests/helpers.py", True),
        ("pkg/tests/x.py", True),
        ("test/x.py", True),
        ("testing/x.py", True),
        ("test_a.py", True),
        ("pkg/a_test.py", True),
        ("conftest.py", True),
        ("pkg/conftest.py", True),
        ("sitecustomize.py", True),
        ("usercustomize.py", True),
        ("a.pth", True),
        ("__pycache__/a.cpython-311.pyc", True),
        ("pkg/__pycache__", True),
        ("a.so", True),
        ("a.pyc", True),
        ("account.py", False),
        ("pkg/testdata.py", False),
        ("contest.py", False),
        ("attest.py", False),
        ("latest/x.py", False),
    ],
)
def test_what_grading_resets(path, reset):
    assert protected(path, dirs=TEST_DIRS) is reset


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
    assert grade.tamper == ["conftest.py: a file Python or pytest runs unasked"]
