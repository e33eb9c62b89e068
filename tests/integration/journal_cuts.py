"""Tearing a real study journal the way a kill or a full disk in the middle of an append does,
for the comparison and sweep tests that then resume it (`sweeps.journal`)."""

from __future__ import annotations

import json
from pathlib import Path

TEARS = ("inside the last record", "at a record boundary", "inside a multi-byte character")


def tear(journal: Path, where: str) -> int:
    """Tear the end of `journal` at `where` (`TEARS`); the bytes of a torn record left behind
    (0 when the cut falls between records: the journal is whole, one record shorter).

    Inside the last record and at the boundary before it, the last record is lost, as when
    the process appending it died. Inside a multi-byte character: a new record holding
    non-ASCII text was being appended and stops after the first byte of a two-byte character."""
    data = journal.read_bytes()
    last = data.rfind(b"\n", 0, len(data) - 1) + 1
    if where == "at a record boundary":
        journal.write_bytes(data[:last])
        return 0
    if where == "inside the last record":
        keep = last + (len(data) - last) // 2
        journal.write_bytes(data[:keep])
        return keep - last
    record = {**json.loads(data[last:]), "note": "café"}
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
    torn = text[: text.index("é".encode()) + 1]
    journal.write_bytes(data + torn)
    return len(torn)
