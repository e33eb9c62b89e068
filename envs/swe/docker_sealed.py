"""A second opinion inside the container: the local grader's sealed tests, run where the log
parser's verdict can be forged.

swebench's rule reads a log the code under test writes into (`envs.swe`'s threat model: it can
print the result lines the parser believes, or read the expected values from the test files on
disk). So when that rule resolves a patch, the Docker runtime grades it once more, in a fresh
container of the same image, the way the local runtime grades (`envs.swe.oracle`,
`envs.swe.testchild`, `envs.swe.verdict`): the model patch applied, protected files reset, the
test patch applied, all by git before any code of the repository runs; the test files read
then, rewritten here (the expected values stay in this process), and every test module deleted
from the container; the patch files removed; then `testchild` runs the rewritten modules with
the container's Python and reports values, which `verdict.judge` checks here. The patch is
resolved only if both agree.

It applies where every FAIL_TO_PASS and PASS_TO_PASS test is sealed (a plain test function or
method whose assertions the oracle keeps: swe-mini's, not most of real SWE-bench's, which use
fixtures and parametrized ids) and the container's `python3` reads this interpreter's code
objects (same bytecode magic number). Elsewhere `sealed_grade` says why it does not apply and
swebench's rule stands alone. Inside the container, unlike the local sandbox, the run sees the
repository's git objects: the base versions of the test files (whose PASS_TO_PASS expectations
pass at the base anyway), never the test patch.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.swe import oracle, testchild, verdict
from envs.swe.checks import RewrittenFile
from envs.swe.grading import is_test_module
from envs.swe.instance import SWEInstance, harness_tests_status, is_resolved

PER_TEST_SECONDS = 10.0
"""Wall time of one test in the sealed run (its timer is in the run; the whole run also has the
runtime's `test_timeout`)."""
_CHILD, _REQUEST = "/tmp/rlbench_testchild.py", "/tmp/rlbench_request.json"
_MAGIC = "import importlib.util; print(importlib.util.MAGIC_NUMBER.hex())"


@dataclass
class Sealed:
    """The sealed run's verdict: `resolved` None when it does not apply (`why` says why)."""

    resolved: bool | None
    why: str = ""
    outcomes: dict[str, str] = field(default_factory=dict)
    tamper: list[str] = field(default_factory=list)


def _unsealed(ids: list[str], files: dict[str, RewrittenFile]) -> str:
    """Why the sealed run cannot decide every test of `ids` ("" when it can)."""
    for test_id in ids:
        path, _, name = test_id.partition("::")
        rewritten = files[path]
        if rewritten.error:
            return f"{path}: {rewritten.error}"
        if name not in rewritten.tests:
            return f"{test_id} is not a plain test function of {path}"
        if rewritten.tests[name].unsealed:
            return f"{test_id} is not sealed: {rewritten.tests[name].unsealed}"
    return ""


async def _prepare(runtime: Any, workspace: Any, instance: SWEInstance, patch: str) -> str:
    """Model patch, reset, test patch, all by git; "" or what failed."""
    if patch.strip() and (await workspace.apply_patch(patch)).returncode != 0:
        return "the model patch did not apply"
    await runtime.reset_protected(workspace, instance, patch)
    if instance.test_patch.strip() and (await workspace.apply_patch(instance.test_patch)).returncode != 0:
        return "the test patch did not apply"
    await workspace.exec("rm", "-f", "/tmp/patch.diff")
    return ""


async def _rewritten(workspace: Any, ids: list[str]) -> dict[str, RewrittenFile]:
    """Each test file of `ids`, read before any code ran and rewritten here (`oracle.rewrite`)."""
    files = {}
    for path in dict.fromkeys(t.partition("::")[0] for t in ids):
        code, source = await workspace.exec_bytes("cat", "--", path)
        files[path] = (
            oracle.rewrite(source, path, f"/testbed/{path}")
            if code == 0
            else RewrittenFile(path, error=f"import failed: cannot read {path}")
        )
    return files


async def _run(
    workspace: Any, files: dict[str, RewrittenFile], ids: list[str], timeout: int
) -> tuple[str, str]:
    """(the run's output, what cut it or "") of `testchild` on the rewritten modules, after every
    test module is gone from the working copy."""
    listed = await workspace.exec("git", "ls-files", "-z", "--cached", "--others")
    modules = sorted(p for p in set(listed.output.split("\0")) if p and is_test_module(p))
    if modules:
        await workspace.exec("rm", "-f", "--", *modules)
    tests = {path: [[t, t.partition("::")[2]] for t in ids if t.partition("::")[0] == path] for path in files}
    request = {
        "per_test_seconds": PER_TEST_SECONDS,
        "files": [{"path": p, "code": files[p].code.hex(), "tests": tests[p]} for p in files],
    }
    await workspace.put(_CHILD, Path(testchild.__file__).read_bytes())
    await workspace.put(_REQUEST, json.dumps(request).encode())
    # -I: no PYTHON* variables, user site or script directory; the image's own site-packages
    # (its editable install) stay, and the files Python runs unasked were reset by grading
    command = f"exec python3 -I -B {_CHILD} < {_REQUEST}"
    result = await workspace.exec("/bin/bash", "-c", command, timeout=timeout)
    cut = "timed out" if result.timed_out else (f"exit code {result.returncode}" if result.returncode else "")
    return result.output, cut


async def sealed_grade(runtime: Any, instance: SWEInstance, patch: str) -> Sealed:
    """The sealed tests' verdict on `patch` in a fresh container of `runtime` (module docstring)."""
    ids = list(dict.fromkeys([*instance.fail_to_pass, *instance.pass_to_pass]))
    workspace = await runtime.open(instance)
    try:
        failed = await _prepare(runtime, workspace, instance, patch)
        if failed:
            return Sealed(None, failed)
        files = await _rewritten(workspace, ids)
        why = _unsealed(ids, files)
        if why:
            return Sealed(None, why)
        code, magic = await workspace.exec_bytes("python3", "-c", _MAGIC)
        if code != 0 or magic.decode(errors="replace").strip() != importlib.util.MAGIC_NUMBER.hex():
            return Sealed(None, "the container's python3 cannot read this interpreter's code objects")
        output, cut = await _run(workspace, files, ids, runtime.test_timeout)
        outcomes, details, tamper = verdict.judge(output, files, ids, cut)
        status = harness_tests_status(outcomes, instance.fail_to_pass, instance.pass_to_pass)
        failures = [f"{t}: {details.get(t, outcomes[t])}" for t in ids if outcomes[t] != "PASSED"]
        why = "; ".join(failures)[:1000] or "every test passed"
        return Sealed(is_resolved(status), why, outcomes, [f"{t}: {w}" for t, w in tamper.items()])
    finally:
        await workspace.close()
