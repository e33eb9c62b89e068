"""Every command's bad input in one table: a one-line `bench: error: ...`, exit code 2, no
traceback, in seconds (before any model loads or any run dir is made).

`{file}` is an existing regular file, `{run}` a run directory (config.json, never trained),
`{locked}` a run directory that this test process holds the lock of, `{empty}` an empty
directory, `{finished}` an eval dir holding a finished `arith` evaluation of other settings,
`{other}` a comparison directory of other settings (never run) and `{long}` a path with a name
of 300 bytes (the limit is 255). Damaged files: `{badsummary}` a run whose summary.json was cut
short, `{badrecords}` a run whose final evaluation records are random bytes, `{badspec}` a
comparison whose comparison.json was cut short, `{badsweep}` a sweep whose sweep.json was cut
short, `{badjournal}` and `{badsweepjournal}` a comparison and a sweep whose study journal has a
damaged line with records after it (a torn append that an older version appended after).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from results.rundir import BUSY_EXIT_CODE, RunDir
from sweeps.comparison import ComparisonSpec, EvalPlan
from sweeps.spec import Arm

REPO = Path(__file__).resolve().parents[2]
BYO = "tests/fixtures/byo"

RUN = [
    (["--algo", "grp"], "did you mean 'grpo'?"),
    (["--task", "arit"], "did you mean 'arith'?"),
    (["--mode", "fast"], "invalid choice: 'fast'"),
    (["--set", "trajectories_per_step=abc"], "trajectories_per_step: expected int"),
    (
        ["--set", "algo.eps_hgh=1"],
        "algo.eps_hgh: unknown field of sao (did you mean 'dis_eps_high'?); valid fields:",
    ),
    (["--set", "stale_policy=keep"], "stale_policy: invalid value 'keep'; valid choices: drop, requeue"),
    (
        ["--set", "trajectories_per_step=12", "--algo", "grpo"],
        "not a multiple of grpo's rollouts per prompt (8)",
    ),
    (["--model", "/no/such/dir"], "not found"),
    (["--preset", "nope"], "unknown preset 'nope' for sao; valid presets:"),
    (
        ["--preset", "mth"],
        "valid presets: coding, dis-only, full-parameter-critic, math, single-critic-update, step-average, step-last (did you mean 'math'?)",
    ),
    (["--set", "tsk.max_operands=3"], "keys are nested (did you mean 'task'?)"),
    (["--stpes", "3"], "unrecognized arguments: --stpes 3 (did you mean --steps?)"),
    (["--report-to", "tensorbord"], "report_to: unknown tracker 'tensorbord' (did you mean 'tensorboard'?)"),
    (["--task", "drift", "--set", "task.cycle=maybe"], "task.cycle: expected true or false, got 'maybe'"),
    (["--set", "task.max_operands=lots"], "task.max_operands: expected int, got 'lots'"),
    (
        ["--set", "task.max_operand=3"],
        "task.max_operand: unknown argument of task 'arith' (did you mean "
        "'max_operands'?); valid arguments: demo_error_rate, max_operands",
    ),
    (["--set", "task.nosuch=1"], "task.nosuch: unknown argument of task 'arith'; valid arguments:"),
    (["--set", "policy_lr=-1"], "policy_lr: must be > 0, got -1.0"),
    (
        ["--algo", "grpo", "--set", "critic_lr=1e-3"],
        "critic_lr: grpo has no critic, so the run would not use it",
    ),
    (["--set", "temperature=nan"], "temperature: must be a finite number, got nan"),
    (["--set", "top_p=inf"], "top_p: must be a finite number, got inf"),
    (["--out", "{file}"], "not a directory; name a new directory"),
    (["--out", "{file}/sub"], "is a file); name a new directory"),
    (["--resume", "{run}", "--set", "policy_lr=0.5"], "policy_lr would change from 0.0001 to 0.5"),
    (
        ["--resume", "{run}", "--set", "trajectories_per_step=16"],
        "trajectories_per_step would change from 64 to 16",
    ),
    (["--resume", "{run}", "--algo", "grpo"], "algo would change from 'sao' to 'grpo'"),
    (
        ["--resume", "{run}", "--out", "{empty}/x"],
        "--resume continues the run in its own directory; drop --out",
    ),
    (["--resume", "{empty}"], "not a run directory (no config.json)"),
    (["--set", "max_tokens=1e999"], "max_tokens: expected int, got inf"),
    (["--set", "max_trajectories=1e30"], "max_trajectories: 1e+30 is above the largest budget, 2**53"),
    (["--out", "{long}"], "{long}: file name too long; choose a shorter name"),
    (
        ["--task", "math", "--set", "task.dataset=some-org/not-cached"],
        "dataset 'some-org/not-cached' is not in the local datasets cache and HF_",
    ),
    (
        ["--task", "math", "--set", f"task.dataset={BYO}/trl_sums.jsonl", "--set", "task.answer_column=gold"],
        "has no column 'gold' (task.answer_column); columns found: prompt, solution",
    ),
    (
        ["--task", "math", "--set", f"task.dataset={BYO}/hub_sums", "--set", "task.split=dev"],
        "has no split 'dev'; set task.split to one of: train, test",
    ),
    (
        ["--set", "lora_rank=4", "--set", "lora_target_modules=q_proj,query"],
        "lora_target_modules: query match(es) no layer of the model; valid: all-linear or some of down_proj",
    ),
    (["--set", "lora_rank=-1"], "lora_rank must be >= 0"),
    (["--set", "env_workers=-1"], "env_workers must be >= 0, got -1"),
    (
        ["--set", "env_workers=2"],
        "env_workers=2 places the episodes' environments on Ray actors; add --cluster ray",
    ),
    (["--task", "rg:chain_sun"], "unknown reasoning-gym dataset 'chain_sun'; did you mean 'rg:chain_sum'?"),
    (["--task", "rg:chain_sum", "--set", "task.min_term=2"], "did you mean 'min_terms'?); valid: size"),
    (
        ["--task", "rg:chain_sum", "--set", "task.max_terms=2", "--eval-every", "5"],
        "name benchmarks with --eval-bench (this task's own held-out set: --eval-bench rg:chain_sum@max_terms=2)",
    ),
    (["--eval-every", "5", "--eval-bench", "rg:chain_sum@max_term=2"], "did you mean 'max_terms'?"),
    (
        ["--eval-every", "5", "--eval-bench", "math"],
        "benchmark 'math' is the held-out rows of a math task's dataset; this run's task is arith",
    ),
    (
        [
            "--task",
            "math",
            "--set",
            f"task.dataset={BYO}/trl_sums.jsonl",
            "--eval-every",
            "5",
            "--eval-bench",
            "math-val",
        ],
        "benchmark 'math-val': a math run holds these rows out only with task.validation_fraction set",
    ),
    (["--config", "{typo_yaml}"], "algo.dis_eps_hihg: unknown field of sao (did you mean 'dis_eps_high'?)"),
    (["--set", "enable_thinking=false"], "model 'tiny' has no chat template, which enable_thinking need(s)"),
    (
        ["--task", "math", "--set", f"task.dataset={BYO}/trl_sums.jsonl", "--set", "task.system_prompt=Hi"],
        "has no chat template, which task.system_prompt need(s); use an instruct model",
    ),
]

EVAL = [
    (
        ["--model", "tiny", "--bench", "arith", "--temperature", "nan"],
        "--temperature must be a finite number >= 0",
    ),
    (
        ["--model", "tiny", "--bench", "arith", "--temperature", "-1"],
        "--temperature must be a finite number >= 0",
    ),
    (["--model", "tiny", "--bench", "arith", "--top-p", "0"], "--top-p must be in (0, 1]"),
    (["--model", "tiny", "--bench", "arith", "--k", "0"], "--k must be >= 1"),
    (["--model", "tiny", "--bench", "arith", "--limit", "0"], "--limit must be >= 1"),
    (["--model", "tiny", "--bench", "aime2025"], "did you mean"),
    (
        ["--model", "tiny", "--bench", "arith,gsm8k", "--data", "{file}"],
        "--data is only valid with a single --bench",
    ),
    (["--model", "tiny", "--bench", "arith", "--out", "{file}"], "not a directory; name a new directory"),
    (["--model", "tiny", "--bench", "arith", "--out", "{file}/sub"], "is a file); name a new directory"),
    (
        ["--model", "tiny", "--bench", "aime25", "--data", f"{BYO}/hub_sums"],
        "benchmark 'aime25': tests/fixtures/byo/hub_sums row 0 lacks column(s) problem",
    ),
    (
        ["--model", "{empty}", "--bench", "arith", "--limit", "3", "--out", "{finished}"],
        "holds a finished evaluation with other settings (benchmark, data_hash",
    ),
    (["--model", "tiny", "--bench", "arith", "--out", "{long}"], "{long}: file name too long"),
    (
        ["--model", "tiny", "--bench", "arith", "--system-prompt", "Be brief."],
        "has no chat template, which --system-prompt need(s); use an instruct model",
    ),
    (["--model", "tiny", "--bench", "arith", "--system-prompt", " "], "--system-prompt is empty"),
    (
        ["--model", "tiny", "--bench", "math"],
        "benchmark 'math' is the held-out rows of a math task's dataset: evaluate a run trained on one",
    ),
    (["--model", "tiny", "--bench", "math", "--data", f"{BYO}/nope.jsonl"], "nope.jsonl: no such file"),
    (
        [
            "--model",
            "tiny",
            "--bench",
            "math",
            "--data",
            f"{BYO}/trl_sums.jsonl",
            "--set",
            "task.prompt_colum=q",
        ],
        "task.prompt_colum: unknown argument of task 'math' (did you mean 'prompt_column'?)",
    ),
    (["--model", "tiny", "--bench", "arith", "--set", "task.max_operands=3"], "--bench arith has none"),
    (
        ["--model", "tiny", "--bench", "math", "--set", "steps=3"],
        "--set steps: bench eval takes task.FIELD=VALUE",
    ),
]

B = ["--budget", "trajectories=64"]
COMPARE = [
    (["--algos", "sao,grpx", *B], "unknown algorithm 'grpx'; did you mean 'grpo'?"),
    (["--algos", "sao,ppo:vap", *B], "unknown preset 'vap' for ppo; valid presets: vapo"),
    (["--algos", "sao,sao", *B], "--algos names the arm 'sao' twice"),
    (["--algos", "{file}.toml", *B], "--algos {file}.toml: file not found"),
    (
        ["--algos", "sao", "--budget", "steps=5"],
        "--budget 'steps=5': expected one of trajectories=N, tokens=N",
    ),
    (["--algos", "sao", "--budget", "tokens=0"], "--budget 'tokens=0': must be a positive number"),
    (["--algos", "sao", *B, "--eval-bench", "aith"], "unknown benchmark 'aith'; did you mean 'arith'?"),
    (["--algos", "sao", *B, "--eval-bench", "math"], "this run's task is arith (evaluate a math run's data"),
    (["--algos", "sao", *B, "--select", "best-on=arith"], "arith is also a reported benchmark"),
    (["--algos", "sao", *B, "--select", "last"], "--select 'last': expected 'final' or 'best-on=BENCH'"),
    (["--algos", "sao", *B, "--seeds", "0"], "--seeds must be >= 1, got 0"),
    (["--algos", "sao", *B, "--set", "seed=3"], "--set seed: set by bench compare itself"),
    (["--algos", "sao,grpo", *B, "--set", "critic_lr=1e-3"], "critic_lr: grpo has no critic"),
    (
        ["--algos", "grpo", *B, "--set", "trajectories_per_step=12"],
        "not a multiple of grpo's rollouts per prompt",
    ),
    (
        ["--algos", "sao", *B, "--storage", "postgresql://u:pw@127.0.0.1:1/x"],
        "--storage postgresql://u:***@127.0.0.1:1/x: cannot be used",
    ),
    (["--algos", "sao", *B, "--out", "{other}"], "holds a different comparison (bench compare --algos other"),
    (["--params-from-sweep", ",", *B], "--params-from-sweep: expected SWEEP_DIR or a comma list"),
    (["--params-from-sweep", "{file}", *B], "is not a sweep directory (no sweep.json)"),
    (
        ["--algos", "sao", "--budget", "trajectories=1e30"],
        "1e+30 is above the largest budget, 2**53 (~9.0e15)",
    ),
    (
        ["--algos", "sao", "--budget", "tokens=1e999"],
        # read as an exact decimal (compute-regime), 1e999 is a number, and far too large
        "--budget 'tokens=1e999': 1e+999 is above the largest budget, 2**53",
    ),
    (["--algos", "sao", *B, "--out", "{long}"], "{long}: file name too long"),
    (
        ["--algos", "sao", *B, "--out", "{badspec}"],
        "{badspec}/comparison.json: ends in the middle of a JSON value: it was cut short (a kill or a full "
        "disk while it was written); remove it and run the same bench compare command again",
    ),
    (["--algos", "sao", *B, "--out", "{badjournal}"], "{badjournal}/study.journal: line 3 of 9 is damaged"),
]

SWEEP = [
    (
        ["--algo", "sao", *B, "--space", "{space_typo}"],
        "--space: 'algo.eps_hihg' is not a parameter of sao (did you mean",
    ),
    (
        ["--algo", "sao", *B, "--space", "{space_bad}"],
        "search space algo.dis_eps_high: needs numbers low < high",
    ),
    (["--algo", "sao", *B, "--space", "{file}"], "--space {file}: invalid TOML"),
    (
        ["--algo", "sao", *B, "--objective", "eval/aith/avg_at_k"],
        "unknown benchmark 'aith' (did you mean eval/arith/avg_at_k?)",
    ),
    (
        ["--algo", "sao", *B, "--objective", "loss"],
        "--objective 'loss': expected eval/<bench>/avg_at_k or reward/final",
    ),
    (
        ["--algo", "sao", *B, "--pruner", "hyperband"],
        "--pruner hyperband on an evaluation objective needs its in-training curve",
    ),
    (
        ["--algo", "sao", *B, "--storage", "postgresql://u:pw@127.0.0.1:1/x"],
        "--storage postgresql://u:***@127.0.0.1:1/x: cannot be used",
    ),
    (
        ["--algo", "sao", "--algos", "grpo", *B],
        "give the algorithm to tune with --algo NAME, or several with --algos A,B",
    ),
    (["--algo", "sao"], "--budget is required"),
    (["--algo", "grpx", *B], "unknown algorithm 'grpx'; did you mean 'grpo'?"),
    (["--show", "{empty}"], "is not a sweep directory (no sweep.json)"),
    (["--algo", "sao", "--budget", "tokens=1e16"], "1e+16 is above the largest budget"),
    (["--algo", "sao", *B, "--out", "{long}"], "{long}/sweep.json: file name too long"),
    (["--show", "{badsweep}"], "{badsweep}/sweep.json: ends in the middle of a JSON value"),
    (
        ["--show", "{badsweepjournal}"],
        "{badsweepjournal}/study.journal: line 3 of 9 is damaged and records follow it (not a torn last "
        "append, which is repaired), so the study cannot be read; keep a copy of the file, keep only its "
        "first 2 lines (head -n 2)",
    ),
]

REPORT = [
    (["{empty}"], "neither a comparison directory (comparison.json) nor a run directory (config.json)"),
    (["{other}", "--format", "pdf"], "--format 'pdf': valid formats are md, csv, tex, html"),
    (["{other}", "--baseline", "nope"], "--baseline 'nope' is not an arm here; arms: sao"),
    ([], "bench report: give comparison, sweep or run directories (or --verdicts REFERENCE_DIR)"),
    (["--verdicts", "{file}"], "not a directory (the reference root, e.g. results/reference)"),
    (["--verdicts", "{empty}", "--readme", "{empty}/README.md"], "no such file"),
    (
        ["--verdicts", "{empty}", "--readme", "{file}"],
        "no <!-- verdicts:start --> ... <!-- verdicts:end --> block",
    ),
    (
        ["{badsummary}"],
        "{badsummary}/summary.json: ends in the middle of a JSON value: it was cut short (a kill or a full "
        "disk while it was written); remove it: the run then reads as unfinished",
    ),
    (
        ["{badrecords}"],
        "{badrecords}/evals/final/arith.jsonl: line 1 is not UTF-8 text (byte 0), so not JSON: it is damaged; "
        "remove arith.jsonl and arith.summary.json",
    ),
    (["{badspec}"], "{badspec}/comparison.json: ends in the middle of a JSON value"),
    (["{run}", "--out", "{long}"], "{long}: file name too long"),
]

V = ["--seed-sd", "2", "--seed-problem-sd", "10", "--sample-sd", "45", "--problem-sd", "8"]
POWER = [
    (["{empty}", "--diff", "0"], "--diff 0: give the difference to detect as a positive number of points"),
    (["--diff", "3"], "give a PILOT directory, or every variance: missing --seed-sd, --seed-problem-sd"),
    (["--diff", "3", *V], "without a PILOT, say the design to plan for: --problems N[,N] --samples K[,K]"),
    (["--diff", "3", *V, "--problems", "x", "--samples", "2"], "--problems 'x': give positive whole numbers"),
    (["{empty}", "--diff", "3", "--seed-sd", "2"], "give a PILOT or the variances (--seed-sd ...), not both"),
    (["{file}", "--diff", "3"], "no such directory (a comparison or report directory)"),
    (["{empty}", "--diff", "3"], "not a pilot: no comparison.json (a comparison), score_matrix.csv"),
    (["{empty}", "--diff", "3", "--power", "1"], "--power and --alpha must lie strictly between 0 and 1"),
]

PRETRAIN = [
    (["--task", "arit"], "did you mean 'arith'?"),
    (["--task", "math"], "task 'math' needs --set task.dataset=NAME_OR_PATH"),
    (["--task", "arith", "--set", "steps=3"], "bench pretrain --set takes only task.KEY=VALUE, got 'steps'"),
    (["--task", "arith", "--set", "task.nosuch=1"], "task.nosuch: unknown argument of task 'arith'"),
    (["--task", "arith", "--steps", "5"], "--steps other than the arith recipe's 1000 needs --out DIR"),
    (["--task", "arith", "--steps", "0", "--out", "{empty}/b"], "--steps must be >= 1"),
]

PLAN = [
    (["--model", "qwen3-5b"], "not a known shape and no config.json there; valid: tiny, smollm2, qwen3-0.6b"),
    (["--model", "{empty}"], "not a known shape and no config.json there"),
    (["--learner-gpus", "0"], "--learner-gpus must be a positive number, got 0"),
    (["--engine-memory-utilization", "1"], "--engine-memory-utilization must be in [0, 1)"),
    (["--algo", "grp"], "did you mean 'grpo'?"),
    (["--precision", "fp16"], "invalid choice: 'fp16'"),
]
CASES = [
    (command, *case)
    for command, table in (
        ("run", RUN),
        ("eval", EVAL),
        ("compare", COMPARE),
        ("sweep", SWEEP),
        ("report", REPORT),
        ("power", POWER),
        ("pretrain", PRETRAIN),
        ("plan", PLAN),
    )
    for case in table
]


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """The paths the table's placeholders stand for (module docstring)."""
    root = tmp_path_factory.mktemp("bad-input")
    (root / "file").write_text("not a directory")
    (root / "empty").mkdir()
    config = {"algo": "sao", "task": "arith", "seed": 0, "policy_lr": 1e-4, "trajectories_per_step": 64}
    for name in ("run", "locked"):
        RunDir.create(root / name, _full_config(config), {})
    RunDir(root / "locked").lock()  # held by this process until the module's tests end
    (root / "typo.yaml").write_text("algo:\n  dis_eps_hihg: 4.0\n")
    (root / "space_typo.toml").write_text('[params."algo.eps_hihg"]\ntype = "float"\nlow = 1.0\nhigh = 2.0\n')
    (root / "space_bad.toml").write_text(
        '[params."algo.dis_eps_high"]\ntype = "float"\nlow = 3.0\nhigh = 2.0\n'
    )
    other = root / "other"  # a comparison of other settings
    other.mkdir()
    spec = ComparisonSpec(
        task="arith",
        arms=(Arm("sao", "sao"),),
        seeds=(0,),
        budget=("trajectories", 8),
        eval=EvalPlan(("arith",)),
    )
    (other / "comparison.json").write_text(
        json.dumps({"fingerprint": "other", **spec.to_json(), "command": "bench compare --algos other"})
    )
    finished = root / "finished"
    finished.mkdir()
    (finished / "arith.jsonl").write_text("{}\n")
    (finished / "arith.summary.json").write_text(json.dumps({"benchmark": "arith", "settings": {"k": 99}}))
    damaged = _damaged_files(root, config)
    places = {name: str(root / name) for name in ("file", "empty", "run", "locked", "finished", "other")}
    yield {
        **places,
        **damaged,
        "space_typo": str(root / "space_typo.toml"),
        "space_bad": str(root / "space_bad.toml"),
        "long": str(root / ("x" * 300) / "out"),
        "typo_yaml": str(root / "typo.yaml"),
    }
    RunDir(root / "locked").unlock()


def _damaged_files(root: Path, config: dict) -> dict[str, str]:
    """The module docstring's damaged places."""
    from sweeps.queue import RunQueue, open_storage
    from sweeps.spec import save_spec
    from sweeps.sweep import SweepSpec

    badsummary = RunDir.create(root / "badsummary", _full_config(config), {}).path
    (badsummary / "summary.json").write_text('{\n  "outcome": "finished",\n  "stopped_by": "traj')
    badrecords = RunDir.create(root / "badrecords", _full_config(config), {}).path
    final = badrecords / "evals" / "final"
    final.mkdir(parents=True)
    (final / "arith.summary.json").write_text(
        json.dumps({"benchmark": "arith", "avg_at_k": 0.5, "k": 1, "n_problems": 1})
    )
    (final / "arith.jsonl").write_bytes(bytes(range(255, 0, -1)) * 4)
    badspec = root / "badspec"
    badspec.mkdir()
    (badspec / "comparison.json").write_text((root / "other" / "comparison.json").read_text()[:150])
    sweep = SweepSpec(arms=(Arm("sao", "sao"),), budget=("trajectories", 8), objective="reward/final")
    for name in ("badsweep", "badsweepjournal", "badjournal"):
        if name != "badjournal":
            save_spec(root / name, sweep, {})
        journal = root / name / "study.journal"
        journal.parent.mkdir(exist_ok=True)
        RunQueue(open_storage("", journal), "study").ensure(list("abcdefgh"))  # 9 records
        lines = journal.read_bytes().split(b"\n")
        lines[2] = lines[2][:17] + lines[3]  # a torn record, and the next append after it
        journal.write_bytes(b"\n".join(lines))
    spec_file = root / "badsweep" / "sweep.json"
    spec_file.write_text(spec_file.read_text()[:120])
    names = ("badsummary", "badrecords", "badspec", "badsweep", "badsweepjournal", "badjournal")
    return {name: str(root / name) for name in names}


def _full_config(overrides: dict) -> dict:
    """A complete resolved config, as `bench run` writes it to config.json."""
    from bench.config import build_config

    return build_config(overrides).to_dict()


@pytest.mark.parametrize("command, args, expected", CASES, ids=[f"{c[0]} {' '.join(c[1])}" for c in CASES])
def test_bad_input_is_one_line_exit_2_in_seconds(command, args, expected, places, tmp_path):
    args = [a.format(**places) for a in args]
    if command in ("run", "compare", "sweep") and "--resume" not in args and "--out" not in args:
        args += ["--out", str(tmp_path / "r")]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BENCH_CACHE_DIR": str(tmp_path / "cache")}  # empty: no base
    quiet = ["--no-progress"] if command in ("run", "eval") else []
    res = subprocess.run(
        [sys.executable, "-m", "bench.cli", command, *args, *quiet],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("bench: error: ") and "Traceback" not in res.stderr, (
        res.stderr
    )
    assert expected.format(**places) in lines[0]
    # before expensive work: no run dir, no base checkpoint
    assert not (tmp_path / "r").exists(), "a run dir was made before the input was checked"
    assert not (tmp_path / "cache").exists(), "a base checkpoint was made before the input was checked"


def test_a_run_dir_held_by_another_process_is_one_line_and_its_own_exit_code(places, tmp_path):
    """Not a bad input but a duplicate start: the same one line, and exit code BUSY_EXIT_CODE so
    that comparison and sweep workers tell it from a failure without reading the message."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BENCH_CACHE_DIR": str(tmp_path / "cache")}
    res = subprocess.run(
        [sys.executable, "-m", "bench.cli", "run", "--resume", places["locked"], "--no-progress"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    assert res.returncode == BUSY_EXIT_CODE, (res.stdout, res.stderr)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("bench: error: ") and "is in use by pid" in lines[0]
