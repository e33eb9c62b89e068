"""`results.report` figures: each writes a PNG and an SVG when the runs have its data, and
nothing (without an error) when they do not."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from results.comparison import load
from results.report.figures import final_scores_figure, write_figures
from results.report.figures_runs import rollout_timeline, staleness_histogram, timeline_frame
from results.report.figures_training import (
    clip_ratio,
    critic_figures,
    drift_figures,
    eval_curves,
    length_figure,
)
from results.report.plotting import band_by_step, band_on_grid
from results.report.stability import survival_figure

from .synthetic_runs import final_scores_frame

FUNCTIONS = {
    eval_curves: ["fig3_eval_vs_trajectories_arith", "fig3_eval_vs_time_arith"],
    critic_figures: ["fig4a_critic_explained_variance", "fig4b_critic_grad_norm"],
    clip_ratio: ["fig4c_clip_ratio"],
    drift_figures: ["fig5a_drift_reward", "fig5b_drift_label_share"],
    length_figure: ["length_truncation"],
    staleness_histogram: ["staleness_histogram"],
    rollout_timeline: ["fig2_rollout_timeline"],
    survival_figure: ["stability_survival"],  # issue 36: runs not collapsed by step
}


def _assert_written(figure) -> None:
    assert figure.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.png.stat().st_size > 2000
    assert "<svg" in figure.svg.read_text()[:2000]
    assert figure.caption and figure.title


@pytest.mark.parametrize("make", list(FUNCTIONS), ids=lambda f: f.__name__)
def test_each_figure_writes_png_and_svg_when_the_runs_have_its_data(make, synthetic_dirs, tmp_path):
    figures = make(load(synthetic_dirs), tmp_path)
    assert [f.key for f in figures] == FUNCTIONS[make]
    for figure in figures:
        _assert_written(figure)
        assert figure.png.parent == tmp_path and figure.png.stem == figure.key == figure.svg.stem


# the survival figure needs only the reward the bare runs log: it is drawn for them
@pytest.mark.parametrize("make", [f for f in FUNCTIONS if f is not survival_figure], ids=lambda f: f.__name__)
def test_each_figure_returns_nothing_when_the_runs_lack_its_data(make, bare_dir, tmp_path):
    figures = make(load([bare_dir]), tmp_path / "figs")
    assert figures == [] and not (tmp_path / "figs").exists()


def test_the_survival_figure_needs_runs_that_trained(tmp_path):
    out = tmp_path / "cmp"
    out.mkdir()
    (out / "comparison.json").write_text(
        json.dumps({"arms": [{"name": "grpo"}], "seeds": [0], "task": "arith"})
    )
    assert survival_figure(load([out]), tmp_path / "figs") == [] and not (tmp_path / "figs").exists()


def test_without_a_timeline_the_staleness_histogram_falls_back_to_the_per_step_means(tmp_path):
    from .synthetic_runs import write_comparison

    out = write_comparison(tmp_path / "cmp", arms=("grpo",), seeds=(0,), steps=6, timeline=False)
    (figure,) = staleness_histogram(load([out]), tmp_path / "figs")
    _assert_written(figure)
    assert "staleness/mean" in figure.caption


def test_a_comparison_with_no_run_started_gives_no_figure_and_no_error(tmp_path):
    (tmp_path / "comparison.json").write_text(
        json.dumps({"arms": [{"name": "sao"}], "seeds": [0], "eval": {}})
    )
    assert write_figures(load([tmp_path]), tmp_path / "figs", final_scores=None) == []


def test_final_scores_figure_draws_the_tables_frame_and_skips_a_missing_or_malformed_one(tmp_path):
    (figure,) = final_scores_figure(final_scores_frame(), tmp_path, arms=["sao", "grpo", "ppo"])
    _assert_written(figure)
    assert figure.key == "fig1_final_scores" and figure.paper_ref == "Fig. 1"
    assert "95% confidence interval" in figure.caption and "n = 2 seeds" in figure.caption
    one_seed = final_scores_frame().assign(ci_low=np.nan, ci_high=np.nan).drop(columns="n")
    assert len(final_scores_figure(one_seed, tmp_path / "one")) == 1
    assert final_scores_figure(None, tmp_path) == []
    assert final_scores_figure(final_scores_frame().iloc[:0], tmp_path) == []
    assert final_scores_figure(final_scores_frame().drop(columns="ci_high"), tmp_path) == []


def test_write_figures_gives_every_figure_in_paper_order_with_captions_naming_band_and_seeds(
    synthetic_dirs, tmp_path
):
    figures = write_figures(load(synthetic_dirs), tmp_path, final_scores_frame())
    keys = [f.key for f in figures]
    assert keys[:3] == ["fig1_final_scores", "fig2_rollout_timeline", "fig3_eval_vs_trajectories_arith"]
    assert set(keys) == {"fig1_final_scores", *(k for ks in FUNCTIONS.values() for k in ks)}
    assert len(list(tmp_path.glob("*.png"))) == len(list(tmp_path.glob("*.svg"))) == len(figures)
    curves = [f for f in figures if f.key.startswith(("fig3", "fig4", "fig5", "length"))]
    assert all("min-max over seeds" in f.caption or "no band" in f.caption for f in curves)
    assert all(f.paper_ref for f in figures if f.key.startswith("fig"))


def test_band_by_step_takes_mean_min_max_over_seeds_at_each_step():
    m = pd.DataFrame(
        {
            "arm": ["a"] * 4 + ["b"] * 2,
            "run": ["a0", "a0", "a1", "a1", "b0", "b0"],
            "step": [1, 2, 1, 2, 1, 2],
            "x": [1.0, 2.0, 3.0, np.nan, 5.0, 6.0],
        }
    )
    band = band_by_step(m, "x").set_index(["arm", "step"])
    assert band.loc[("a", 1)].tolist() == [2.0, 1.0, 3.0, 2]
    assert band.loc[("a", 2)].tolist() == [2.0, 2.0, 2.0, 1]
    assert band.loc[("b", 2), "mean"] == 6.0
    smoothed = band_by_step(m[m["arm"] == "b"], "x", window=2)
    assert smoothed["mean"].tolist() == [5.0, 5.5]


def test_band_on_grid_interpolates_seeds_onto_their_common_range():
    points = pd.DataFrame(
        {
            "arm": "a",
            "run": ["r0"] * 3 + ["r1"] * 2,
            "t": [0.0, 10.0, 20.0, 0.0, 16.0],
            "y": [0.0, 1.0, 2.0, 0.0, 3.2],
        }
    )
    band = band_on_grid(points, "t", "y")
    assert band["t"].tolist() == [0.0, 10.0, 16.0]  # 20 lies beyond r1's last point
    assert band["min"].tolist() == pytest.approx([0.0, 1.0, 1.6])
    assert band["max"].tolist() == pytest.approx([0.0, 2.0, 3.2])
    assert (band["n"] == 2).all()


def test_timeline_frame_counts_staleness_from_the_learner_version_at_consumption(tmp_path):
    from .synthetic_runs import write_comparison

    out = write_comparison(tmp_path / "cmp", arms=("grpo",), seeds=(0,), steps=1)
    line = {
        "step": 3,
        "consumed_at": 10.0,
        "learner_version": 5,
        "trajs": [[1.0, 2.0, 5, 5, 10, 1], [0.5, 2.5, 2, 4, 12, 0]],
    }
    (out / "runs" / "grpo-s0" / "timeline.jsonl").write_text(json.dumps(line) + "\n")
    frame = timeline_frame(load([out]), "grpo-s0")
    assert frame["staleness"].tolist() == [0.0, 3.0]
    assert frame["used"].tolist() == [1.0, 0.0] and frame["step"].tolist() == [3, 3]


def test_the_timeline_panels_share_a_time_axis_that_holds_every_step_label(tmp_path, monkeypatch):
    from results.report import figures_runs

    from .synthetic_runs import _timeline, write_comparison, write_jsonl

    out = write_comparison(tmp_path / "cmp", arms=("sao", "grpo"), seeds=(0,), steps=12)
    t0 = 1.8e9  # the first arm's steps take three times as long: its window is the longer one
    slow = _timeline(12, 0, t0)
    for line in slow:
        line["consumed_at"] = t0 + 3 * (line["consumed_at"] - t0)
        line["trajs"] = [[t0 + 3 * (t[0] - t0), t0 + 3 * (t[1] - t0), *t[2:]] for t in line["trajs"]]
    write_jsonl(out / "runs" / "sao-s0" / "timeline.jsonl", slow)
    drawn, real_save = [], figures_runs.save
    monkeypatch.setattr(figures_runs, "save", lambda fig, *args: drawn.append(fig) or real_save(fig, *args))
    rollout_timeline(load([out]), tmp_path / "figs")
    panels = [ax for ax in drawn[0].axes if ax.texts]  # the colour bar has no step labels
    assert len(panels) == 2
    for ax in panels:
        assert max(text.get_position()[0] for text in ax.texts) <= ax.get_xlim()[1]
