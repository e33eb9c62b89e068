"""SWE-bench task instances and the benchmark's "resolved" rule, shared by the SWE env
(training, `--task swe`) and the SWE-Bench Verified benchmark (`benchmarks.swe_verified`).

An instance follows the official schema: `instance_id, repo, base_commit,
problem_statement, patch, test_patch, FAIL_TO_PASS, PASS_TO_PASS` (+ `version`,
`environment_setup_commit`, optional `hints_text`, `created_at`, `difficulty`). The test lists
are JSON-encoded strings in the official data; plain lists are accepted too.

Since swebench 5 the dataset also carries how an instance is run and graded
(`SWE_V5_COLUMNS`): `image` (the prebuilt per-instance image), `eval_script` (the whole
evaluation script: apply the test patch, run the tests between the output markers, reset),
`log_parser` (a key of swebench's `PARSER_REGISTRY`) and `eval_type` (`pass_and_fail` or
`fail_only`); `image_assets` (binary test files, JSON) is optional. They are kept as they are,
so `to_record()` is a row `swebench.harness.utils.make_test_spec` accepts. Rows without them
(swe-mini, swe-synth, SWE-bench exports older than swebench 5) still parse; the Docker runtime
refuses them with a message naming the missing columns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class InstanceError(ValueError):
    """A row that is not a valid SWE-bench instance; the message names the field."""


SWE_COLUMNS = (
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "version",
    "environment_setup_commit",
)
"""Required fields of an instance (official schema; `hints_text`, `created_at`, `difficulty` optional)."""
SWE_V5_COLUMNS = ("image", "eval_script", "log_parser", "eval_type")
"""The columns swebench 5 runs an instance from (module docstring); required by the Docker runtime."""
_OPTIONAL = ("hints_text", "created_at", "difficulty", *SWE_V5_COLUMNS, "image_assets")

# Per-test outcomes as the harness's log parsers name them, and which count as success.
_F2P_SUCCESS = {"PASSED", "XFAIL"}
_P2P_SUCCESS = {"PASSED", "XFAIL", "SKIPPED"}  # the harness counts a skipped P2P test as maintained


def _text(value: Any) -> str:
    """A cell as text: None -> "", dicts and lists (parquet, local JSON) -> JSON, else str()."""
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def _test_list(value: Any, field: str, instance_id: str) -> tuple[str, ...]:
    """A JSON-encoded list (official data) or a plain list/array of test ids, as a tuple."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError:
            raise InstanceError(f"{instance_id}: {field} is not a JSON list: {value[:60]!r}") from None
    if hasattr(value, "tolist"):  # numpy arrays from parquet
        value = value.tolist()
    if not isinstance(value, list | tuple) or not all(isinstance(t, str) for t in value):
        raise InstanceError(f"{instance_id}: {field} must be a list of test ids")
    return tuple(value)


@dataclass(frozen=True)
class SWEInstance:
    """One SWE-bench task instance (official field names, lower-cased for the test lists)."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    patch: str
    test_patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    version: str
    environment_setup_commit: str
    hints_text: str = ""
    created_at: str = ""
    difficulty: str = ""
    image: str = ""
    eval_script: str = ""
    log_parser: str = ""
    eval_type: str = ""
    image_assets: str = ""  # JSON text, "" when the instance has none

    def missing_v5_columns(self) -> list[str]:
        """The swebench 5 columns (`SWE_V5_COLUMNS`) this instance lacks or has empty."""
        return [name for name in SWE_V5_COLUMNS if not getattr(self, name).strip()]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SWEInstance:
        """Parse an official-schema row (hub, JSON, JSONL or parquet)."""
        iid = str(row["instance_id"])
        text = {k: "" if row.get(k) is None else str(row.get(k)) for k in SWE_COLUMNS if "_TO_" not in k}
        optional = {k: _text(row.get(k)) for k in _OPTIONAL}
        return cls(
            **text,
            **optional,
            fail_to_pass=_test_list(row["FAIL_TO_PASS"], "FAIL_TO_PASS", iid),
            pass_to_pass=_test_list(row["PASS_TO_PASS"], "PASS_TO_PASS", iid),
        )

    def to_record(self) -> dict[str, str]:
        """The official row: upper-case test-list fields, JSON-encoded; the swebench 5 columns
        as read (`make_test_spec` accepts the record when they are present)."""
        record = {k: getattr(self, k) for k in SWE_COLUMNS if "_TO_" not in k}
        record.update({k: getattr(self, k) for k in _OPTIONAL if k != "image_assets"})
        if self.image_assets:
            record["image_assets"] = self.image_assets
        record["FAIL_TO_PASS"] = json.dumps(list(self.fail_to_pass))
        record["PASS_TO_PASS"] = json.dumps(list(self.pass_to_pass))
        return record


def harness_tests_status(
    results: Mapping[str, str], fail_to_pass: Iterable[str], pass_to_pass: Iterable[str]
) -> dict[str, dict[str, list[str]]]:
    """The harness's `tests_status` from per-test outcomes (`PASSED`, `FAILED`, `SKIPPED`, `ERROR`, `XFAIL`).

    As in the harness: a FAIL_TO_PASS test succeeds when PASSED (or XFAIL); a PASS_TO_PASS
    test also when SKIPPED; a test missing from `results` fails.
    """
    status: dict[str, dict[str, list[str]]] = {}
    for name, tests, ok in (
        ("FAIL_TO_PASS", fail_to_pass, _F2P_SUCCESS),
        ("PASS_TO_PASS", pass_to_pass, _P2P_SUCCESS),
    ):
        status[name] = {"success": [], "failure": []}
        for test in tests:
            status[name]["success" if results.get(test, "").upper() in ok else "failure"].append(test)
    return status


def is_resolved(tests_status: Mapping[str, Any]) -> bool:
    """SWE-bench's rule: every FAIL_TO_PASS and every PASS_TO_PASS test in the success state.

    `tests_status` is the harness's dict (`{"FAIL_TO_PASS": {"success": [...], "failure":
    [...]}, "PASS_TO_PASS": {...}}`). An empty category counts as satisfied, as in the harness.
    """
    for name in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        if name not in tests_status or "failure" not in tests_status[name]:
            raise ValueError(f"tests_status lacks {name}.failure: {sorted(tests_status)}")
        if tests_status[name]["failure"]:
            return False
    return True
