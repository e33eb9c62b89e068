"""Regenerate `mini/swe_mini.jsonl` from the readable instance sources in `mini/src/`.

    python -m envs.swe.swe_mini_build            # rebuild the JSONL, then grade every instance
    python -m envs.swe.swe_mini_build --check    # exit 1 if the JSONL differs from src/ (no writes)

One source file per instance, `src/<name>.txt`, in sections opened by `=== ` lines:

    === issue                       the problem statement (a user's words, <= 200 chars)
    === file <path>                 a file of the repository at base (the buggy module, the
                                    existing tests); one section per file
    === fix <path>                  the gold patch: one `-old line` and one `+new line`
    === tests <path>                test functions appended to <path> by the test patch

The repository must be one module (<= 20 lines, <= 500 chars) plus `tests/test_*.py`, ASCII
only. Everything else is derived with real git: the base commit (fixed identity and dates,
`envs.swe.local_git.commit_base`, so `LocalRuntime` reproduces it), the gold `patch` and
the `test_patch` (`git diff` of the edited working copy), FAIL_TO_PASS (the functions in the
`tests` section) and PASS_TO_PASS (the test functions at base). After writing, every instance
is graded with `LocalRuntime`: the gold patch must resolve it and the empty patch must not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from pathlib import Path

from envs.swe.local_git import BASE_DATE, commit_base, run_git, write_files
from envs.swe.swe_mini import DATA_FILE, VERSION

SRC = Path(__file__).with_name("mini") / "src"
MAX_MODULE_CHARS, MAX_MODULE_LINES, MAX_ISSUE_CHARS = 500, 20, 200
_TEST_DEF = re.compile(r"^def (test_\w+)\(", re.MULTILINE)


class SpecError(ValueError):
    """An instance source that breaks the format or the size rules; the message says which."""


def parse_spec(name: str, text: str) -> dict:
    """Sections of one `src/<name>.txt`: issue, files {path: text}, fix (path, old, new), tests."""
    spec: dict = {"name": name, "files": {}}
    key, lines = None, []
    for line in [*text.splitlines(), "=== end"]:
        if not line.startswith("=== "):
            lines.append(line)
            continue
        if key is not None:
            body = "\n".join(lines).strip("\n") + "\n"
            kind, _, path = key.partition(" ")
            if kind == "file":
                spec["files"][path] = body
            elif kind in ("issue", "fix", "tests"):
                spec[kind] = (path, body) if path else body.strip()
            else:
                raise SpecError(f"{name}: unknown section {key!r}")
        key, lines = line[4:].strip(), []
    return spec


def check_spec(spec: dict) -> tuple[str, str, str, str]:
    """Validate the size and format rules; returns (module path, test path, old line, new line)."""
    name, files = spec["name"], spec["files"]
    for field in ("issue", "fix", "tests"):
        if field not in spec:
            raise SpecError(f"{name}: missing section {field!r}")
    modules = [p for p in files if not p.startswith("tests/")]
    tests = [p for p in files if p.startswith("tests/test_") and p.endswith(".py")]
    if len(modules) != 1 or len(tests) != 1 or len(files) != 2:
        raise SpecError(f"{name}: need exactly one module and one tests/test_*.py, got {sorted(files)}")
    module, test_file = modules[0], tests[0]
    source = files[module]
    if len(source) > MAX_MODULE_CHARS or source.count("\n") > MAX_MODULE_LINES:
        raise SpecError(f"{name}: {module} has {len(source)} chars / {source.count(chr(10))} lines")
    if len(spec["issue"]) > MAX_ISSUE_CHARS:
        raise SpecError(f"{name}: issue has {len(spec['issue'])} chars (max {MAX_ISSUE_CHARS})")
    for text in [spec["issue"], *files.values(), spec["fix"][1], spec["tests"][1]]:
        if any(not (c == "\n" or " " <= c <= "~") for c in text):
            raise SpecError(f"{name}: only printable ASCII and newlines are allowed")
    fix_path, fix = spec["fix"]
    fix_lines = fix.splitlines()
    if fix_path != module or len(fix_lines) != 2 or fix_lines[0][:1] != "-" or fix_lines[1][:1] != "+":
        raise SpecError(f"{name}: the fix must be `=== fix {module}` with one -line and one +line")
    old, new = fix_lines[0][1:], fix_lines[1][1:]
    if source.splitlines().count(old) != 1:
        raise SpecError(f"{name}: the fix's old line must occur exactly once in {module}: {old!r}")
    if spec["tests"][0] != test_file:
        raise SpecError(f"{name}: the tests section must extend {test_file}")
    return module, test_file, old, new


async def build_row(spec: dict) -> dict:
    """One JSONL row: the official SWE-bench fields (computed with git) plus `files`."""
    module, test_file, old, new = check_spec(spec)
    name, files = spec["name"], spec["files"]
    with tempfile.TemporaryDirectory(prefix="swe-mini-build-") as tmp:
        root, git_dir = Path(tmp) / "repo", Path(tmp) / "git"
        root.mkdir()
        write_files(root, files)
        base_commit = await commit_base(git_dir, root)

        async def diff_with(path: str, text: str) -> str:
            write_files(root, {path: text})
            result, diff = await run_git(git_dir, root, "diff", "--no-ext-diff")
            write_files(root, {path: files[path]})
            if result.returncode != 0 or not diff:
                raise SpecError(f"{name}: git diff failed or is empty: {result.output}")
            return diff

        lines = files[module].splitlines(keepends=True)
        lines[[line.rstrip("\n") for line in lines].index(old)] = new + "\n"
        patch = await diff_with(module, "".join(lines))
        test_patch = await diff_with(test_file, files[test_file] + "\n\n" + spec["tests"][1])
    fail_to_pass = [f"{test_file}::{t}" for t in _TEST_DEF.findall(spec["tests"][1])]
    pass_to_pass = [f"{test_file}::{t}" for t in _TEST_DEF.findall(files[test_file])]
    if not fail_to_pass or not pass_to_pass:
        raise SpecError(f"{name}: needs at least one FAIL_TO_PASS and one PASS_TO_PASS test")
    return {
        "instance_id": f"swe-mini__{name}-1",
        "repo": f"swe-mini/{name}",
        "base_commit": base_commit,
        "problem_statement": spec["issue"],
        "patch": patch,
        "test_patch": test_patch,
        "FAIL_TO_PASS": json.dumps(fail_to_pass),
        "PASS_TO_PASS": json.dumps(pass_to_pass),
        "version": VERSION,
        "environment_setup_commit": base_commit,
        "hints_text": "",
        "created_at": BASE_DATE.replace("+0000", "Z"),
        "difficulty": "<15 min fix",
        "files": files,
    }


def load_specs() -> list[dict]:
    """Every `src/*.txt`, parsed, in name order."""
    if not SRC.is_dir():  # installed wheels ship only the JSONL
        raise SpecError(f"{SRC} not found: build swe-mini from a source checkout")
    return [parse_spec(p.stem, p.read_text(encoding="ascii")) for p in sorted(SRC.glob("*.txt"))]


async def build_rows() -> list[dict]:
    """All rows, sorted by instance_id (what the JSONL should contain)."""
    rows = await asyncio.gather(*(build_row(spec) for spec in load_specs()))
    return sorted(rows, key=lambda r: r["instance_id"])


def to_jsonl(rows: list[dict]) -> str:
    """The JSONL text (ASCII, one row per line, stable key order)."""
    return "".join(json.dumps(row, ensure_ascii=True) + "\n" for row in rows)


async def verify() -> list[str]:
    """Grade every instance of the written JSONL; the problems found (empty when all is well)."""
    from envs.swe.local_runtime import LocalRuntime
    from envs.swe.swe_mini import load_swe_mini

    runtime, limit = LocalRuntime(), asyncio.Semaphore(8)

    async def grade(instance, patch):
        async with limit:
            return await runtime.grade(instance, patch)

    instances = load_swe_mini()
    gold = await asyncio.gather(*(grade(i, i.patch) for i in instances))
    empty = await asyncio.gather(*(grade(i, "") for i in instances))
    problems = []
    for inst, g, e in zip(instances, gold, empty):
        if not g.resolved:
            problems.append(f"{inst.instance_id}: the gold patch does not resolve it: {g.tests} {g.log}")
        if e.resolved or any(e.tests.get(t) == "PASSED" for t in inst.fail_to_pass):
            problems.append(f"{inst.instance_id}: a FAIL_TO_PASS test passes at base: {e.tests}")
        if any(e.tests.get(t) != "PASSED" for t in inst.pass_to_pass):
            problems.append(f"{inst.instance_id}: a PASS_TO_PASS test fails at base: {e.tests}")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Command line: rebuild (and verify) or `--check` that the JSONL is up to date."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare the JSONL with src/")
    args = parser.parse_args(argv)
    text = to_jsonl(asyncio.run(build_rows()))
    if args.check:
        same = DATA_FILE.exists() and DATA_FILE.read_text(encoding="ascii") == text
        print(
            f"{DATA_FILE.name} is "
            + ("up to date" if same else "OUT OF DATE: run python -m envs.swe.swe_mini_build")
        )
        return 0 if same else 1
    DATA_FILE.write_text(text, encoding="ascii")
    print(f"wrote {text.count(chr(10))} instances to {DATA_FILE}")
    problems = asyncio.run(verify())
    for problem in problems:
        print("PROBLEM:", problem, file=sys.stderr)
    print(f"graded: {'all resolved by gold, none by the empty patch' if not problems else 'see problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
