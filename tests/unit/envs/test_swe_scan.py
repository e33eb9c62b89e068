"""The diff scan (`envs.swe.scan`), a second line behind the grader: it reads a change as git
applied it and Python reads it. Each way the text-matching scan of issue 34 was evaded is a class
here, tried with several tamper tools on several instances through the whole grader
(`LocalRuntime.grade`, whose veto must catch it): fullwidth identifiers (NFKC), a `utf-7`
coding cookie, a form feed before each added line, a traditional diff whose header names a test
file while git writes the module, an added line that reads like a `+++ b/<test file>` header,
and symlinks written with any mode spelling. Plus the unit rules and silence on gold patches."""

from __future__ import annotations

import asyncio
import functools

import pytest

from envs.swe import synthetic
from envs.swe.grading import TEST_DIRS, protected, split_patch
from envs.swe.local_runtime import LocalRuntime
from envs.swe.scan import FileChange, python_lines, scan_changes
from envs.swe.swe_mini import load_swe_mini, repo_files
from envs.swe.workspace_memory import file_diff

MINI = {i.instance_id: i for i in load_swe_mini()}
SYNTH = synthetic.bug_for_id(synthetic.generated_id("eval0", 2))
INSTANCES = {
    "account": MINI["swe-mini__account-1"],
    "roman": MINI["swe-mini__roman-1"],
    "synth": SYNTH.instance,
}
TOOLS = {  # (import line, the tamper tool)
    "os._exit": ("import os", "os._exit(0)"),
    "sys._getframe": ("import sys", "sys._getframe(0)"),
    "gc walk": ("import gc", "gc.get_objects()"),
}


def module_of(name: str) -> tuple[str, str]:
    instance = INSTANCES[name]
    if name == "synth":
        return SYNTH.path, SYNTH.files[SYNTH.path]
    files = repo_files(instance.instance_id)
    path = next(p for p in files if not p.startswith("tests/"))
    return path, files[path]


def files_of(path: str) -> dict[str, str]:
    """The base files of the instance whose module is `path`."""
    if path == SYNTH.path:
        return SYNTH.files
    return next(repo_files(i.instance_id) for i in INSTANCES.values() if path in repo_files(i.instance_id))


def fullwidth(text: str) -> str:
    """ASCII letters of identifiers as fullwidth letters (Python folds them back: NFKC)."""
    out, word = [], ""
    for ch in text + " ":
        if ch.isalnum() or ch == "_":
            word += ch
            continue
        keyword = word in ("import", "from", "as", "def", "return")
        out.append(
            word
            if keyword
            else "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalpha() else c for c in word)
        )
        out.append(ch)
        word = ""
    return "".join(out)[:-1]


def whole_file_patch(old_header: str, new_header: str, old: str, new_lines: list[str]) -> str:
    """A diff replacing every line of `old` by `new_lines` (raw text: any bytes survive)."""
    old_lines = old.splitlines()
    hunk = f"@@ -1,{len(old_lines)} +1,{len(new_lines)} @@\n"
    body = "".join(f"-{line}\n" for line in old_lines) + "".join(f"+{line}\n" for line in new_lines)
    return f"{old_header}\n{new_header}\n{hunk}{body}"


def evasion(kind: str, path: str, base: str, tool: tuple[str, str]) -> str:
    """The patch adding `tool` to the module at `path` in the way `kind` hid it from the old scan."""
    lines, git = base.splitlines(), (f"--- a/{path}", f"+++ b/{path}")
    imp, call = tool
    if kind == "fullwidth identifiers":
        return whole_file_patch(*git, base, [imp, fullwidth(call), *lines])
    if kind == "utf-7 coding cookie":
        hidden = call.replace("_", "+AF8-").replace(".", "+AC4-").replace("(", "+ACg-")
        text = "\n".join(lines).encode("utf-7").decode("ascii")  # '+' in the module becomes '+-'
        return whole_file_patch(*git, base, ["# coding: utf-7", imp, hidden, *text.splitlines()])
    if kind == "form feed before each line":
        return whole_file_patch(*git, base, [f"\x0c{line}" for line in (imp, call, *lines)])
    if kind == "traditional diff naming tests/":
        return whole_file_patch(f"--- tests/{path}", f"+++ tests/{path}", base, [imp, call, *lines])
    if kind == "fake +++ header line":  # after a real change of the test file, which it names
        test_path = f"tests/test_{path[:-3]}.py"
        first = files_of(path)[test_path].splitlines()[0]
        touch_test = f"--- a/{test_path}\n+++ b/{test_path}\n@@ -1 +1,2 @@\n+# reset anyway\n {first}\n"
        fake = ['_notes = """', f"++ b/{test_path}", '"""']
        return touch_test + whole_file_patch(*git, base, [*fake, imp, call, *lines])
    raise ValueError(kind)


EVASIONS = [
    "fullwidth identifiers",
    "utf-7 coding cookie",
    "form feed before each line",
    "traditional diff naming tests/",
    "fake +++ header line",
]


@functools.cache
def gold_resolves(name: str) -> bool:
    return asyncio.run(LocalRuntime().grade(INSTANCES[name], INSTANCES[name].patch)).resolved


@pytest.mark.parametrize("instance", ["account", "roman", "synth"])
@pytest.mark.parametrize("tool", list(TOOLS))
@pytest.mark.parametrize("kind", EVASIONS)
def test_scan_evasions_are_caught_through_the_whole_grader(kind, tool, instance):
    path, base = module_of(instance)
    grade = asyncio.run(LocalRuntime().grade(INSTANCES[instance], evasion(kind, path, base, TOOLS[tool])))
    assert grade.applied, grade.log  # git applied it (to the module, whatever the header said)
    assert not grade.resolved and any(
        f.startswith(f"{path}: ") and tool.split(".")[-1][:3] in f or "gc" in f for f in grade.tamper
    ), grade.tamper
    assert gold_resolves(instance)


SYMLINK = "diff --git a/{name} b/{name}\nnew file mode {mode}\nindex 0000000..1111111\n--- /dev/null\n+++ b/{name}\n"
SYMLINK += "@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n"


@pytest.mark.parametrize("instance", ["account", "synth"])
@pytest.mark.parametrize("target", ["/proc/self/fd/1", "../git/config", "tests"])
@pytest.mark.parametrize("mode", ["120000", "0120000", "00120000", "120777"])
def test_symlinks_are_found_whatever_their_mode_spelling(mode, target, instance):
    patch = SYMLINK.format(name="helper.py", mode=mode, target=target)
    grade = asyncio.run(LocalRuntime().grade(INSTANCES[instance], patch))
    assert grade.applied, grade.log
    assert "helper.py: the patch makes a symlink" in grade.tamper and not grade.resolved


# ---- the rules, unit by unit ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "source, line",
    [
        ("import os\nｏｓ._ｅｘｉｔ(0)\n", "os . _exit ( 0 )"),
        ("# coding: utf-7\nos+AC4AXw-exit(0)\n", "os . _exit ( 0 )"),
        ("\x0cimport os\n\x0cos._exit(0)\n", "os . _exit ( 0 )"),
        ("x = (os\n  ._exit)  # a comment\n", "x = ( os . _exit )"),
        ("x = 'PA\\x53SED'\n", "x = 'PASSED'"),
        ("x = 1 \\\n + 2\n", "x = 1 + 2"),
    ],
)
def test_python_lines_read_source_as_the_interpreter_does(source, line):
    assert line in python_lines(source.encode("utf-8"))


def test_what_a_file_already_had_does_not_count():
    old = b"import os\nos.remove('x')\n"
    assert scan_changes([FileChange("m.py", 0o100644, 0o100644, old, old + b"y = 1\n")]) == []
    twice = old + b"os.remove('y')\n"
    assert scan_changes([FileChange("m.py", 0o100644, 0o100644, old, twice)]) == ["m.py: files (os.remove)"]


@pytest.mark.parametrize(
    "change, finding",
    [
        (FileChange("l", 0, 0o120000, None, b"x"), "l: the patch makes a symlink"),
        (FileChange("a.py", 0o100644, 0o120000, b"", b"x"), "a.py: the patch makes a symlink"),
        (FileChange("sub", 0, 0o160000), "sub: the patch makes a submodule"),
        (FileChange("a.py", 0o100644, 0o100644, b"", b"\0\1"), "a.py: binary content"),
        (
            FileChange("json.py", 0, 0o100644, None, b"x = 1\n"),
            "json.py: shadows the standard library's json",
        ),
        (
            FileChange("unittest/__init__.py", 0, 0o100644, None, b""),
            "unittest/__init__.py: shadows the standard library's unittest",
        ),
        (
            FileChange("pkg/conftest.py", 0, 0o100644, None, b""),
            "pkg/conftest.py: a file Python or pytest runs unasked",
        ),
        (FileChange("zz.pth", 0, 0o100644, None, b""), "zz.pth: a file Python or pytest runs unasked"),
    ],
)
def test_structural_findings(change, finding):
    assert finding in scan_changes([change])


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
        ("print('@@rlbench-swe@@')", "test runner"),
    ],
)
def test_scan_findings(added, finding):
    change = FileChange("calc.py", 0o100644, 0o100644, b"x = 1\n", f"x = 1\n{added}\n".encode())
    assert any(f.startswith(f"calc.py: {finding}") for f in scan_changes([change]))
    test_file = FileChange("tests/test_calc.py", 0o100644, 0o100644, b"", f"{added}\n".encode())
    assert scan_changes([test_file]) == []  # reset, not scanned


def test_scan_is_silent_on_gold_patches_and_whole_base_sources():
    bugs = [synthetic.bug_for_id(synthetic.generated_id("eval0", i)) for i in range(300)]
    cases = [(i.patch, repo_files(i.instance_id)) for i in load_swe_mini()] + [
        (b.instance.patch, b.files) for b in bugs
    ]
    for patch, files in cases:
        assert not [p for p in split_patch(patch) if protected(p, dirs=TEST_DIRS)]
        for path, text in files.items():  # even a patch rewriting every source line stays clean
            if not protected(path, dirs=TEST_DIRS):
                assert scan_changes([FileChange(path, 0, 0o100644, None, text.encode())]) == [], (path, text)

    async def gold_changes():
        runtime, found = LocalRuntime(), []
        for instance in [*load_swe_mini()[:10], *(b.instance for b in bugs[:5])]:
            ws = await runtime.open(instance)
            try:
                assert (await ws.apply_patch(instance.patch)).returncode == 0
                found += scan_changes(await ws.changes())
            finally:
                await ws.close()
        return found

    assert asyncio.run(gold_changes()) == []


def test_git_view_names_the_path_git_wrote_and_its_mode():
    account = INSTANCES["account"]
    base = repo_files(account.instance_id)["account.py"]

    async def body():
        ws = await LocalRuntime().open(account)
        try:
            patch = whole_file_patch("--- tests/account.py", "+++ tests/account.py", base, ["x = 1"])
            assert (await ws.apply_patch(patch)).returncode == 0
            return await ws.changes()
        finally:
            await ws.close()

    (change,) = asyncio.run(body())
    assert (change.path, change.old_mode, change.new_mode, change.new) == (
        "account.py",
        0o100644,
        0o100644,
        b"x = 1\n",
    )
    assert change.old == base.encode()


def test_patch_text_still_names_test_files_for_the_reset():
    patch = file_diff("calc.py", "x = 1\n", "x = 2\n") + file_diff("tests/test_calc.py", "t = 1\n", "t = 2\n")
    assert sorted(split_patch(patch)) == ["calc.py", "tests/test_calc.py"]


# ---- the fresh round (issue 34's "other payloads"): ways past the patterns themselves ------------
@pytest.mark.parametrize(
    "source, finding",
    [
        ("from os import _exit as q\nq(0)\n", "processes (os._exit)"),
        ("import os as o\no.system('x')\n", "processes (os.system)"),
        ("from os import (kill,\n    getpid)\nkill(getpid(), 9)\n", "processes (os.kill)"),
        ("import operator\nf = operator.attrgetter('system')\n", "introspection (attrgetter)"),
        ("x = type(1).__getattribute__\n", "introspection (__getattribute__)"),
        ("import os\nos.popen('x')\n", "processes (os.popen)"),
        ("import os\nos.posix_spawn('/bin/true', [], {})\n", "processes (os.posix_spawn)"),
        ("import multiprocessing\n", "processes (multiprocessing)"),
        ("from sys import _getframe as g\n", "stack frames (_getframe)"),
        ("x = 1\n" + "#" * (2 << 20) + "\n", "too large to scan"),
    ],
)
def test_imports_spelled_out_and_other_names_the_scan_now_reads(source, finding):
    found = scan_changes([FileChange("m.py", 0, 0o100644, None, source.encode())])
    assert any(f.startswith(f"m.py: {finding}") for f in found), found
