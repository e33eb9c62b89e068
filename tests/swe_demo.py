"""The demo SWE-bench instance shared by the SWE unit tests (scaffold, local and Docker
runtimes): repository `demo/calc`, whose `add` has a one-line bug."""

from __future__ import annotations

from envs.swe.instance import SWEInstance

DEMO_ID = "demo__calc-1"  # SWE-bench style `owner__repo-number`, as Docker image names expect


def demo_instance(patch: str, **overrides) -> SWEInstance:
    """A demo instance whose gold patch is `patch`; `overrides` replace any field."""
    fields = dict(
        instance_id=DEMO_ID,
        repo="demo/calc",
        base_commit="b" * 40,
        problem_statement="add(2, 3) returns -1; it should return 5.",
        patch=patch,
        test_patch="",
        fail_to_pass=("tests/test_calc.py::test_add",),
        pass_to_pass=("tests/test_calc.py::test_neg",),
        version="1.0",
        environment_setup_commit="b" * 40,
    )
    return SWEInstance(**{**fields, **overrides})
