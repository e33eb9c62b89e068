"""Every kind of report `bench report` makes, on synthetic runs: one run, several runs, one and
several comparisons, a sweep. Each opens with a title naming what it reports, leaves out the
tables it has no rows for, and (with differences) states its bottom line; a difference that is one
of the paper's claims is judged exactly as the verdict table judges it. And the LaTeX tables are
booktabs tables through pandas' Styler, numbers right-aligned, intervals in one cell, best bold."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

import pandas as pd

from results.report import write_report
from results.report.evidence import Reference
from results.report.render import to_latex, to_markdown
from results.report.verdicts import assess, verdict_text

from .synthetic_runs import write_comparison

N_BOOT = 200


def _tables(paths) -> set[str]:
    return {p.stem for p in paths.files if p.suffix == ".csv"}


def test_a_single_run_reports_itself_without_a_comparison_s_tables(tmp_path):
    out = write_comparison(tmp_path / "cmp", arms=("sao",), seeds=(0,), steps=6, final_eval=(8, 2))
    (out / "runs" / "sao-s0" / "config.json").write_text(
        json.dumps({"algo": "sao", "seed": 0, "task": "arith", "max_trajectories": 96})
    )
    paths = write_report([out / "runs" / "sao-s0"], tmp_path / "report", n_boot=N_BOOT)
    text = paths.index_html.read_text()
    assert "<title>arith: sao, run sao-s0 at trajectories=96</title>" in text
    assert {"differences", "aggregate", "tuning"}.isdisjoint(_tables(paths))  # one arm, one seed, no spec
    assert {"scores", "per_seed", "runs", "budget"} <= _tables(paths)
    assert "Differences vs" not in text and "Bottom line" not in text and "1 arms" not in text
    assert "Learning curves" in text


def test_a_report_written_over_another_leaves_none_of_its_tables_or_figures_behind(tmp_path):
    # two arms then one: the differences table and the forest plot of the first must go
    two = write_comparison(
        tmp_path / "two", arms=("sao", "grpo"), seeds=(0, 1, 2), steps=6, final_eval=(8, 2)
    )
    one = write_comparison(tmp_path / "one", arms=("sao",), seeds=(0,), steps=6, final_eval=(8, 2))
    out = tmp_path / "report"
    first = write_report([two], out, n_boot=N_BOOT)
    assert "differences" in _tables(first) and (out / "figures" / "forest_differences.png").exists()
    (out / "notes.txt").write_text("mine")  # not the report's: kept
    second = write_report([one], out, n_boot=N_BOOT)
    written = {p.name for p in second.files}
    assert (
        not (out / "tables" / "differences.csv").exists()
        and not (out / "figures" / "forest_differences.png").exists()
    )
    assert {p.name for p in (out / "tables").iterdir()} <= written  # every table there is this report's
    assert (out / "notes.txt").read_text() == "mine"


def test_several_runs_are_arms_by_their_algorithm_and_compared(tmp_path):
    out = write_comparison(tmp_path / "cmp", arms=("sao", "ppo"), seeds=(0, 1), steps=6, final_eval=(8, 2))
    runs = sorted((out / "runs").iterdir())
    paths = write_report(runs, tmp_path / "report", n_boot=N_BOOT)
    text = paths.index_html.read_text()
    assert "<h1>arith: ppo, sao at the budget each run was configured with (2 seeds per arm)</h1>" in text
    assert "differences" in _tables(paths) and "Bottom line" in text
    assert "sao vs ppo:</span> sao \u2212 ppo on arith:" in text  # not a claim of the paper


def test_runs_outside_the_git_tree_of_the_report_are_named_not_linked(tmp_path):
    out = write_comparison(tmp_path / "cmp", arms=("sao", "ppo"), seeds=(0,), steps=6, final_eval=(8, 2))
    beside = write_report([out], tmp_path / "report", n_boot=N_BOOT).index_html.read_text()
    assert 'href="../cmp/runs/sao-s0/"' in beside  # no git tree: every run links to its directory
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)  # a reference report committed from runs kept elsewhere
    committed = write_report([out], repo / "results" / "x", n_boot=N_BOOT).index_html.read_text()
    assert "cmp/runs" not in committed and ">sao-s0<" in committed  # a link would resolve nowhere else


def test_several_comparisons_report_every_arm_under_one_title(tmp_path):
    a = write_comparison(tmp_path / "a", arms=("sao", "grpo"), seeds=(0, 1), steps=6, final_eval=(8, 2))
    b = write_comparison(tmp_path / "b", arms=("ppo",), seeds=(0, 1), steps=6, final_eval=(8, 2))
    paths = write_report([a, b], tmp_path / "report", n_boot=N_BOOT)
    text = paths.index_html.read_text()
    assert "<h1>arith: sao, grpo, ppo at trajectories=96 (2 seeds per arm)</h1>" in text
    commands = json.loads((tmp_path / "report" / "provenance.json").read_text())["commands"]
    assert commands[-1] == f"bench report {a} {b} --out {tmp_path / 'report'}"


def _sweep(path: Path) -> Path:
    """A sweep directory as `bench sweep` leaves it: sweep.json and the summary `--show` writes."""
    path.mkdir()
    spec = {
        "arms": [{"name": "sao", "algo": "sao"}],
        "task": "arith",
        "seeds": [0],
        "budget": {"kind": "trajectories", "amount": 128},
        "trials": 3,
        "objective": "eval/arith-val/avg_at_k",
        "direction": "maximize",
        "pruner": "hyperband",
        "sampler": "tpe",
        "storage": "",
        "command": "bench sweep --algo sao --trials 3 --budget trajectories=128",
        "arm_spaces": {
            "sao": {
                "params": [{"name": "policy_lr", "kind": "float", "low": 1e-5, "high": 1e-3, "log": True}]
            }
        },
    }
    (path / "sweep.json").write_text(json.dumps(spec))
    trials = [
        {
            "trial": 0,
            "slot": "trial-000",
            "state": "COMPLETE",
            "value": 0.5,
            "intermediate": [[1, 0.3], [2, 0.45]],
        },
        {"trial": 1, "slot": "trial-001", "state": "PRUNED", "value": None, "intermediate": [[1, 0.1]]},
        {
            "trial": 2,
            "slot": "trial-002",
            "state": "COMPLETE",
            "value": 0.6,
            "intermediate": [[1, 0.4], [2, 0.55]],
        },
    ]
    best = {"trial": 2, "value": 0.6, "params": {"policy_lr": 2e-4}, "detail": ""}
    arm = {
        "study": "sweep-sao",
        "direction": "maximize",
        "counts": {"COMPLETE": 2, "PRUNED": 1},
        "best": best,
        "top": [best, {"trial": 0, "value": 0.5, "params": {"policy_lr": 1e-4}, "detail": ""}],
        "not_completed": [],
        "importances": {"policy_lr": 1.0},
        "trials": trials,
    }
    (path / "sweep_summary.json").write_text(json.dumps({"sweep": "sweep of sao", "arms": {"sao": arm}}))
    return path


def test_a_sweep_reports_its_search_with_its_command_and_the_dashboard(tmp_path):
    sweep = _sweep(tmp_path / "sweep")
    paths = write_report([sweep], tmp_path / "report", n_boot=N_BOOT)
    text = paths.index_html.read_text()
    assert "<h1>Sweep of sao on arith: 3 trials per arm at trajectories=128 x 1 seed</h1>" in text
    assert (
        "best trial 2: eval/arith-val/avg_at_k = 60%" in text
        and "paper&#x27;s defaults (trial 0): 50%" in text
    )
    for key in ("sweep_sao_history", "sweep_sao_rungs", "sweep_sao_importances"):
        assert (tmp_path / "report" / "figures" / f"{key}.pdf").exists() and f'id="{key}"' in text
    provenance = json.loads((tmp_path / "report" / "provenance.json").read_text())
    assert provenance["commands"][:2] == [
        "bench sweep --algo sao --trials 3 --budget trajectories=128",
        f"bench sweep --show {sweep}",
    ]
    assert provenance["commands"][2] == f"optuna-dashboard --host 127.0.0.1 {sweep / 'study.journal'}"
    assert provenance["commands"][3] == f"bench report {sweep} --out {tmp_path / 'report'}"
    assert provenance["sweeps"][str(sweep)]["pruner"] == "hyperband"
    top = pd.read_csv(tmp_path / "report" / "tables" / "sweep_sao_top.csv")
    assert top["objective (%)"].tolist() == [60.0, 50.0]  # % like every other score


def test_the_bottom_line_judges_the_papers_claims_as_the_verdict_table(tmp_path):
    arms = ("sao", "grpo", "grpo+dis", "sao:dis-only")
    out = write_comparison(
        tmp_path / "cmp", arms=arms, seeds=(0, 1, 2), steps=6, timeline=False, final_eval=(30, 2)
    )
    root = tmp_path / "reference"
    tuned = write_report([out], root / "arith-tuned", n_boot=N_BOOT).index_html.read_text()
    plain = write_report([out], tmp_path / "report", n_boot=N_BOOT).index_html.read_text()
    verdicts = [v for v in assess(root) if v.claim.primary]
    assert len(verdicts) == 4 and all(v.p_adjusted is not None for v in verdicts)  # the primary family
    for v in verdicts:
        assert f"{escape(v.claim.label)}:</span>" in tuned
        assert escape(verdict_text(v)) in tuned  # the same finding with Holm's p
        assert f"bootstrap {100 * (1 - v.level):.4g}% CI" in tuned  # at the Holm level
    assert "Holm p" not in plain and "(exploratory)" in plain  # elsewhere the same claims are exploratory
    assert Reference(root / "arith-tuned").evidence(verdicts[0].claim) is not None


def test_latex_tables_are_booktabs_with_right_aligned_numbers_intervals_in_one_cell_and_the_best_bold():
    scores = pd.DataFrame(
        {
            "arm": ["sao", "grpo"],
            "benchmark": ["arith", "arith"],
            "mean": [0.691, 0.557],
            "ci_low": [0.632, 0.49],
            "ci_high": [0.747, 0.62],
            "n_seeds": [3, 3],
        }
    )
    tex = to_latex(scores, "Final scores")
    assert (
        "\\begin{tabular}{llrr}" in tex
        and "\\toprule" in tex
        and "\\midrule" in tex
        and "\\bottomrule" in tex
    )
    assert "sao & arith & \\textbf{69.1 [63.2, 74.7]} & 3 \\\\" in tex
    assert "grpo & arith & 55.7 [49.0, 62.0] & 3 \\\\" in tex
    assert "| sao | arith | **69.1 [63.2, 74.7]** | 3 |" in to_markdown(scores)
    diffs = pd.DataFrame(
        {
            "arm": ["sao"],
            "baseline": ["grpo"],
            "benchmark": ["arith"],
            "diff": [0.134],
            "ci_low": [0.07],
            "ci_high": [0.19],
            "welch_low": [0.05],
            "welch_high": [0.21],
        }
    )
    tex = to_latex(diffs, "Differences")
    assert (
        "\\begin{tabular}{lllrr}" in tex
        and "sao & grpo & arith & +13.4 [+7.0, +19.0] & [+5.0, +21.0] \\\\" in tex
    )
    assert "\\textbf" not in tex  # differences have no "best"


def test_the_rung_plot_thickens_the_best_trial_in_the_studys_direction(tmp_path, monkeypatch):
    from results.report import sweep as sweep_module

    drawn = []
    real_save = sweep_module.save
    monkeypatch.setattr(
        sweep_module, "save", lambda fig, *a, **k: drawn.append(fig) or real_save(fig, *a, **k)
    )
    trials = [
        {"trial": 0, "state": "COMPLETE", "value": 0.2, "intermediate": [[1, 0.3], [2, 0.2]]},
        {"trial": 1, "state": "COMPLETE", "value": 0.6, "intermediate": [[1, 0.5], [2, 0.6]]},
    ]
    for direction, best in (("maximize", 1), ("minimize", 0)):
        drawn.clear()
        sweep_module.rungs_figure("sao", trials, direction, tmp_path / direction, "sweep_sao", True)
        (ax,) = drawn[0].axes
        assert f"best (trial {best})" in [line.get_label() for line in ax.get_lines()]
        assert all(float(t).is_integer() for t in ax.get_xticks())  # reports are counted
