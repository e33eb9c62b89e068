"""swe-mini: tiny SWE-bench-style instances with their repositories embedded, for `--task swe`.

Each instance is a one-module Python repository (module <= ~500 characters, plus
`tests/test_<module>.py`) with a one-line bug, a user-style issue of <= ~200 characters, the
gold `patch`, and a `test_patch` adding the FAIL_TO_PASS tests: small enough for a character-
level model with a 1024-token context to read the issue, view the file and fix it. The
instances follow the official schema (`envs.swe.instance.SWEInstance`), so the same scaffold,
runtimes and grading serve swe-mini and SWE-bench. `envs.swe.local_runtime` rebuilds each
repository from its embedded files with git, reproducing `base_commit`.

Data: `swe_mini.jsonl` (one instance per line: the official fields plus `files`, the
repository at base), in `mini/`. It is generated from the readable sources in `mini/src/` by
`python -m envs.swe.swe_mini_build`; edit those, not the JSONL.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from envs.swe.instance import SWEInstance

DATA_FILE = Path(__file__).with_name("mini") / "swe_mini.jsonl"
VERSION = "1"
"""Dataset version (also each instance's `version`)."""


@functools.lru_cache(maxsize=1)
def _rows() -> dict[str, dict]:
    """instance_id -> row of the JSONL (read once)."""
    rows = {}
    with DATA_FILE.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                rows[row["instance_id"]] = row
    return rows


@functools.lru_cache(maxsize=1)
def _instances() -> tuple[SWEInstance, ...]:
    return tuple(SWEInstance.from_row(row) for row in _rows().values())


def load_swe_mini() -> list[SWEInstance]:
    """Every swe-mini instance, in file order (sorted by instance_id)."""
    return list(_instances())


def has_repo(instance_id: str) -> bool:
    """True when `instance_id`'s repository is embedded (i.e. it is a swe-mini instance)."""
    return instance_id in _rows()


def repo_files(instance_id: str) -> dict[str, str]:
    """The repository of `instance_id` at its base commit: relative path -> text (a copy)."""
    try:
        return dict(_rows()[instance_id]["files"])
    except KeyError:
        raise KeyError(f"{instance_id!r} is not a swe-mini instance (known: {len(_rows())})") from None
