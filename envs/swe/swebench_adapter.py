"""The parts of the `swebench` package (5.x) the Docker runtime uses, behind one small class.

swebench 5 runs an instance from the dataset's own columns (`envs.swe.instance.SWE_V5_COLUMNS`):
`make_test_spec(row)` (`swebench.harness.utils`) turns a row into a `TestSpec` whose `image` is
the prebuilt per-instance image and whose `eval_script` is the row's script with the test
command's exit status recorded after the end marker; `get_logs_eval` parses a log with the
row's `log_parser`; `get_eval_report` grades it (truncated parametrized ids of Verified
prefix-matched, `eval_type` honoured, a forged all-PASSED log with a failing exit status
refused). `SwebenchHarness` calls exactly these, so an episode is graded by swebench's own rule,
not by a copy of it. Imported lazily: only the Docker runtime needs swebench.

swebench 4.x (`swebench.harness.test_spec`, `MAP_REPO_VERSION_TO_SPECS`) is not supported: the
`swe` extra pins `swebench>=5,<6`.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from envs.swe.instance import SWEInstance

GIT_APPLY_CMDS = (
    "git apply --verbose",
    "git apply --verbose --3way",
    "git apply --verbose --reject",
    "patch --batch --forward --fuzz=5 -p1 -i",
)
"""swebench 5's patch-application fallbacks (`swebench.harness.run_evaluation.GIT_APPLY_CMDS`),
tried in order with the working tree reset between attempts (`RESET_BETWEEN_ATTEMPTS`)."""
RESET_BETWEEN_ATTEMPTS = "git checkout -- . ; git clean -fd"
"""What the 5.x harness runs before each fallback: a failed `--reject` leaves partial state."""
ALREADY_APPLIED_CHECK = "git apply --check --reverse"
"""When every fallback failed: a patch that reverses cleanly was applied after all."""
PREDICTION_MODEL = "rl-bench"
"""`model_name_or_path` of the prediction an episode's grade is computed for."""
_TEST_PATCH_BLOCK = re.compile(r"^(git checkout [0-9a-f]{7,40} |git apply|rm -f )")
_INFORMATIONAL = ("git status", "git show", "git -c core.fileMode=false diff", "git diff")


class SwebenchHarness:
    """swebench 5's `make_test_spec`, `get_logs_eval` and `get_eval_report` for the Docker runtime.

    Tests of the Docker boundary substitute an object with the same methods; the tests in
    `tests/unit/envs/test_swebench_real.py` run this class on the real package.
    """

    def __init__(self) -> None:
        """ImportError when swebench 5 is not installed (swebench 4 lacks `harness.utils.make_test_spec`)."""
        from swebench.harness import constants
        from swebench.harness.grading import get_eval_report, get_logs_eval
        from swebench.harness.log_parsers import PARSER_REGISTRY
        from swebench.harness.utils import make_test_spec, record_test_exit_code

        self.constants, self.parsers = constants, PARSER_REGISTRY
        self.get_logs_eval, self.get_eval_report = get_logs_eval, get_eval_report
        self.make_test_spec, self.record_test_exit_code = make_test_spec, record_test_exit_code
        self._specs: dict[str, Any] = {}

    def unsupported(self, instance: SWEInstance) -> str | None:
        """Why swebench 5 cannot run `instance` (missing columns, unknown parser or eval type), or None."""
        iid = instance.instance_id
        missing = instance.missing_v5_columns()
        if missing:
            return (
                f"{iid} lacks the swebench 5 column(s) {', '.join(missing)}: the Docker runtime needs SWE-bench "
                "Verified rows in the swebench 5 schema (image, eval_script, log_parser, eval_type)"
            )
        if instance.log_parser not in self.parsers:
            return f"{iid}: swebench has no log parser {instance.log_parser!r}"
        eval_types = {e.value for e in self.constants.EvalType}
        if instance.eval_type not in eval_types:
            return f"{iid}: eval_type {instance.eval_type!r} is not one of {', '.join(sorted(eval_types))}"
        return None

    def spec(self, instance: SWEInstance) -> Any:
        """The `TestSpec` of `instance` (`make_test_spec` on its record; cached)."""
        if instance.instance_id not in self._specs:
            self._specs[instance.instance_id] = self.make_test_spec(instance.to_record())
        return self._specs[instance.instance_id]

    def image(self, spec: Any) -> str:
        """The per-instance image the dataset names (`TestSpec.image`)."""
        return spec.image

    def eval_script(self, spec: Any) -> str:
        """The evaluation script as the 5.x harness runs it (exit status recorded)."""
        return spec.eval_script

    def test_script(self, spec: Any, test_ids: list[str]) -> str:
        """The `run_tests` tool's script, built from the spec's eval script: its set-up lines
        (environment, working directory, reinstall), then its test command between the output
        markers with the exit status recorded, WITHOUT the test patch (the agent never sees the
        hidden tests) and without the informational `git status/show/diff`. A pytest command
        also gets the files of pytest ids (`path::name`) it does not name already."""
        lines = list(spec.eval_script_list)
        start_marker, end_marker = self.constants.START_TEST_OUTPUT, self.constants.END_TEST_OUTPUT
        try:
            start = next(i for i, line in enumerate(lines) if start_marker in line)
            end = next(i for i in range(start + 1, len(lines)) if end_marker in lines[i])
        except StopIteration:
            raise ValueError(f"{spec.instance_id}: the eval script has no test-output markers") from None
        block = next((i for i in range(start) if _TEST_PATCH_BLOCK.match(lines[i])), start)
        setup = [line for line in lines[:block] if not line.startswith(_INFORMATIONAL)]
        var = self.constants.TEST_EXIT_CODE_VAR
        command = [line for line in lines[start + 1 : end] if not line.startswith(f"{var}=")]
        if len(command) == 1 and command[0].split()[:1] == ["pytest"]:
            named = set(command[0].split())
            extra = sorted({t.split("::", 1)[0] for t in test_ids if "::" in t} - named)
            command = [" ".join([command[0], *extra])]
        body = self.record_test_exit_code([lines[start], *command, lines[end]])
        return "\n".join(["#!/bin/bash", "set -uxo pipefail", *setup, *body]) + "\n"

    def parse(self, spec: Any, log: str) -> tuple[dict[str, str], bool]:
        """(test id -> status, whether the log shows a valid test run), by `get_logs_eval`."""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "test_output.txt"
            path.write_text(log)
            return self.get_logs_eval(spec, str(path))

    def report(self, spec: Any, patch: str, log: str) -> dict[str, Any]:
        """swebench's verdict on an evaluation log: `get_eval_report(...)[instance_id]` with the
        tests' statuses (`resolved`, `patch_successfully_applied`, `tests_status`, ...)."""
        prediction = {
            "instance_id": spec.instance_id,
            "model_name_or_path": PREDICTION_MODEL,
            "model_patch": patch,
        }
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "test_output.txt"
            path.write_text(log)
            report = self.get_eval_report(spec, prediction, str(path), include_tests_status=True)
        return report[spec.instance_id]
