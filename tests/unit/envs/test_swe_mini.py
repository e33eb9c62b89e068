"""Tests for the embedded swe-mini dataset: schema, size limits (a 1024-character context must
hold the issue and the module), reproducible base commits, the JSONL in sync with `src/`, and
for every instance the SWE-bench verdicts: the gold patch resolves it, the empty patch does not."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re

import pytest

from envs.swe import swe_mini_build as build
from envs.swe.instance import SWEInstance
from envs.swe.local_runtime import LocalRuntime
from envs.swe.swe_mini import DATA_FILE, load_swe_mini, repo_files

INSTANCES = load_swe_mini()
TEST_ID = re.compile(r"^tests/test_\w+\.py::test_\w+$")


def _module(instance: SWEInstance) -> tuple[str, str]:
    """(path, text) of the one source module of the instance's repository."""
    (path,) = [p for p in repo_files(instance.instance_id) if not p.startswith("tests/")]
    return path, repo_files(instance.instance_id)[path]


def test_schema():
    assert len(INSTANCES) >= 24
    assert len({i.instance_id for i in INSTANCES}) == len(INSTANCES)
    for inst in INSTANCES:
        name = inst.repo.removeprefix("swe-mini/")
        assert inst.instance_id == f"swe-mini__{name}-1"
        assert inst.version == "1"
        assert re.fullmatch(r"[0-9a-f]{40}", inst.base_commit)
        assert inst.environment_setup_commit == inst.base_commit
        assert inst.fail_to_pass and inst.pass_to_pass
        assert all(TEST_ID.match(t) for t in inst.fail_to_pass + inst.pass_to_pass)
        assert not set(inst.fail_to_pass) & set(inst.pass_to_pass)
        assert set(repo_files(inst.instance_id)) == {f"{name}.py", f"tests/test_{name}.py"}
        # The official row round-trips (test lists JSON-encoded strings, as on the hub).
        row = json.loads(DATA_FILE.read_text().splitlines()[INSTANCES.index(inst)])
        assert SWEInstance.from_row(row) == inst and isinstance(row["FAIL_TO_PASS"], str)


def test_sizes_fit_a_tiny_context():
    printable = re.compile(r"^[\x20-\x7e\n]*$")
    for inst in INSTANCES:
        path, source = _module(inst)
        assert len(source) <= 600 and source.count("\n") <= 22, inst.instance_id
        assert len(inst.problem_statement) <= 250, inst.instance_id
        texts = [inst.problem_statement, inst.patch, inst.test_patch, *repo_files(inst.instance_id).values()]
        assert all(printable.match(t) for t in texts), inst.instance_id
        # The issue names a function or class of the module, as a user would.
        names = re.findall(r"^\s*(?:def|class) (\w+)", source, re.MULTILINE)
        assert any(n in inst.problem_statement for n in names), inst.instance_id


def test_patches_are_one_line_fixes_and_test_additions():
    for inst in INSTANCES:
        path, _ = _module(inst)
        body = [line for line in inst.patch.splitlines() if line[:3] not in ("---", "+++")]
        assert inst.patch.startswith(f"diff --git a/{path} b/{path}\n"), inst.instance_id
        assert sum(line.startswith("-") for line in body) == 1, inst.instance_id
        assert sum(line.startswith("+") for line in body) == 1, inst.instance_id
        test_file = inst.fail_to_pass[0].split("::")[0]
        assert inst.test_patch.startswith(f"diff --git a/{test_file} b/{test_file}\n")
        removed = [
            ln for ln in inst.test_patch.splitlines() if ln.startswith("-") and not ln.startswith("---")
        ]
        assert removed == []  # the test patch only adds tests
        for test in inst.fail_to_pass:
            assert f"+def {test.split('::')[1]}():" in inst.test_patch


def _git_commit_hash(files: dict[str, str]) -> str:
    """The base commit computed from git's object format by hand (independent of git itself)."""

    def obj(kind: str, data: bytes) -> bytes:
        return hashlib.sha1(f"{kind} {len(data)}\0".encode() + data).digest()

    def tree(entries: dict) -> bytes:
        rows = []
        for name, value in entries.items():
            if isinstance(value, dict):  # git sorts a directory as if its name ended in "/"
                rows.append((name + "/", b"40000 " + name.encode() + b"\0" + tree(value)))
            else:
                rows.append((name, b"100644 " + name.encode() + b"\0" + obj("blob", value.encode())))
        return obj("tree", b"".join(row for _, row in sorted(rows)))

    nested: dict = {}
    for path, text in files.items():
        *dirs, leaf = path.split("/")
        node = nested
        for d in dirs:
            node = node.setdefault(d, {})
        node[leaf] = text
    who = "swe-mini <swe-mini@example.invalid> 1704067200 +0000"  # 2024-01-01T00:00:00Z
    commit = f"tree {tree(nested).hex()}\nauthor {who}\ncommitter {who}\n\nswe-mini base\n"
    return obj("commit", commit.encode()).hex()


def test_base_commits_are_reproducible_anywhere():
    for inst in INSTANCES:
        assert _git_commit_hash(repo_files(inst.instance_id)) == inst.base_commit, inst.instance_id


def test_jsonl_is_up_to_date_with_sources():
    rows = asyncio.run(build.build_rows())
    assert build.to_jsonl(rows) == DATA_FILE.read_text(encoding="ascii")


def test_build_rejects_bad_sources():
    spec = build.parse_spec((build.SRC / "clamp.txt").stem, (build.SRC / "clamp.txt").read_text())
    assert build.check_spec(spec) == (
        "clamp.py",
        "tests/test_clamp.py",
        "        return lo",
        "        return hi",
    )
    bad = [
        {"issue": "x" * 201},
        {"fix": ("clamp.py", "-        return lo\n+        return hi\n+        pass\n")},
        {"fix": ("clamp.py", "-    return nothing\n+    return hi\n")},
        {"files": {**spec["files"], "clamp.py": spec["files"]["clamp.py"] + "# caf\xe9\n"}},
        {"files": {**spec["files"], "extra.py": "X = 1\n"}},
    ]
    for change in bad:
        with pytest.raises(build.SpecError):
            build.check_spec({**spec, **change})


def test_gold_resolves_and_empty_patch_does_not_for_every_instance():
    runtime = LocalRuntime()

    async def grade_all():
        limit = asyncio.Semaphore(8)  # 2 cores shared: bounded concurrency, still overlapping

        async def grade(inst, patch):
            async with limit:
                return await runtime.grade(inst, patch)

        jobs = [grade(i, p) for i in INSTANCES for p in (i.patch, "")]
        return await asyncio.gather(*jobs)

    grades = iter(asyncio.run(grade_all()))
    for inst in INSTANCES:
        gold, empty = next(grades), next(grades)
        assert gold.resolved and gold.applied, (inst.instance_id, gold.tests, gold.log)
        assert set(gold.tests.values()) == {"PASSED"}
        assert not empty.resolved, inst.instance_id
        # At base the PASS_TO_PASS tests pass and every FAIL_TO_PASS test fails.
        assert all(empty.tests[t] == "PASSED" for t in inst.pass_to_pass), (inst.instance_id, empty.tests)
        assert all(empty.tests[t] == "FAILED" for t in inst.fail_to_pass), (inst.instance_id, empty.tests)
