"""Evaluation records on disk: `<bench>.jsonl` (one record per sample) and `<bench>.summary.json`.

`bench eval` and in-training evaluations write through `write_eval`; comparisons and reports
read through `read_records` and `read_summary`. Standard library only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def eval_paths(out_dir: str | Path, benchmark: str) -> tuple[Path, Path]:
    """(records file, summary file) of `benchmark` in `out_dir`."""
    out = Path(out_dir)
    return out / f"{benchmark}.jsonl", out / f"{benchmark}.summary.json"


def write_eval(
    out_dir: str | Path, records: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]
) -> tuple[Path, Path]:
    """Write `<out_dir>/<bench>.jsonl` (records) and `<out_dir>/<bench>.summary.json`, each atomically."""
    records_path, summary_path = eval_paths(out_dir, summary["benchmark"])
    records_path.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records)
    for path, text in (
        (records_path, lines),
        (summary_path, json.dumps(summary, indent=2, default=str) + "\n"),
    ):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return records_path, summary_path


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of a `<bench>.jsonl` file, in file order (a torn last line is ignored)."""
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return rows


def read_summary(path: str | Path) -> dict[str, Any]:
    """The summary of a `<bench>.summary.json` file."""
    return json.loads(Path(path).read_text(encoding="utf-8"))
