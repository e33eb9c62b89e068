"""SWE-bench Verified: instances, the predictions file, and the official harness's reports.

Official data: hub `SWE-bench/SWE-bench_Verified` (formerly `princeton-nlp/...`), split
`test`, 500 instances, pinned to commit `SWE_VERIFIED_REVISION`. `FAIL_TO_PASS` and
`PASS_TO_PASS` are JSON-encoded lists of test ids in the official data (plain lists are
accepted from local files). Rows must carry the swebench 5 columns (`image`, `eval_script`,
`log_parser`, `eval_type`: `envs.swe.instance.SWE_V5_COLUMNS`), from which swebench 5 runs and
grades an instance. Grading is the `swebench` package's Docker harness, which this module never
runs: it writes the predictions file and the instances file the harness reads (the episodes'
own rows, so the harness grades exactly the data the episodes ran on) and reads back what the
harness wrote, from files only.

Harness outputs read by `read_harness_report` (swebench >= 2, `harness/reporting.py` and
`harness/grading.py`):
- the run report `<model_name_or_path with / -> __>.<run_id>.json` with `total_instances`,
  `submitted_instances`, `completed_instances`, `resolved_instances`, ... and the id lists
  `completed_ids`, `incomplete_ids`, `empty_patch_ids`, `submitted_ids`, `resolved_ids`,
  `unresolved_ids`, `error_ids`;
- per instance `logs/run_evaluation/<run_id>/<model>/<instance_id>/report.json`:
  `{instance_id: {"patch_is_None", "patch_exists", "patch_successfully_applied", "resolved",
  "tests_status": {"FAIL_TO_PASS": {"success": [...], "failure": [...]}, "PASS_TO_PASS":
  {...}, "FAIL_TO_FAIL": {...}, "PASS_TO_FAIL": {...}}}}`;
- beside it `run_instance.log`, whose `Error in evaluation for <id>: <cause>` line says why an
  instance of `error_ids` has no report (an image missing and not pullable, a patch that did
  not apply, a timeout).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from benchmarks.base import BenchmarkDataError, BenchmarkSpec, HubSource, SamplingDefaults
from envs.base import Problem
from envs.swe.instance import (
    SWE_COLUMNS,
    SWE_V5_COLUMNS,
    InstanceError,
    SWEInstance,
    harness_tests_status,
    is_resolved,
)

__all__ = [
    "SWE_COLUMNS",
    "SWEInstance",
    "harness_tests_status",
    "is_resolved",
    "load_instances",
    "read_harness_report",
    "read_predictions",
    "swe_verified",
    "write_instances",
    "write_predictions",
]

SWE_VERIFIED_REVISION = "91aa3ed51b709be6457e12d00300a6a596d4c6a3"
"""Commit of `SWE-bench/SWE-bench_Verified` (500 rows, data/test-00000-of-00001.parquet). Not
checked offline: it must be a revision in the swebench 5 schema (`SWE_V5_COLUMNS`); rows
without those columns are refused at load, naming them."""

SWE_TEMPLATE = (
    "You are given a checkout of a Python repository at the commit where the issue below was "
    "reported. Edit the repository so that the issue is resolved; do not modify the tests.\n\n"
    "<issue>\n{problem}\n</issue>"
)


def swe_episode_task(runtime: str):
    """An `episode_task` factory: the SWE task's scaffold on the given problems, in `runtime`
    ("docker" for SWE-bench Verified, "local" for swe-mini). Building it checks the runtime
    for every instance, so a missing Docker daemon fails before any model is loaded."""

    def make(problems):
        from envs.swe.task import SweTask

        return SweTask.for_problems(problems, runtime=runtime)

    return make


def swe_row(index: int, row: dict[str, Any]) -> Problem:
    """Key = instance_id, prompt text = the issue, answer = the gold patch (never used to grade).

    meta is the official record, so an SWE env can rebuild the instance with `SWEInstance.from_row`.
    """
    try:
        inst = SWEInstance.from_row(row)
    except InstanceError as exc:
        raise BenchmarkDataError(f"SWE-bench instance row {index}: {exc}") from None
    return Problem(
        key=inst.instance_id, prompt=inst.problem_statement, answer=inst.patch, meta=inst.to_record()
    )


def swe_verified() -> BenchmarkSpec:
    """SWE-bench Verified: 500 human-validated GitHub issues; each sample is an episode of the
    SWE scaffold in the instance's official Docker image, resolved per SWE-bench's rule."""
    return BenchmarkSpec(
        name="swe-verified",
        version=2,  # 2: swebench 5 rows, graded by swebench's get_eval_report
        description="SWE-bench Verified: 500 GitHub issues from 12 Python repos; graded by the swebench harness",
        source=HubSource(
            dataset_id="SWE-bench/SWE-bench_Verified", revision=SWE_VERIFIED_REVISION, split="test"
        ),
        license="MIT (SWE-bench); repository code under each project's license",
        prompt_template=SWE_TEMPLATE,
        grader=None,
        sampling=SamplingDefaults(temperature=1.0, top_p=1.0, max_new_tokens=8192, k=1),
        columns=(*SWE_COLUMNS, *SWE_V5_COLUMNS),
        parse_row=swe_row,
        episode_task=swe_episode_task("docker"),
    )


def load_instances(data_path: str | Path | None = None, limit: int | None = None) -> list[SWEInstance]:
    """SWE-bench Verified instances from a local file (`--data`) or the pinned hub revision."""
    return [SWEInstance.from_row(p.meta) for p in swe_verified().load(data_path, limit)]


# ----------------------------------------------------------------------------- predictions


def write_predictions(
    path: str | Path, records: Iterable[Mapping[str, Any]], model_name_or_path: str | None = None
) -> Path:
    """Write the harness's predictions file: one `{instance_id, model_name_or_path, model_patch}` per line.

    `model_name_or_path` fills records that lack it. `model_patch` may be None or "" (the
    harness reports those as empty patches). Duplicate instance ids are rejected.
    """
    lines, seen = [], set()
    for rec in records:
        iid = rec.get("instance_id")
        model = rec.get("model_name_or_path") or model_name_or_path
        patch = rec.get("model_patch")
        if not isinstance(iid, str) or not iid:
            raise ValueError(f"prediction without an instance_id: {dict(rec)!r:.80}")
        if iid in seen:
            raise ValueError(f"duplicate prediction for {iid}")
        if not model:
            raise ValueError(f"prediction for {iid} has no model_name_or_path")
        if patch is not None and not isinstance(patch, str):
            raise ValueError(f"prediction for {iid}: model_patch must be a string or None")
        seen.add(iid)
        lines.append(json.dumps({"instance_id": iid, "model_name_or_path": model, "model_patch": patch}))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".part")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    tmp.replace(out)
    return out


def write_instances(path: str | Path, records: Iterable[Mapping[str, Any]]) -> Path:
    """The instances file the harness grades against (`--dataset_name PATH.jsonl`): one official
    record per line, as the episodes ran them (`Problem.meta`), so a harness run reads the same
    revision and rows as the episodes, never the hub's latest."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".part")
    tmp.write_text("".join(json.dumps(dict(r)) + "\n" for r in records), encoding="utf-8")
    tmp.replace(out)
    return out


def read_predictions(path: str | Path) -> list[dict[str, Any]]:
    """Predictions from JSONL (as written above) or JSON (a list, or a dict keyed by instance id)."""
    text = Path(path).read_text(encoding="utf-8")
    if Path(path).suffix == ".json":
        data = json.loads(text)
        return list(data.values()) if isinstance(data, dict) else list(data)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# ----------------------------------------------------------------------------- harness reports


_ID_LISTS = (
    "completed_ids",
    "incomplete_ids",
    "empty_patch_ids",
    "submitted_ids",
    "resolved_ids",
    "unresolved_ids",
    "error_ids",
)


def _read_json(path: Path) -> Any:
    """JSON content of `path`, or None when the file is empty or not valid JSON."""
    try:
        text = path.read_text(encoding="utf-8").strip()
        return json.loads(text) if text else None
    except json.JSONDecodeError:
        return None


def _instance_reports(paths: list[Path]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per-instance `report.json` files -> ({instance_id: entry}, ids whose report is unreadable)."""
    instances: dict[str, dict[str, Any]] = {}
    where: dict[str, Path] = {}
    broken = []
    for path in paths:
        data = _read_json(path)
        iid, entry = next(iter(data.items())) if isinstance(data, dict) and len(data) == 1 else ("", None)
        if not isinstance(entry, dict):
            broken.append(path.parent.name)  # the harness counts an unreadable report as an error
            continue
        if iid in where:
            raise BenchmarkDataError(
                f"instance {iid} reported twice: {where[iid]} and {path}; pass one run directory"
            )
        where[iid] = path
        tests_status = entry.get("tests_status")
        instances[iid] = {
            "resolved": bool(entry.get("resolved", False)),
            "patch_successfully_applied": entry.get("patch_successfully_applied"),
            "tests_status": tests_status,
            # None when the report omits tests_status (patch missing or not applied).
            "resolved_by_rule": is_resolved(tests_status) if isinstance(tests_status, dict) else None,
            "path": str(path),
        }
    return instances, broken


def _error_reasons(root: Path, run_id: str | None, error_ids: list[str]) -> dict[str, str]:
    """Instance id -> why the harness gave it no report, one line, from its `run_instance.log`
    (the harness's `Error in evaluation for <id>: ...`, else the log's last line)."""
    reasons: dict[str, str] = {}
    logs = [] if root.is_file() else sorted(root.rglob("run_instance.log"))
    for log in logs:
        iid = log.parent.name
        if iid not in error_ids or iid in reasons or not _of_run(log, root, run_id):
            continue
        lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines()]
        marker = f"Error in evaluation for {iid}: "
        found = [line.split(marker, 1)[1] for line in lines if marker in line]
        last = found[-1] if found else next((line for line in reversed(lines) if line), "no log")
        reasons[iid] = " ".join(last.split())[:300]
    return reasons


def _of_run(path: Path, root: Path, run_id: str | None) -> bool:
    """Whether a harness file belongs to run `run_id` (every file when None): the run report is
    `<model>.<run_id>.json`, instance reports live under `logs/run_evaluation/<run_id>/`."""
    if run_id is None:
        return True
    if path.name in ("report.json", "run_instance.log"):
        return run_id in path.relative_to(root).parts[:-1]
    return path.name.endswith(f".{run_id}.json")


def read_harness_report(path_or_dir: str | Path, run_id: str | None = None) -> dict[str, Any]:
    """Summary of a swebench harness run, from its files only (no Docker, no swebench import).

    `path_or_dir` is the run report JSON, a per-instance `report.json`, or a directory holding
    either (searched recursively: the run report is a `*.json` with `resolved_ids`; instance
    reports are `report.json` files). `run_id` keeps only that run's files, so several runs in
    one directory (one per sample index, or a re-evaluation) are read one at a time. Returns the run report's counts and id lists when one
    is found (else id lists derived from the instance reports, with `total_instances` None),
    plus `instances` ({id: resolved, tests_status, resolved_by_rule, ...}), `resolved_rate`
    (resolved / total_instances, None when unknown), `inconsistent_ids` (instances whose
    `resolved` flag disagrees with `is_resolved(tests_status)`), `error_reasons` ({id of
    `error_ids`: why, from its `run_instance.log`}) and `sources`.
    """
    root = Path(path_or_dir)
    if not root.exists():
        raise BenchmarkDataError(f"no harness output at {root}")
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*.json") if p.is_file())
    files = [p for p in files if root.is_file() or _of_run(p, root, run_id)]
    run_files = [
        p
        for p in files
        if p.name != "report.json" and isinstance(d := _read_json(p), dict) and "resolved_ids" in d
    ]
    if len(run_files) > 1:
        raise BenchmarkDataError(
            f"several run reports under {root}: {', '.join(map(str, run_files))}; pass one file or a run_id"
        )
    instances, broken = _instance_reports([p for p in files if p.name == "report.json"])
    if not run_files and not instances and not broken:
        raise BenchmarkDataError(f"no swebench run report or per-instance report.json under {root}")
    summary: dict[str, Any]
    if run_files:
        summary = dict(_read_json(run_files[0]))
        summary.update({k: sorted(summary.get(k, [])) for k in _ID_LISTS})
    else:
        resolved = sorted(i for i, e in instances.items() if e["resolved"])
        summary = {
            "total_instances": None,
            "completed_ids": sorted(instances),
            "resolved_ids": resolved,
            "unresolved_ids": sorted(set(instances) - set(resolved)),
            "error_ids": sorted(broken),
        }
    total = summary.get("total_instances")
    summary["resolved_rate"] = len(summary["resolved_ids"]) / total if total else None
    summary["instances"] = instances
    summary["inconsistent_ids"] = sorted(
        i
        for i, e in instances.items()
        if e["resolved_by_rule"] is not None and e["resolved_by_rule"] != e["resolved"]
    )
    summary["error_reasons"] = _error_reasons(root, run_id, summary.get("error_ids", []))
    summary["sources"] = [str(p) for p in run_files] + [e["path"] for e in instances.values()]
    return summary
