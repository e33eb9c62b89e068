"""The comparison report's tables on a hand-made comparison whose numbers are known: scores
per arm, paired differences, a failed run kept, budgets, the paper's layouts, and the files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.seed_stats import welch_interval
from results.comparison import load
from results.report import ReportError, write_report
from results.report import tables as T
from results.report.differences import differences
from results.report.drift import DRIFT_SCORE, drift_matrices, drift_phase_table, drift_segments
from results.report.render import to_latex, to_markdown
from results.report.score_matrix import cell_counts, matrices_from_counts

# arm -> seed -> per-problem correct samples (k = 2) on problems p0..p3
CORRECT = {
    "sao": {0: [[1, 1], [1, 0], [0, 0], [1, 1]], 1: [[1, 1], [1, 1], [0, 1], [1, 0]]},
    "grpo": {0: [[1, 0], [0, 0], [0, 0], [1, 1]], 1: [[1, 1], [0, 1], [0, 0], [0, 0]]},
}


def _run(out: Path, arm: str, seed: int, correct, state: str = "finished") -> None:
    run = out / "runs" / f"{arm}-s{seed}"
    (out / "status").mkdir(parents=True, exist_ok=True)
    (out / "status" / f"{arm}-s{seed}.json").write_text(
        json.dumps({"state": state, "attempts": 1, "detail": "x"})
    )
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"algo": arm, "seed": seed}))
    (run / "env.json").write_text(json.dumps({"git_commit": "abc123"}))
    steps = [
        {
            "step": s,
            "budget/trajectories": 64.0 * s,
            "budget/generated_tokens": 1000.0 * s,
            "time/step_s": 2.0 + seed * s,  # seed 0: 2, 2 s; seed 1: 3, 4 s
            "memory/learner_peak_rss_gib": 0.5 + 0.5 * s,
            "memory/engine_peak_rss_gib": 0.5,
        }
        for s in (1, 2)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))
    if correct is None:
        return
    (run / "summary.json").write_text(
        json.dumps(
            {
                "stopped_by": "trajectories",
                "wall_s": 10.0,
                "consumption": {
                    "trajectories": 128,
                    "generated_tokens": 2000,
                    "elapsed_s": 10.0,
                    "learner_s": 4.0,
                    "critic_s": 1.0 if arm == "sao" else 0.0,
                    # model FLOPs (0: not counted, as in runs from before they were)
                    "flops": {"sao": 3 * 10**12, "grpo": 10**12}.get(arm, 0),
                    "critic_flops": 10**12 if arm == "sao" else 0,
                },
            }
        )
    )
    final = run / "evals" / "final"
    final.mkdir(parents=True)
    records = [
        {"problem_id": f"p{i}", "sample_index": j, "correct": bool(c)}
        for i, row in enumerate(correct)
        for j, c in enumerate(row)
    ]
    (final / "arith.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    avg = sum(sum(r) / len(r) for r in correct) / len(correct)
    (final / "arith.summary.json").write_text(
        json.dumps(
            {
                "benchmark": "arith",
                "avg_at_k": avg,
                "k": 2,
                "n_problems": 4,
                "version": 1,
                "provenance": {"data_hash": "d", "sampling": {"k": 2}, "seed": 7},  # as `summarize` writes it
            }
        )
    )


@pytest.fixture
def comparison_dir(tmp_path) -> Path:
    out = tmp_path / "cmp"
    out.mkdir()
    spec = {
        "task": "arith",
        "arms": [{"name": "sao"}, {"name": "grpo"}, {"name": "ppo"}],
        "seeds": [0, 1],
        "budget": {"kind": "trajectories", "amount": 128},
        "eval": {"benchmarks": ["arith"]},
        "command": "bench compare --algos sao,grpo,ppo",
    }
    (out / "comparison.json").write_text(json.dumps(spec))
    for arm, seeds in CORRECT.items():
        for seed, correct in seeds.items():
            _run(out, arm, seed, correct)
    _run(out, "ppo", 0, None, state="failed")  # ppo-s1 never started: pending
    return out


def test_scores_are_means_over_seeds_and_problems(comparison_dir):
    comparison = load([comparison_dir])
    matrices = T.score_matrices(comparison)
    assert matrices[("sao", "arith")].to_numpy().tolist() == [[1, 0.5, 0, 1], [1, 1, 0.5, 0.5]]
    scores = T.final_scores(
        matrices, {("sao", "arith"): 2, ("grpo", "arith"): 2}, comparison.arms, n_boot=2000
    )
    by_arm = scores.set_index("arm")
    assert by_arm.loc["sao", "mean"] == pytest.approx(5.5 / 8)
    assert by_arm.loc["grpo", "mean"] == pytest.approx(3 / 8)
    assert (by_arm.loc["sao", "n_seeds"], by_arm.loc["sao", "n_problems"], by_arm.loc["sao", "k"]) == (
        2,
        4,
        2,
    )
    assert by_arm.loc["sao", "ci_low"] <= by_arm.loc["sao", "mean"] <= by_arm.loc["sao", "ci_high"]
    assert list(scores["arm"]) == ["sao", "grpo"]  # the spec's order; ppo has no evaluation


def _differences(comparison, baseline, pairs=()):
    matrices, ks = matrices_from_counts(cell_counts(comparison))
    return differences(
        matrices, ks, comparison.arms, comparison.benchmarks, baseline, n_boot=2000, pairs=pairs
    )


def test_differences_pair_problems_and_give_two_intervals(comparison_dir):
    comparison = load([comparison_dir])
    row = _differences(comparison, "grpo").set_index("arm").loc["sao"]
    assert row["diff"] == pytest.approx(2.5 / 8) and row["n_seeds"] == 2 and row["n_problems"] == 4
    assert row["n_seeds_baseline"] == 2 and row["n_boot"] == 2000
    assert row["verdict"] in ("better", "not distinguishable") and 0 < row["p_value"] <= 1
    assert row["poi"] == pytest.approx(1.0)  # each sao seed beats each grpo seed
    # the seed-level interval: Welch over the seed means (sao 2.5/4 and 3/4; grpo 1.5/4 twice)
    welch = welch_interval([0.625, 0.75], [0.375, 0.375])
    assert (row["welch_low"], row["welch_high"], row["welch_p"]) == pytest.approx(
        (welch["ci_low"], welch["ci_high"], welch["p_value"])
    )
    assert row["welch_low"] < 0 < row["welch_high"] and row["verdict"] == "not distinguishable"
    assert row["mde"] > row["diff"]  # two seeds cannot show this difference reliably


def test_the_claims_pairs_are_added_beside_the_baselines(comparison_dir):
    # with sao as the baseline, the claim "SAO > GRPO" (sao minus grpo) is still computed
    comparison = load([comparison_dir])
    diffs = _differences(comparison, "sao", pairs={("sao", "grpo"), ("sao", "dapo")})
    assert [(r.arm, r.baseline) for r in diffs.itertuples()] == [
        ("sao", "grpo"),
        ("grpo", "sao"),
    ]  # no dapo here
    pair = diffs[diffs["arm"] == "sao"].iloc[0]
    assert pair["diff"] == pytest.approx(2.5 / 8)  # the same paired difference, the other way round


def test_failed_and_pending_runs_are_kept_in_the_tables(comparison_dir):
    comparison = load([comparison_dir])
    states = dict(zip(comparison.runs["run"], comparison.runs["state"]))
    assert states["ppo-s0"] == "failed" and states["ppo-s1"] == "pending"
    per_seed = T.per_seed_scores(comparison)
    assert per_seed[per_seed["arm"] == "ppo"]["state"].tolist() == ["failed", "pending"]
    budget = T.budget_table(comparison).set_index("arm")
    assert (
        budget.loc["sao", "trajectories"] == "128"
        and budget.loc["sao", "critic share of learner time"] == "25%"
    )
    assert budget.loc["ppo", "states"] == "1 failed, 1 pending"
    assert (budget.loc["sao", "model FLOPs"], budget.loc["grpo", "model FLOPs"]) == ("3e+12", "1e+12")
    assert (
        budget.loc["sao", "critic share of FLOPs"] == "33%"
        and budget.loc["grpo", "critic share of FLOPs"] == "0%"
    )
    assert budget.loc["ppo", "model FLOPs"] == "not counted" and budget.loc["sao", "updates per batch"] == "1"
    # cost per arm: the median step of each run (seeds 0 and 1: 2 and 3.5 s), then their mean and range
    assert budget.loc["sao", "s per step (median)"] == "2.8 [2.0, 3.5]"
    assert (budget.loc["sao", "learner peak GiB"], budget.loc["sao", "engine peak GiB"]) == ("1.5", "0.5")
    assert (
        budget.loc["ppo", "s per step (median)"] == "2.0"
    )  # its failed run's two steps; the pending one none


def test_every_run_says_how_it_ended_as_it_recorded_it(comparison_dir, tmp_path):
    """The runs table's outcome and stopped_by are the run's own typed record (summary.json),
    for comparison runs and plain run directories alike; summaries written before outcomes
    were recorded are finished runs'."""
    runs = load([comparison_dir]).runs.set_index("run")
    assert (runs.loc["sao-s0", "outcome"], runs.loc["sao-s0", "stopped_by"]) == ("finished", "trajectories")
    assert pd.isna(runs.loc["ppo-s0", "outcome"])  # never trained
    assert "outcome" in T.runs_table(load([comparison_dir])).columns
    plain = []
    for name, summary in (
        ("diverged", {"outcome": "non-finite", "detail": "3 consecutive non-finite losses", "pid": 1}),
        ("legacy", {"stopped_by": "minutes"}),
        ("fresh", None),
    ):
        run = tmp_path / name
        run.mkdir()
        (run / "config.json").write_text(json.dumps({"algo": "sao", "seed": 0, "task": "arith"}))
        if summary is not None:
            (run / "summary.json").write_text(json.dumps(summary))
        plain.append(run)
    rows = load(plain).runs.set_index("run")
    assert rows.loc["diverged", ["state", "outcome", "detail"]].tolist() == [
        "non-finite",
        "non-finite",
        "3 consecutive non-finite losses",
    ]
    assert rows.loc["legacy", ["state", "stopped_by"]].tolist() == ["finished", "minutes"]
    assert rows.loc["fresh", "state"] == "unfinished"


def test_the_paper_layouts_put_its_numbers_beside_ours(comparison_dir):
    comparison = load([comparison_dir])
    matrices, ks = matrices_from_counts(cell_counts(comparison))
    scores = T.final_scores(matrices, ks, comparison.arms, n_boot=500)
    tables = dict(T.paper_tables(scores))
    table1 = tables["Table 1: math with a Python tool (Pass@1, %)"].set_index("row")
    assert table1.loc["SAO", "AIME2025 (paper, GLM/Qwen3 scale)"] == 97.3
    assert table1.loc["SAO", "arith (this harness)"] == "68.8"
    assert table1.loc["GRPO + DIS", "arith (this harness)"] == "-"  # no grpo+dis arm here
    assert not any(title.startswith(("Table 2", "Tables 3-4")) for title in tables)  # only SAO's row here


def test_a_paper_table_shows_only_benchmarks_of_its_kind():
    def scores(rows):
        frame = pd.DataFrame(rows, columns=["arm", "benchmark", "mean"])
        return frame.assign(n_seeds=3, ci_low=frame["mean"], ci_high=frame["mean"])

    swe = dict(T.paper_tables(scores([("sao", "swe-synth", 0.197), ("grpo+dis", "swe-synth", 0.188)])))
    assert list(swe) == ["Table 2: SWE-Bench Verified (resolved, %)"]  # no swe-synth beside AIME2025
    assert (
        swe["Table 2: SWE-Bench Verified (resolved, %)"]
        .set_index("row")
        .loc["+SAO", "swe-synth (this harness)"]
        == "19.7"
    )
    both = scores(
        [
            ("sao", "arith", 0.7),
            ("grpo", "arith", 0.5),
            ("sao", "swe-synth", 0.2),
            ("grpo+dis", "swe-synth", 0.1),
        ]
    )
    tables = {title: df for title, df in T.paper_tables(both)}
    table1 = tables["Table 1: math with a Python tool (Pass@1, %)"]
    assert "arith (this harness)" in table1 and "swe-synth (this harness)" not in table1
    assert list(tables["Table 2: SWE-Bench Verified (resolved, %)"].columns)[-1] == "swe-synth (this harness)"


def test_markdown_and_latex_escape_their_special_characters():
    df = pd.DataFrame([{"arm": "a|b", "mean": 0.5, "note": "50% of x_y"}])
    assert "| a\\|b | 50.0 | 50% of x_y |" in to_markdown(df)
    assert r"50\% of x\_y" in to_latex(df, "c") and r"\toprule" in to_latex(df, "c")


def test_the_report_writes_every_table_in_every_format(comparison_dir, tmp_path):
    paths = write_report([comparison_dir], tmp_path / "report", formats=["md", "csv", "tex"], n_boot=500)
    names = {p.name for p in paths.files}
    for table in ("scores", "differences", "per_seed", "budget", "runs", "tuning"):
        assert {f"{table}.md", f"{table}.csv", f"{table}.tex"} <= names
    assert "vs grpo" in paths.table_text and "budget trajectories=128" in paths.table_text
    provenance = json.loads((tmp_path / "report" / "provenance.json").read_text())
    assert (
        provenance["commits"] == ["abc123"]
        and provenance["commands"][0] == "bench compare --algos sao,grpo,ppo"
    )
    assert provenance["benchmarks"][0]["eval_seeds"] == [7]  # read where the eval summary keeps it
    assert "score_matrix.csv" in names
    with pytest.raises(ReportError, match="--baseline 'dapo' is not an arm here; arms: sao, grpo, ppo"):
        write_report([comparison_dir], tmp_path / "r2", baseline="dapo", formats=["md"])


def test_the_tuning_table_says_how_each_arm_was_chosen(comparison_dir, tmp_path):
    by_arm = T.tuning_table(load([comparison_dir])).set_index("arm")
    assert set(by_arm["tuning"]) == {"shared defaults"}  # no --params-from-sweep

    spec = json.loads((comparison_dir / "comparison.json").read_text())
    spec["tuning"] = {
        "sweep": "sweeps/a, sweeps/b",
        "trials_per_arm": 20,
        "budget": ["trajectories", 12800],
        "seeds": [0],
        "objective": "eval/arith-val/avg_at_k",
        "best": {
            "sao": {"trial": 2, "value": 0.6675, "params": {"policy_lr": 3.1e-4, "algo.k": 2}},
            "grpo": {"trial": 7, "value": 0.61, "params": {"policy_lr": 1e-4}},
        },
    }
    (comparison_dir / "comparison.json").write_text(json.dumps(spec))
    lone = tmp_path / "lone"  # a run directory given alone has no comparison to say how it was tuned
    _run(lone, "dapo", 0, CORRECT["sao"][0])
    (lone / "runs" / "dapo-s0" / "config.json").write_text(
        json.dumps({"algo": "dapo", "seed": 0, "task": "arith"})
    )
    by_arm = T.tuning_table(load([comparison_dir, lone / "runs" / "dapo-s0"])).set_index("arm")
    sao = by_arm.loc["sao"]
    assert sao["tuning"] == "20 trials x trajectories=12800" and sao["best trial"] == 2
    assert sao["tuned on"] == "seeds 0; sweeps/a, sweeps/b"
    assert sao["objective"] == "eval/arith-val/avg_at_k = 0.6675"
    assert sao["parameters"] == "algo.k=2, policy_lr=0.00031"
    assert by_arm.loc["ppo", "best trial"] == "-"  # an arm the sweeps had no trial for
    assert by_arm.loc["dapo", "tuning"].startswith("as each run was configured")


def test_the_drift_table_averages_each_phase_stretch_over_seeds(tmp_path):
    styles = {
        0: [[0.2, 0.4, 0.6, 0.8], [0.1, 0.3, 0.5, 0.7]],
        1: [[0.4, 0.4, 0.4, 0.4], [0.3, 0.3, 0.5, 0.5]],
    }
    dirs = []
    for seed, phases in styles.items():
        run = tmp_path / f"sao-s{seed}"
        run.mkdir()
        (run / "config.json").write_text(json.dumps({"algo": "sao", "seed": seed, "task": "drift"}))
        rows = [
            {
                "step": 4 * phase + i + 1,
                "drift/phase": float(phase),
                "reward/style": style,
                "reward/mean": style / 2,
            }
            for phase, values in enumerate(phases)
            for i, style in enumerate(values)
        ]
        rows.append({"step": 8, "eval/arith/avg_at_k": 0.5})  # an eval-only line is no step of a phase
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        dirs.append(run)
    table = drift_phase_table(drift_segments(load(dirs), edge=2))
    assert table["stretch"].tolist() == [1, 2] and table["rule"].tolist() == [0, 1]
    assert table["steps"].tolist() == ["1-4", "5-8"] and table["seeds"].tolist() == [2, 2]
    assert table["label share first"].tolist() == pytest.approx(
        [0.35, 0.25]
    )  # (0.3 + 0.4) / 2, (0.2 + 0.3) / 2
    assert table["label share last"].tolist() == pytest.approx(
        [0.55, 0.55]
    )  # (0.7 + 0.4) / 2, (0.6 + 0.5) / 2
    assert table["reward last"].tolist() == pytest.approx([0.275, 0.275])
    # the stretches after the first switch
    matrix = drift_matrices(drift_segments(load(dirs)))[("sao", DRIFT_SCORE)]
    assert matrix.columns.tolist() == ["stretch-2"] and matrix["stretch-2"].tolist() == pytest.approx(
        [0.4, 0.4]
    )
    (dirs[0] / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward/mean": 0.5}) + "\n")
    assert drift_phase_table(drift_segments(load([dirs[0]]))).empty  # not a drifting task: no table


def test_an_arms_file_s_own_settings_are_stated_as_such(comparison_dir):
    # e.g. a sweep's best parameters carried over in an arms file (results/specs/table1-tuned.toml)
    copy = comparison_dir
    spec = json.loads((copy / "comparison.json").read_text())
    for arm in spec["arms"]:
        if arm["name"] == "sao":
            arm.update(algo_args={"dis_eps_high": 1.9354506}, run_args={"policy_lr": 8.643e-05})
    (copy / "comparison.json").write_text(json.dumps(spec))
    by_arm = T.tuning_table(load([copy])).set_index("arm")
    assert by_arm.loc["sao", "tuning"] == "the arms file's settings"
    assert by_arm.loc["sao", "parameters"] == "algo.dis_eps_high=1.94, policy_lr=8.64e-05"
    assert by_arm.loc["grpo", "tuning"] == "shared defaults"


def test_the_report_of_such_a_comparison_says_the_run_is_gone_instead_of_leaving_it_out(tmp_path):
    import shutil

    from tests.unit.results.synthetic_runs import write_comparison

    out = write_comparison(tmp_path / "cmp", arms=("sao",), seeds=(0, 1), final_eval=(10, 2))
    shutil.rmtree(out / "runs" / "sao-s1")
    runs = load([out]).runs.set_index("run")
    assert runs.loc["sao-s0", "state"] == "finished"
    assert runs.loc["sao-s1", "state"] == "failed"
    assert "is gone" in runs.loc["sao-s1", "detail"]
