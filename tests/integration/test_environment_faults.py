"""Faults of the machine under an output, as a user meets them: a read-only, full or forbidden
output directory of `run`, `eval`, `report`, `compare` or `sweep` is one line naming it, what
to do, and exit code 2, never a traceback; a disk that fills mid-run ends the run with one
line, keeps its completed checkpoints, and the run resumes once there is space.

Read-only and full file systems are real ones (small tmpfs mounts) where this process may
mount them (root with CAP_SYS_ADMIN); everywhere, the same faults and a forbidden directory
(which root never meets) are also made by `tests.integration.faulty_fs`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from results.rundir import RunDir
from tests.integration.test_bad_input import _full_config

REPO = Path(__file__).resolve().parents[2]
SMALL = ["--set", "trajectories_per_step=8"]
COMMANDS = {  # command -> its arguments with an output directory OUT (`{run}`: a run directory)
    "run": ["run", "--steps", "1", *SMALL, "--out", "{out}", "--no-progress"],
    "eval": ["eval", "--model", "tiny", "--bench", "arith", "--limit", "1", "--k", "1", "--out", "{out}"],
    "report": ["report", "{run}", "--out", "{out}"],
    "compare": [
        "compare",
        "--algos",
        "sao",
        "--budget",
        "trajectories=8",
        "--workers",
        "1",
        "--out",
        "{out}",
    ],
    "sweep": ["sweep", "--algo", "sao", "--budget", "trajectories=8", "--workers", "1", "--out", "{out}"],
}
SAYS = {
    "EROFS": "read-only file system; choose a directory on a writable file system",
    "ENOSPC": "no space left on device; free some space there, or choose another output directory",
    "EACCES": "permission denied; choose a directory you may write to",
}


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "BENCH_CACHE_DIR": str(tmp_path / "cache")}


def _bench(
    args: list[str], tmp_path: Path, faulty: tuple[str, Path] | None = None
) -> subprocess.CompletedProcess:
    prefix = (
        ["-m", "bench.cli"]
        if faulty is None
        else ["-m", "tests.integration.faulty_fs", faulty[0], str(faulty[1])]
    )
    return subprocess.run(
        [sys.executable, *prefix, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=_env(tmp_path),
        timeout=300,
    )


def _assert_one_line(res: subprocess.CompletedProcess, out: Path, says: str) -> None:
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 2 and "Traceback" not in res.stderr, (res.stdout, res.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"bench: error: {out}") and says in lines[0], res.stderr


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A run directory (never trained) for `report` to read."""
    config = {"algo": "sao", "task": "arith", "seed": 0}
    return RunDir.create(tmp_path_factory.mktemp("faults") / "run", _full_config(config), {}).path


def _mount(path: Path, options: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


@pytest.fixture(scope="module")
def mounts(tmp_path_factory):
    """{"EROFS": a read-only tmpfs, "ENOSPC": a full one} (skipped where mounting is not allowed)."""
    root = tmp_path_factory.mktemp("mounts")
    if not _mount(root / "ro", "size=1m,ro"):
        pytest.skip("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)")
    _mount(root / "full", "size=64k")
    (root / "full" / "filler").write_bytes(b"\0" * (64 << 10))
    yield {"EROFS": root / "ro", "ENOSPC": root / "full"}
    for name in ("ro", "full"):
        subprocess.run(["umount", str(root / name)], capture_output=True)


CASES = [(command, fault) for fault in ("EROFS", "ENOSPC") for command in COMMANDS]


@pytest.mark.parametrize("command, fault", CASES, ids=[f"{c} {f}" for c, f in CASES])
def test_a_read_only_or_full_output_is_one_line(command, fault, mounts, run_dir, tmp_path):
    out = mounts[fault] / f"{command}-out"
    res = _bench([a.format(out=out, run=run_dir) for a in COMMANDS[command]], tmp_path)
    _assert_one_line(res, out, SAYS[fault])


MOCKED = [(command, "EACCES") for command in COMMANDS] + [
    ("run", "EROFS"),
    ("run", "ENOSPC"),
    ("compare", "ENOSPC"),
]


@pytest.mark.parametrize("command, fault", MOCKED, ids=[f"{c} {f}" for c, f in MOCKED])
def test_a_forbidden_read_only_or_full_output_is_one_line_without_a_mount(command, fault, run_dir, tmp_path):
    faulty = tmp_path / "faulty"
    faulty.mkdir()
    out = faulty / f"{command}-out"
    res = _bench([a.format(out=out, run=run_dir) for a in COMMANDS[command]], tmp_path, (fault, faulty))
    _assert_one_line(res, out, SAYS[fault])
    assert not out.exists() or not any(out.rglob("*.tmp"))  # no temporary file left behind


def test_a_disk_that_fills_mid_run_keeps_the_checkpoints_and_the_run_resumes(tmp_path):
    disk = tmp_path / "disk"
    # one tiny-model checkpoint (21 MB: state/ with both AdamW states and the reference, and the
    # policy's export) fits, two do not
    if not _mount(disk, "size=32m"):
        pytest.skip("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)")
    try:
        out = disk / "run"
        cmd = [
            "run",
            "--steps",
            "3",
            "--set",
            "checkpoint_every=1",
            *SMALL,
            "--out",
            str(out),
            "--no-progress",
        ]
        res = _bench(cmd, tmp_path)
        _assert_one_line(res, out / "checkpoints" / ".tmp_step_000002", SAYS["ENOSPC"])
        assert [p.name for p in (out / "checkpoints").iterdir()] == ["step_000001"]
        assert json.loads((out / "summary.json").read_text())["outcome"] == "failed"
        subprocess.run(["mount", "-o", "remount,size=128m", str(disk)], check=True)
        res = _bench(["run", "--resume", str(out), "--no-progress"], tmp_path)
        assert res.returncode == 0, res.stderr
        assert f"resuming {out} from step_000001" in res.stdout
        assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [
            1,
            2,
            3,
        ]
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)
