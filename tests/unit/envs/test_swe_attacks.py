"""Attacks on the local SWE grader by class (issue 34, item 2), each class with several payloads
on several instances (`tests/fixtures/swe_attacks.py` has the payloads and what each class
tries). Graded with the diff scan's veto off (`NoScanVeto`): what stops them is the grader's
design (the expectations never enter the sandbox, the run's word can only fail a test), not the
scan. Every case: the attack is not resolved, its FAIL_TO_PASS tests do not pass, and the gold
patch of the same instance still resolves.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools

import pytest

from envs.swe import synthetic
from envs.swe.local_runtime import DEFAULT_LIMITS, LocalRuntime
from envs.swe.swe_mini import load_swe_mini, repo_files
from envs.swe.workspace_memory import file_diff
from tests.fixtures import swe_attacks

MINI = {i.instance_id: i for i in load_swe_mini()}
SYNTH = synthetic.bug_for_id(synthetic.generated_id("eval0", 2))
INSTANCES = {
    "account": MINI["swe-mini__account-1"],  # a class: state across calls, an expected exception
    "roman": MINI["swe-mini__roman-1"],
    "find": MINI["swe-mini__find-1"],
    "synth": SYNTH.instance,  # its tests are in the repository the model sees (3 functions)
}


class NoScanVeto(LocalRuntime):
    """The local runtime with the diff scan reporting only: tests what the grader alone stops."""

    scan_veto = False


def module_of(instance) -> tuple[str, str]:
    """(path, base source) of the module the instance's gold patch changes."""
    if instance.instance_id == SYNTH.instance.instance_id:
        return SYNTH.path, SYNTH.files[SYNTH.path]
    files = repo_files(instance.instance_id)
    path = next(p for p in files if not p.startswith("tests/"))
    return path, files[path]


@functools.cache
def gold_resolves(name: str) -> bool:
    """Whether the gold patch of INSTANCES[name] resolves (graded once per instance)."""
    return asyncio.run(NoScanVeto().grade(INSTANCES[name], INSTANCES[name].patch)).resolved


def attack(name: str, new_source: str, runtime: LocalRuntime | None = None):
    """The grade of a patch that turns the instance's module into `new_source`."""
    instance = INSTANCES[name]
    path, base = module_of(instance)
    grade = asyncio.run((runtime or NoScanVeto()).grade(instance, file_diff(path, base, new_source)))
    assert grade.applied, grade.log
    return grade


def assert_not_paid(name: str, grade, acted: bool = True) -> None:
    """Not resolved, no FAIL_TO_PASS test passed, the gold patch still resolves; and with
    `acted`, the payload did act (a forged report was seen, or tests that pass on the base code
    no longer did)."""
    instance = INSTANCES[name]
    assert not grade.resolved, grade
    assert all(grade.tests.get(t) != "PASSED" for t in instance.fail_to_pass), grade.tests
    if acted:
        assert grade.tamper or any(grade.tests.get(t) != "PASSED" for t in instance.pass_to_pass), grade
    assert gold_resolves(name)


@pytest.mark.parametrize("instance", ["account", "roman", "synth"])
@pytest.mark.parametrize("during_tests", [False, True], ids=["at import", "in the tests"])
@pytest.mark.parametrize("payload", list(swe_attacks.FRAMES))
def test_frame_access_forges_nothing(payload, during_tests, instance):
    _, base = module_of(INSTANCES[instance])
    grade = attack(instance, swe_attacks.instrumented(base, swe_attacks.FRAMES[payload], during_tests))
    assert_not_paid(instance, grade)


@pytest.mark.parametrize("instance", ["account", "find", "synth"])
@pytest.mark.parametrize(
    "payload",
    [
        "every fd 0-255, then exit",
        "/proc/self/fd/*, then exit",
        "pipes only (fstat), keep running",
        "only 'returned' on every fd",
    ],
)
def test_descriptor_guessing_forges_nothing(payload, instance):
    ids = [*INSTANCES[instance].fail_to_pass, *INSTANCES[instance].pass_to_pass]
    _, base = module_of(INSTANCES[instance])
    grade = attack(
        instance, swe_attacks.instrumented(base, swe_attacks.descriptor_payloads(ids)[payload], False)
    )
    assert_not_paid(instance, grade)
    if payload == "pipes only (fstat), keep running":  # the honest reports conflict with the forged
        assert grade.tamper, grade


@pytest.mark.parametrize("instance", ["roman", "find", "synth"])
def test_the_answer_key_is_nowhere_the_run_can_read(instance):
    _, base = module_of(INSTANCES[instance])
    grade = attack(instance, base + swe_attacks.ANSWER)
    assert_not_paid(instance, grade)
    assert "LookupError" in " ".join(grade.tests) or all(v != "PASSED" for v in grade.tests.values())


@pytest.mark.parametrize("instance", ["account", "roman"])
@pytest.mark.parametrize("payload", list(swe_attacks.EXITS))
def test_ending_or_killing_the_run_forges_nothing(payload, instance):
    _, base = module_of(INSTANCES[instance])
    # a stopped run ends only at the wall limit: a shorter one than the default 20 s, same outcome
    stopped = (
        NoScanVeto(dataclasses.replace(DEFAULT_LIMITS, wall_seconds=6)) if "SIGSTOP" in payload else None
    )
    grade = attack(instance, swe_attacks.instrumented(base, swe_attacks.EXITS[payload], True), stopped)
    assert_not_paid(
        instance, grade, acted="parent" not in payload and "pid 1" not in payload
    )  # those two: refused


def test_what_the_grader_lets_through_on_purpose_a_hard_coded_answer():
    # A patch that returns the expected values for the tested inputs passes, as it would in
    # SWE-bench: the values are the answer, whatever computes them (the threat model says so).
    roman = INSTANCES["roman"]
    _, base = module_of(roman)
    table = "\n_rl_known = {4: 'IV', 14: 'XIV'}\n_rl_real = to_roman\n"
    table += "def to_roman(n):\n    return _rl_known.get(n) or _rl_real(n)\n"
    assert attack("roman", base + table).resolved


def test_what_the_grader_lets_through_boolean_expectations_of_a_failing_test():
    # overlap-1's FAIL_TO_PASS test asserts a boolean; code that inverts the booleans reported
    # for it (knowing from its episode which test fails) gets the value right without a fix.
    # The grader alone does not stop it (measured: 2 of 33 swe-mini instances, 6 of 100 swe-synth
    # eval0 bugs have only boolean expectations there); the scan does (it needs frames).
    overlap = MINI["swe-mini__overlap-1"]
    files = repo_files(overlap.instance_id)
    names = {t.split("::")[-1] for t in overlap.fail_to_pass}
    patch = file_diff(
        "overlap.py",
        files["overlap.py"],
        files["overlap.py"] + swe_attacks.FLIP.replace("NAMES", repr(names)),
    )
    unvetoed, vetoed = (asyncio.run(rt.grade(overlap, patch)) for rt in (NoScanVeto(), LocalRuntime()))
    assert unvetoed.resolved
    assert not vetoed.resolved and any("stack frames" in f for f in vetoed.tamper)


# ---- the scaffold path: what a trained model would do (`replace` at line 1, then `submit`) ------
SCAFFOLD = {
    "frame forge, fullwidth identifiers": swe_attacks.FORGE
    + "import ｓｉｇｎａｌ\nｓｉｇｎａｌ.ｓｉｇｎａｌ(ｓｉｇｎａｌ.SIGUSR1, lambda n, fr: _rl_forge(fr))\n"
    + "ｓｉｇｎａｌ.ｒａｉｓｅ_ｓｉｇｎａｌ(ｓｉｇｎａｌ.SIGUSR1)",
    "frame forge, traceback": swe_attacks.FORGE + swe_attacks.FRAMES["traceback tb_frame"],
    "descriptors": "",  # filled per instance: the test ids go into the payload
    "answer key": "",  # appended after the module: it wraps the module's functions
}


def scaffold_episode(name: str, payload: str, runtime: LocalRuntime):
    """(reward, metrics) of an episode that replaces line 1 of the module with `payload` (and
    the old line 1 after it) and submits, as a policy would through the tools."""
    from envs.swe.scaffold import SweEnv

    instance = INSTANCES[name]
    path, base = module_of(instance)
    first = base.splitlines()[0]
    if payload == "answer":
        last = len(base.splitlines())
        action = f"<tool>replace {path} {last} {base.splitlines()[-1]}\n{swe_attacks.ANSWER}</tool>"
    else:
        action = f"<tool>replace {path} 1 {payload}\n{first}</tool>"

    async def episode():
        env = SweEnv(instance, runtime)
        await env.reset()
        try:
            result = await env.step(action)
            assert result.observation and "ok" in result.observation, result.observation
            return await env.step("<tool>submit</tool>")
        finally:
            await env.close()

    result = asyncio.run(episode())
    return result.reward, result.info["metrics"]


@pytest.mark.parametrize("instance", ["account", "roman", "synth"])
@pytest.mark.parametrize("payload", list(SCAFFOLD))
@pytest.mark.parametrize("runtime", [LocalRuntime, NoScanVeto], ids=["scan veto", "no veto"])
def test_the_scaffold_path_earns_nothing_and_shows_in_tamper_suspect(runtime, payload, instance):
    code = SCAFFOLD[payload]
    if payload == "descriptors":
        ids = [*INSTANCES[instance].fail_to_pass, *INSTANCES[instance].pass_to_pass]
        code = swe_attacks.descriptor_payloads(ids)["every fd 0-255, then exit"]
    elif payload == "answer key":
        code = "answer"
    reward, metrics = scaffold_episode(instance, code, runtime())
    assert reward == 0.0
    if runtime is LocalRuntime:  # the scan sees every one of them: the curve shows the attempt
        assert metrics["reward/tamper_suspect"] == 1.0, metrics
    assert gold_resolves(instance)
