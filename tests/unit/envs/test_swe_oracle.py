"""The local SWE grader's oracle, on hand-written cases: how `envs.swe.oracle` rewrites test
files (what stays in the harness, what the sandboxed run gets), how `envs.swe.verdict` decides
from reported values, and the value encoding between `envs.swe.testchild` and the harness."""

from __future__ import annotations

import ast
import json
import marshal
import math
import types

import pytest

from envs.swe import oracle, synthetic, testchild, verdict
from envs.swe.checks import NOT_LITERAL, CheckKind, literal
from envs.swe.swe_mini import load_swe_mini, repo_files
from envs.swe.workspace_memory import apply_unified_diff

P = "tests/test_x.py"


def rw(source: str) -> oracle.RewrittenFile:
    return oracle.rewrite(source.encode(), P, "/repo/" + P)


def constants(code: types.CodeType) -> list:
    """Every constant of a code object and of the code objects inside it."""
    found = []
    for const in code.co_consts:
        found += constants(const) if isinstance(const, types.CodeType) else [const]
    return found


def names(code: types.CodeType) -> set:
    found = set(code.co_names) | set(code.co_varnames)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= names(const)
    return found


SECRET = 'from roman import to_roman\n\n\ndef test_four():\n    """to_roman(4) is \'IV-SECRET\'"""\n'
SECRET += "    assert to_roman(4) == 'IV-SECRET', 'expected IV-SECRET'  # IV-SECRET\n"
SECRET += "    assert 12345678 == to_roman(5)\n    assert not to_roman(6) in {'VI-SECRET', 987654}\n"


def test_the_expected_sides_never_reach_the_run():
    rewritten = rw(SECRET)
    code = marshal.loads(rewritten.code)
    text = repr(constants(code))
    for secret in ("IV-SECRET", "12345678", "VI-SECRET", "987654", "is 'IV", "expected"):
        assert secret not in text
    assert "to_roman" in names(code) and oracle.CHECK in names(code)
    checks = rewritten.tests["test_four"].checks
    assert [c.values for c in checks] == [1, 1, 1] and rewritten.tests["test_four"].unsealed == ""
    assert [ast.unparse(c.predicate) for c in checks] == [
        "v0 == 'IV-SECRET'",
        "12345678 == v0",
        "not v0 in {'VI-SECRET', 987654}",
    ]


@pytest.mark.parametrize(
    "assertion, predicates, values",
    [
        ("assert f(1) == 2", ["v0 == 2"], [1]),
        ("assert f(1)", ["v0"], [1]),
        ("assert not f(1)", ["not v0"], [1]),
        ("assert f(1) == 2 and g(3) < 4", ["v0 == 2", "v0 < 4"], [1, 1]),
        ("assert f(1) == 2 or g(3)", ["v0 == 2 or v1"], [2]),
        ("assert 0 < f(1) <= 10", ["0 < v0 <= 10"], [1]),
        ("assert f(1) is None", ["v0 is None"], [1]),
        ("assert f(1) is g(2)", ["v0"], [1]),  # identity of two computed values: the run's answer
        ("assert f(1) == -1", ["v0 == -1"], [1]),
        ("assert f(1) == (1, [2, {3: 'a'}])", ["v0 == (1, [2, {3: 'a'}])"], [1]),
        ("assert f(1) == g(2)", ["v0 == v1"], [2]),
        ("assert f(1) == [1] * 3", ["v0 == v1"], [2]),  # not a literal: computed by the run
    ],
)
def test_assertions_become_checks(assertion, predicates, values):
    sealed = rw(f"def test_a():\n    {assertion}\n").tests["test_a"]
    assert [ast.unparse(c.predicate) for c in sealed.checks] == predicates
    assert [c.values for c in sealed.checks] == values and sealed.unsealed == ""


EXPECTED_RAISES = {
    "try/except/return + assert False": (
        "    try:\n        f()\n    except ValueError:\n        return\n    assert False, 'should raise'\n",
        ("ValueError",),
    ),
    "try/except/pass + else fail": (
        "    try:\n        f()\n    except (KeyError, m.Err):\n        pass\n    else:\n        raise AssertionError\n",
        ("KeyError", "Err"),
    ),
    "try: ...; assert False / except: pass": (
        "    try:\n        f()\n        assert False\n    except ValueError:\n        pass\n",
        ("ValueError",),
    ),
    "pytest.raises": ("    with pytest.raises(ZeroDivisionError):\n        f()\n", ("ZeroDivisionError",)),
}


@pytest.mark.parametrize("name", list(EXPECTED_RAISES))
def test_expected_exceptions_become_raised_checks(name):
    body, raises = EXPECTED_RAISES[name]
    rewritten = rw(f"import pytest\n\n\ndef test_a():\n{body}")
    sealed = rewritten.tests["test_a"]
    assert [(c.kind, c.raises) for c in sealed.checks] == [
        (CheckKind.RAISED, raises)
    ] and sealed.unsealed == ""
    assert "pytest" not in names(marshal.loads(rewritten.code))  # the import went with its use


UNSEALED = {
    "assert in a loop": ("def test_a():\n    for x in [1]:\n        assert f(x) == 1\n", "a assert"),
    "assert in an if": ("def test_a():\n    if f(1):\n        assert g() == 1\n", "a assert"),
    "raise in the body": ("def test_a():\n    assert f() == 1\n    raise ValueError\n", "a raise"),
    "return before a check": (
        "def test_a():\n    if f():\n        return\n    assert g() == 1\n",
        "a return",
    ),
    "no assertion": ("def test_a():\n    f()\n", "no assertion"),
    "helper asserts": (
        "def check(x):\n    assert x == 1\n\n\ndef test_a():\n    check(f())\n    assert g() == 1\n",
        "helpers",
    ),
    "module-level raise": (
        "if False:\n    raise ValueError\n\n\ndef test_a():\n    assert f() == 1\n",
        "helpers",
    ),
    "decorated": (
        "import functools\n\n\n@functools.lru_cache\ndef test_a():\n    assert f() == 1\n",
        "decorated",
    ),
    "async": ("async def test_a():\n    assert f() == 1\n", "async"),
    "walrus": ("def test_a():\n    assert (y := f()) == 1\n", "assignment expression"),
    "unittest assert": ("def test_a():\n    self.assertEqual(f(), 1)\n    assert True\n", "self.assertEqual"),
    "pytest.approx": (
        "import pytest\n\n\ndef test_a():\n    assert f() == pytest.approx(1)\n",
        "pytest.approx",
    ),
    "raises with match": (
        "import pytest\n\n\ndef test_a():\n    with pytest.raises(ValueError, match='x'):\n        f()\n",
        "pytest.raises",
    ),
    "yield": ("def test_a():\n    assert f() == 1\n    yield 2\n", "a yield"),
}


@pytest.mark.parametrize("name", list(UNSEALED))
def test_forms_whose_verdict_the_run_would_give_are_unsealed(name):
    source, why = UNSEALED[name]
    assert why in rw(source).tests["test_a"].unsealed


def test_unparseable_and_oversized_files_are_errors():
    assert "SyntaxError" in rw("def test_a(:\n    pass\n").error
    assert "larger than" in oracle.rewrite(b"#" * (oracle.MAX_SOURCE_BYTES + 1), P, P).error


def test_every_swe_mini_test_and_a_sample_of_swe_synth_is_sealed():
    seen = 0
    for inst in load_swe_mini():
        files = apply_unified_diff(repo_files(inst.instance_id), inst.test_patch)
        for test_id in (*inst.fail_to_pass, *inst.pass_to_pass):
            path, name = test_id.split("::", 1)
            sealed = oracle.rewrite(files[path].encode(), path, path).tests[name]
            assert sealed.unsealed == "" and sealed.checks, (test_id, sealed.unsealed)
            seen += 1
    for i in range(200):
        bug = synthetic.bug_for_id(synthetic.generated_id("eval0", i))
        for test_id in (*bug.instance.fail_to_pass, *bug.instance.pass_to_pass):
            path, name = test_id.split("::", 1)
            sealed = oracle.rewrite(bug.files[path].encode(), path, path).tests[name]
            assert sealed.unsealed == "" and sealed.checks, (test_id, sealed.unsealed)
    assert seen == sum(len(i.fail_to_pass) + len(i.pass_to_pass) for i in load_swe_mini()) == 88


# ---- the verdict --------------------------------------------------------------------------------
TID = f"{P}::test_a"


def line(*event) -> str:
    return verdict.MARK + json.dumps(event)


def judge(source: str, *events, cut: str = "") -> tuple[str, str, dict]:
    files = {P: rw(source)}
    outcomes, details, tamper = verdict.judge("\n".join(line(*e) for e in events), files, [TID], cut)
    return outcomes[TID], details[TID], tamper


TWO = "def test_a():\n    assert f(1) == 2\n    assert not g()\n"


@pytest.mark.parametrize(
    "events, outcome, detail",
    [
        ([("S", TID), ("V", TID, 0, [2]), ("V", TID, 1, [0]), ("E", TID, "returned", "")], "PASSED", ""),
        ([("S", TID), ("V", TID, 0, [2.0]), ("V", TID, 1, [[]]), ("E", TID, "returned", "")], "PASSED", ""),
        (
            [("S", TID), ("V", TID, 0, [3]), ("V", TID, 1, [0]), ("E", TID, "returned", "")],
            "FAILED",
            "(got 3)",
        ),
        (
            [("S", TID), ("V", TID, 0, [2]), ("V", TID, 1, [1]), ("E", TID, "returned", "")],
            "FAILED",
            "(got 1)",
        ),
        ([("S", TID), ("V", TID, 0, [2]), ("E", TID, "returned", "")], "FAILED", "not reached"),
        ([("S", TID), ("E", TID, "returned", "")], "FAILED", "not reached"),  # a forged end alone
        ([("S", TID), ("V", TID, 0, [2]), ("V", TID, 1, [0]), ("E", TID, "skipped", "")], "FAILED", "skip"),
        ([("S", TID), ("V", TID, 0, [2]), ("V", TID, 1, [0])], "FAILED", "did not finish"),
        ([], "ERROR", "did not run"),
        (
            [
                ("S", TID),
                ("V", TID, 0, [{"r": "KeyError: 'x'"}]),
                ("V", TID, 1, [0]),
                ("E", TID, "returned", ""),
            ],
            "FAILED",
            "KeyError",
        ),
        (
            [("S", TID), ("V", TID, 0, [{"o": "Anything"}]), ("V", TID, 1, [0]), ("E", TID, "returned", "")],
            "FAILED",
            "<Anything object>",
        ),
        (
            [("S", TID), ("V", TID, 0, [2, 2]), ("V", TID, 1, [0]), ("E", TID, "returned", "")],
            "FAILED",
            "2 values for 1",
        ),
    ],
)
def test_a_sealed_test_passes_only_on_the_right_values(events, outcome, detail):
    got, why, _ = judge(TWO, *events)
    assert got == outcome and detail in why, why


@pytest.mark.parametrize(
    "extra, tamper",
    [
        (("V", TID, 0, [5]), "reported twice"),  # a second guess for a check
        (("V", TID, 7, [2]), "does not have"),
        (("X", TID, 0, None), "does not have"),  # the wrong kind of report
        (("S", TID), "out of order"),
    ],
)
def test_conflicting_reports_fail_the_test_and_count_as_tampering(extra, tamper):
    good = [("S", TID), ("V", TID, 0, [2]), ("V", TID, 1, [0])]
    got, why, found = judge(TWO, *good, extra, ("E", TID, "returned", ""))
    assert got == "FAILED" and tamper in why and tamper in found[TID]


def test_a_report_about_a_test_not_asked_for_fails_every_test():
    good = [("S", TID), ("V", TID, 0, [2]), ("V", TID, 1, [0]), ("E", TID, "returned", "")]
    got, why, found = judge(TWO, *good, ("E", "tests/test_x.py::test_zz", "returned", ""))
    assert got == "FAILED" and "not asked for" in found[TID]
    got, _, found = judge(TWO, *good)
    assert got == "PASSED" and not found


@pytest.mark.parametrize(
    "report, passed",
    [
        (["ValueError", "ValueError"], True),
        (["InsufficientFunds", "ValueError"], True),  # a subclass defined by the code: its built-in base
        (["UnicodeDecodeError", "UnicodeDecodeError"], True),  # a built-in subclass
        (["KeyError", "KeyError"], False),
        (["ValueError", "KeyError"], False),  # a built-in name must be its own built-in base
        (["ValueError", "Exception"], False),
        (["X", "NotABuiltin"], False),
        (None, False),
        (["ValueError"], False),
    ],
)
def test_expected_exception_checks(report, passed):
    source = (
        "def test_a():\n    try:\n        f()\n    except ValueError:\n        return\n    assert False\n"
    )
    got, _, _ = judge(source, ("S", TID), ("X", TID, 0, report), ("E", TID, "returned", ""))
    assert got == ("PASSED" if passed else "FAILED")


def test_unsealed_tests_take_the_runs_word_and_say_so():
    source = "def test_a():\n    for x in [1]:\n        assert f(x) == 1\n"
    got, why, _ = judge(source, ("S", TID), ("E", TID, "returned", ""))
    assert got == "PASSED" and "as the sandboxed run reported it" in why
    got, _, _ = judge(source, ("S", TID), ("E", TID, "skipped", ""))
    assert got == "SKIPPED"


# ---- values between the run and the harness --------------------------------------------------------
ROUND_TRIP = [
    None,
    True,
    0,
    -(10**40),
    1.5,
    "é\ud800",
    b"\x00\xff",
    (1, (2,)),
    [1, [2, [3]]],
    {1: "a", (2, 3): [4]},
    {1, 2},
    frozenset({"a"}),
    complex(1, -2),
    math.inf,
    -math.inf,
]


@pytest.mark.parametrize("value", ROUND_TRIP, ids=repr)
def test_values_round_trip_as_plain_data(value):
    data = json.loads(json.dumps(testchild.encode(value, [1000])))
    decoded = verdict.decode(data)
    assert decoded == value and type(decoded) is type(value)


def test_values_of_other_types_are_opaque_and_equal_to_nothing():
    class Sneaky(int):
        def __eq__(self, other):
            return True

    for value in (Sneaky(3), object(), [Sneaky(1)], {"k": Sneaky(2)}):
        decoded = verdict.decode(json.loads(json.dumps(testchild.encode(value, [1000]))))
        assert decoded != 3 and decoded != [1] and decoded != {"k": 2}
    nan = verdict.decode(json.loads(json.dumps(testchild.encode(math.nan, [1000]))))
    assert math.isnan(nan)
    cycle: list = []
    cycle.append(cycle)
    assert verdict.decode(json.loads(json.dumps(testchild.encode(cycle, [1000])))) != [[]]


@pytest.mark.parametrize(
    "data", [{"t": 1}, {"zz": []}, {"s": [[1]]}, {"a": 1, "b": 2}, {"d": [[1]]}, {"x": "1"}]
)
def test_malformed_values_are_refused(data):
    with pytest.raises((ValueError, TypeError)):
        verdict.decode(data)


def boolean_only(source: str, path: str, names: list[str]) -> bool:
    """Whether every check of the tests `names` expects a boolean (truthiness, `== True`, `is
    None`...): the expectations an inverted report gets right when the honest value is wrong."""
    rewritten = oracle.rewrite(source.encode(), path, path)
    for name in names:
        for check in rewritten.tests[name].checks:
            if check.kind is CheckKind.VALUES:
                nodes = [
                    n
                    for n in ast.walk(check.predicate)
                    if n is not check.predicate and not isinstance(n, ast.Name)
                ]
                values = [v for v in map(literal, nodes) if v is not NOT_LITERAL]
                if any(type(v) is not bool and v is not None for v in values):
                    return False
    return True


def test_how_many_instances_expect_only_booleans_of_their_failing_tests():
    # the residual the threat model names: counted here so that its sentence stays true
    mini = []
    for inst in load_swe_mini():
        files = apply_unified_diff(repo_files(inst.instance_id), inst.test_patch)
        path = inst.fail_to_pass[0].split("::")[0]
        if boolean_only(files[path], path, [t.split("::")[1] for t in inst.fail_to_pass]):
            mini.append(inst.instance_id)
    assert mini == ["swe-mini__overlap-1", "swe-mini__palindrome-1"]
    synth = 0
    for i in range(100):
        bug = synthetic.bug_for_id(synthetic.generated_id("eval0", i))
        path = bug.instance.fail_to_pass[0].split("::")[0]
        synth += boolean_only(bug.files[path], path, [t.split("::")[1] for t in bug.instance.fail_to_pass])
    assert synth == 22
