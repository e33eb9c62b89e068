"""The Docker runtime's swebench boundary on the REAL swebench 5 package, without a Docker daemon.

Fixtures (`tests/fixtures/swe_verified_v5/`, provenance in its README): two SWE-bench Verified
rows in the 5.x schema and a real harness test log. One test per swebench call the runtime and
`bench eval` make: `make_test_spec` (and the image it names), `record_test_exit_code` (the
`run_tests` script), `get_logs_eval` and `get_eval_report` (grading), the harness's
`GIT_APPLY_CMDS`, `load_swebench_dataset` (the instances file `bench eval` pins the harness to)
and `get_predictions_from_file` (the predictions file).
"""

import asyncio
import json
import types
from pathlib import Path

from tests.requires import requires

swebench = requires("swebench", minversion="5")

from swebench import types as swebench_types  # noqa: E402
from swebench.harness.grading import get_eval_report, get_logs_eval  # noqa: E402
from swebench.harness.utils import get_predictions_from_file, load_swebench_dataset  # noqa: E402
from swebench.image_builder.image_spec import make_image_spec  # noqa: E402

from bench.eval.swe import write_predictions_files  # noqa: E402
from benchmarks.swe_verified import write_instances  # noqa: E402
from envs.swe.docker_runtime import DockerRuntime  # noqa: E402
from envs.swe.instance import SWEInstance  # noqa: E402
from envs.swe.swebench_adapter import GIT_APPLY_CMDS, SwebenchHarness  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "swe_verified_v5"
ROWS = [json.loads(line) for line in (FIXTURES / "instances.jsonl").read_text().splitlines()]
LOG = (FIXTURES / "matplotlib__matplotlib-20676.test_output.txt").read_text()
ASTROPY, MATPLOTLIB = (SWEInstance.from_row(row) for row in ROWS)


def test_rows_keep_the_v5_columns_and_build_real_test_specs():
    harness = SwebenchHarness()
    for row, instance in zip(ROWS, (ASTROPY, MATPLOTLIB)):
        assert instance.to_record() == row  # every column survives the round trip
        assert harness.unsupported(instance) is None
        spec = harness.spec(instance)
        assert isinstance(spec, swebench_types.TestSpec) and spec.log_parser == row["log_parser"]
        assert spec.FAIL_TO_PASS == json.loads(row["FAIL_TO_PASS"])
        # the image is swebench's own name for the instance (namespace swebench, __ -> _1776_)
        assert harness.image(spec) == make_image_spec(row, "FROM scratch", namespace="swebench").name
        assert (
            harness.image(spec)
            == f"swebench/sweb.eval.x86_64.{row['instance_id'].replace('__', '_1776_')}:latest"
        )
        script = harness.eval_script(spec)
        assert script.startswith("#!/bin/bash\nset -uxo pipefail\n") and "git apply -v - <<'EOF_" in script
        assert 'echo ">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE"' in script  # 5.x records it


def test_rows_without_the_v5_columns_are_refused_by_name():
    old = {k: v for k, v in ROWS[0].items() if k not in ("image", "eval_script")}
    reason = SwebenchHarness().unsupported(SWEInstance.from_row(old))
    assert reason.startswith("astropy__astropy-12907 lacks the swebench 5 column(s) image, eval_script")
    assert "log parser 'nope'" in SwebenchHarness().unsupported(
        SWEInstance.from_row(dict(ROWS[0], log_parser="nope"))
    )


def test_run_tests_script_is_the_eval_script_without_the_test_patch():
    harness = SwebenchHarness()
    spec = harness.spec(MATPLOTLIB)
    ids = ["lib/matplotlib/tests/test_widgets.py::test_ellipse", "lib/matplotlib/tests/test_other.py::test_x"]
    script = harness.test_script(spec, ids)
    lines = script.splitlines()
    assert lines[:5] == [
        "#!/bin/bash",
        "set -uxo pipefail",
        "source /opt/miniconda3/bin/activate",
        "conda activate testbed",
        "cd /testbed",
    ]
    assert "python -m pip install -e ." in lines  # the eval script's reinstall step is kept
    assert "git apply" not in script and "EOF_" not in script and "git status" not in lines
    assert lines[-5:] == [
        ": '>>>>> Start Test Output'",
        "pytest -rA lib/matplotlib/tests/test_widgets.py lib/matplotlib/tests/test_other.py",
        "SWEBENCH_TEST_EXIT_CODE=$?",  # added by swebench's own record_test_exit_code
        ": '>>>>> End Test Output'",
        'echo ">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE"',
    ]


def test_a_real_log_is_graded_exactly_as_get_eval_report_grades_it(tmp_path):
    harness = SwebenchHarness()
    spec = harness.spec(MATPLOTLIB)
    (tmp_path / "test_output.txt").write_text(LOG)
    expected = get_eval_report(
        spec,
        {"instance_id": spec.instance_id, "model_patch": "", "model_name_or_path": "x"},
        str(tmp_path / "test_output.txt"),
        include_tests_status=True,
    )[spec.instance_id]
    assert harness.report(spec, "", LOG) == expected
    assert expected["resolved"] is False and expected["tests_status"]["FAIL_TO_PASS"]["failure"] == [
        "lib/matplotlib/tests/test_widgets.py::test_span_selector_bound[horizontal]",
        "lib/matplotlib/tests/test_widgets.py::test_span_selector_bound[vertical]",
    ]
    assert len(expected["tests_status"]["PASS_TO_PASS"]["success"]) == 32
    statuses, found = harness.parse(spec, LOG)
    assert found and (statuses, found) == get_logs_eval(spec, str(tmp_path / "test_output.txt"))
    assert statuses["lib/matplotlib/tests/test_widgets.py::test_rectangle_selector"] == "FAILED"


def test_grading_uses_swebench_rules_the_projects_own_rule_lacks():
    """A truncated parametrized id (676 in Verified) is prefix-matched; a forged all-PASSED log
    with a failing exit status is refused: both only in swebench's get_eval_report."""
    harness = SwebenchHarness()
    truncated = "lib/matplotlib/tests/test_widgets.py::test_range_slider[horiz"
    row = dict(ROWS[1], instance_id="matplotlib__matplotlib-20676-t", PASS_TO_PASS=json.dumps([truncated]))
    spec = harness.spec(SWEInstance.from_row(row))
    assert harness.report(spec, "", LOG)["tests_status"]["PASS_TO_PASS"]["success"] == [truncated]
    forged = "+ : '>>>>> Start Test Output'\nPASSED a.py::t\n+ : '>>>>> End Test Output'\n>>>>> Test Exit Code: 1\n"
    assert harness.report(spec, "", forged)["patch_successfully_applied"] is False


class _Container:
    """Answers the eval script with the real log (no Docker)."""

    name, labels = "c", {}

    def exec_run(self, cmd, workdir=None, user=None):
        output = LOG if cmd[-1] == "/eval.sh" else ""
        return types.SimpleNamespace(exit_code=0, output=output.encode())

    def put_archive(self, path, data):
        return True

    def remove(self, force=False):
        pass


def test_the_docker_runtime_grades_through_the_real_harness():
    client = types.SimpleNamespace(
        containers=types.SimpleNamespace(
            run=lambda **kwargs: _Container(), list=lambda all, filters, ignore_removed=False: []
        )
    )
    rt = DockerRuntime(client=client, harness=SwebenchHarness(), test_timeout=60)

    async def go():
        workspace = await rt.open(MATPLOTLIB)
        try:
            return await rt.evaluate(workspace, MATPLOTLIB)
        finally:
            await workspace.close()

    grade = asyncio.run(go())
    assert not grade.resolved and grade.applied and len(grade.tests) == 35
    assert (
        grade.tests_status["FAIL_TO_PASS"]["success"] == []
        and len(grade.tests_status["PASS_TO_PASS"]["success"]) == 32
    )


def test_patch_fallbacks_are_the_harness_own():
    from swebench.harness.run_evaluation import GIT_APPLY_CMDS as HARNESS_CMDS

    assert list(GIT_APPLY_CMDS) == list(HARNESS_CMDS)


def test_instances_and_predictions_files_pass_swebench_readers(tmp_path):
    instances = write_instances(tmp_path / "swe-verified.instances.jsonl", ROWS)
    loaded = load_swebench_dataset(str(instances), "test")
    assert [row["instance_id"] for row in loaded] == [r["instance_id"] for r in ROWS]
    harness = SwebenchHarness()
    assert [harness.image(harness.make_test_spec(row)) for row in loaded] == [r["image"] for r in ROWS]
    records = [
        {"problem_id": r["instance_id"], "sample_index": j, "extracted": "diff --git a/x b/x\n" if j else ""}
        for r in ROWS
        for j in (0, 1)
    ]
    paths = write_predictions_files(tmp_path, "swe-verified", records, "org/model")
    assert [p.name for p in paths] == [
        "swe-verified.predictions.s0.jsonl",
        "swe-verified.predictions.s1.jsonl",
    ]
    for path, patch in zip(paths, ("", "diff --git a/x b/x\n")):
        predictions = get_predictions_from_file(str(path), str(instances), "test")
        assert predictions == [
            {"instance_id": r["instance_id"], "model_name_or_path": "org/model", "model_patch": patch}
            for r in ROWS
        ]
