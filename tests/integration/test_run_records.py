"""What a `bench run` leaves and says, through the CLI: the end-of-run table and next commands
(the JSON line with --json), config.json's effective algorithm config and plugin source, a
resume that finds the plugin from config.json alone, and a TensorBoard tracker fed per step."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.integration.test_cli_run import _common, _env, bench
from tests.requires import requires

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plugins"


def test_a_plugin_run_records_its_config_resumes_without_plugin_and_reports_to_tensorboard(
    base_checkpoint, tmp_path
):
    requires("tensorboard")
    out = tmp_path / "run"
    res = bench(
        "run",
        "--plugin",
        "reinforce_plugin",
        "--algo",
        "reinforce",
        "--steps",
        "1",
        "--out",
        str(out),
        "--report-to",
        "tensorboard",
        *_common(base_checkpoint),
        env=_env(EXAMPLES),
    )
    assert res.returncode == 0, res.stderr
    for expected in (
        "run finished:",
        "reward/mean, first 10% (step 1)",
        "reward/mean, last 10% (step 1)",
        "non-finite updates skipped",
        "next:",
        f"bench eval --model {out} --bench arith",
        f"bench report {out}",
        "bench compare --algos reinforce,grpo --task arith --budget trajectories=8",
    ):
        assert expected in res.stdout, (expected, res.stdout)
    assert re.search(r"^trajectories trained on +8 \(generated \d+\)$", res.stdout, re.M), res.stdout
    config = json.loads((out / "config.json").read_text())
    assert config["algo_args"] == {} and config["algo_config"] == {"baseline": "batch-mean"}
    assert config["algo_source"]["module"] == "reinforce_plugin" and config["report_to"] == "tensorboard"
    assert config["algo_source"]["source"] == "plugin reinforce_plugin"
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))

    # --resume needs no --plugin: config.json says where the algorithm comes from
    res = bench("run", "--resume", str(out), "--steps", "2", "--json", "--no-progress", env=_env(EXAMPLES))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1])["steps"] == 2

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(out / "tensorboard"))
    acc.Reload()
    assert [e.step for e in acc.Scalars("reward/mean")] == [1, 2]

    # ... and when the module is gone, one line says which module and how to bring it back
    res = bench("run", "--resume", str(out), "--steps", "3", "--no-progress", env=_env())
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "comes from plugin module 'reinforce_plugin', which cannot be loaded now" in res.stderr
    assert "put reinforce_plugin on PYTHONPATH" in res.stderr
