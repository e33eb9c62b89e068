"""The source layout stays as documented: no import circles, imports flowing down, small files
and functions (`scripts/check_layout.py`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_layout_has_no_circles_and_no_oversized_files_or_functions():
    res = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "check_layout.py")], capture_output=True, text=True, cwd=REPO
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip().endswith("layout ok")


def test_the_layout_check_finds_a_circle(tmp_path, monkeypatch):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import check_layout
    finally:
        sys.path.pop(0)
    assert check_layout.circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert check_layout.circles({"a": {"b"}, "b": set()}) == []


def test_bench_help_imports_no_torch():
    code = "import sys; from bench.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert res.stdout.strip() == "False", res.stderr
