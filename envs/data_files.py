"""Reading a local data file of problems (CSV, JSON, JSON lines, parquet, arrow) into row dicts.

One reader for the math task's `task.dataset` files and the benchmarks' `--data` copies, so the
same file reads the same way in training and in evaluation.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

FORMATS = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".arrow": "arrow",
}
"""Accepted extensions and the reader used for each."""


class DataFileError(ValueError):
    """A data file is missing, has an unsupported extension or cannot be parsed (one-line message)."""


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a local CSV / JSON / JSONL / parquet / arrow file as dicts (reader chosen by extension).

    CSV cells stay strings exactly as written (no type guessing: `042` stays `042`); a `.json`
    file holds a list of objects (a JSON-lines file misnamed `.json` is accepted too); parquet
    and arrow cells come back as plain Python values (nested lists and dicts, e.g. verl's chat
    `prompt` column, stay lists and dicts); an `.arrow` file is one written by `datasets`
    (`save_to_disk`'s `data-*.arrow`). Every row must be an object. Raises DataFileError naming
    the file and the problem.
    """
    p = Path(path)
    kind = FORMATS.get(p.suffix.lower())
    if kind is None:
        raise DataFileError(f"{p}: unsupported extension {p.suffix!r}; use one of {', '.join(FORMATS)}")
    if not p.is_file():
        raise DataFileError(f"{p}: no such file")
    try:
        if kind == "csv":
            with p.open(newline="", encoding="utf-8") as f:
                return [dict(row) for row in csv.DictReader(f)]
        if kind == "parquet":
            import pyarrow.parquet as pq  # only for parquet files: keeps importing this module cheap

            return pq.read_table(p).to_pylist()
        if kind == "arrow":
            import datasets  # the arrow stream format `datasets` writes

            return datasets.Dataset.from_file(str(p)).to_list()
        text = p.read_text(encoding="utf-8")
        rows = _json_rows(text) if kind == "json" else _json_lines(text)
    except Exception as exc:  # parser errors of csv/json/pyarrow: report them in one line
        raise DataFileError(f"{p}: cannot read as {kind}: {type(exc).__name__}: {exc}") from None
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise DataFileError(f"{p}: must hold one JSON object per row (a .json file: a list of objects)")
    return rows


def _json_rows(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if "Extra data" not in str(exc):
            raise
        return _json_lines(text)  # JSON lines in a file named .json


def _json_lines(text: str) -> list[Any]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]
