"""`results.report` figures: each writes a PNG (300 dpi), an SVG and a PDF (TrueType fonts
embedded) at a paper width, with no title inside, when the runs have its data, and nothing
(without an error) when they do not; series that are one value throughout are named in the
caption instead of drawn; an arm has the same colour in every report; curve bands are bootstrap
intervals over seeds."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from results.comparison import load
from results.report.bands import band_by_step, band_on_grid, bootstrap_band, spaced_indices
from results.report.curves import learning_curves
from results.report.figures import final_scores_figure, write_figures
from results.report.figures_runs import rollout_timeline, staleness_histogram, timeline_frame
from results.report.figures_training import (
    clip_ratio,
    critic_figures,
    drift_figures,
    length_figure,
)
from results.report.plotting import COLUMN_IN, DPI, TEXT_IN, new_figure, save
from results.report.stability import survival_figure

from .synthetic_runs import final_scores_frame, write_comparison, write_jsonl

FUNCTIONS = {
    learning_curves: [
        "reward_vs_trajectories",
        "reward_vs_time",
        "fig3_eval_vs_trajectories_arith",
        "fig3_eval_vs_time_arith",
    ],
    critic_figures: ["fig4a_critic_explained_variance", "fig4b_critic_grad_norm"],
    clip_ratio: ["fig4c_clip_ratio"],
    drift_figures: ["fig5a_drift_reward", "fig5b_drift_label_share"],
    length_figure: ["length_truncation"],
    staleness_histogram: ["staleness_histogram"],
    rollout_timeline: ["fig2_rollout_timeline"],
    survival_figure: ["stability_survival"],  # issue 36: runs not collapsed by step
}


def _png_size_and_dpi(path) -> tuple[int, float]:
    """(width in pixels, dots per inch) from a PNG's IHDR and pHYs chunks."""
    data = path.read_bytes()
    width = int.from_bytes(data[16:20], "big")
    at = data.index(b"pHYs")
    per_metre = int.from_bytes(data[at + 4 : at + 8], "big")
    return width, per_metre * 0.0254


def _assert_written(figure) -> None:
    assert figure.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.png.stat().st_size > 2000
    assert "<svg" in figure.svg.read_text()[:2000]
    pdf = figure.pdf.read_bytes()
    assert pdf[:5] == b"%PDF-" and b"/FontFile2" in pdf and b"/Type3" not in pdf  # TrueType embedded
    width, dpi = _png_size_and_dpi(figure.png)
    assert round(dpi) == DPI and min(abs(width / DPI - w) for w in (COLUMN_IN, 2 * COLUMN_IN, TEXT_IN)) < 0.02
    assert figure.caption and figure.title


@pytest.mark.parametrize("make", list(FUNCTIONS), ids=lambda f: f.__name__)
def test_each_figure_writes_png_svg_and_pdf_when_the_runs_have_its_data(make, synthetic_dirs, tmp_path):
    figures = make(load(synthetic_dirs), tmp_path)
    assert [f.key for f in figures] == FUNCTIONS[make]
    for figure in figures:
        _assert_written(figure)
        assert (
            figure.png.parent == tmp_path
            and figure.png.stem == figure.key == figure.svg.stem == figure.pdf.stem
        )


def _drawn(monkeypatch, module) -> list:
    """The matplotlib figures that `module`'s `save` is given (recorded, then saved as usual)."""
    drawn, real_save = [], module.save
    monkeypatch.setattr(module, "save", lambda fig, *a, **k: drawn.append(fig) or real_save(fig, *a, **k))
    return drawn


def test_no_figure_draws_a_title_inside_itself(synthetic_dirs, tmp_path, monkeypatch):
    from results.report import curves, figures, figures_runs, figures_training

    drawn = [_drawn(monkeypatch, m) for m in (curves, figures, figures_runs, figures_training)]
    write_figures(load(synthetic_dirs), tmp_path, final_scores_frame())
    figs = [f for d in drawn for f in d]
    assert len(figs) >= 10
    for fig in figs:
        assert fig._suptitle is None and not any(ax.get_title() for ax in fig.axes)


def test_against_flops_where_the_runs_counted_them(tmp_path):
    out = write_comparison(tmp_path / "cmp", arms=("sao", "grpo"), seeds=(0, 1, 2), steps=12, flops=True)
    keys = [f.key for f in learning_curves(load([out]), tmp_path / "figs")]
    assert "reward_vs_flops" in keys and "fig3_eval_vs_flops_arith" in keys
    assert keys.index("reward_vs_trajectories") < keys.index("reward_vs_flops") < keys.index("reward_vs_time")


def test_a_series_with_one_value_throughout_is_named_not_drawn(tmp_path, monkeypatch):
    from results.report import figures_training

    out = write_comparison(
        tmp_path / "cmp", arms=("sao", "grpo", "ppo"), seeds=(0, 1), steps=8, timeline=False
    )
    for run in ("grpo-s0", "grpo-s1", "ppo-s0", "ppo-s1"):  # a clip that cannot act: 0 at every step
        path = out / "runs" / run / "metrics.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        write_jsonl(path, [{**r, "policy/clip_frac": 0.0} if "policy/clip_frac" in r else r for r in rows])
    for run in (out / "runs").iterdir():  # nothing was ever truncated
        path = run / "metrics.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        write_jsonl(
            path, [{**r, "rollout/truncated_frac": 0.0} if "rollout/truncated_frac" in r else r for r in rows]
        )
    drawn = _drawn(monkeypatch, figures_training)
    (clip,) = clip_ratio(load([out]), tmp_path / "figs")
    labels = [line.get_label() for ax in drawn[0].axes for line in ax.get_lines()]
    assert any(label.startswith("sao masked") for label in labels)
    assert not any(label.startswith(("grpo", "ppo")) for label in labels)
    assert "grpo clipped (policy/clip_frac = 0% at every step)" in clip.caption
    assert "ppo clipped (policy/clip_frac = 0% at every step)" in clip.caption
    (length,) = length_figure(load([out]), tmp_path / "figs")
    assert len(drawn[1].axes) == 1  # the all-zero truncation panel is dropped
    assert "sao (rollout/truncated_frac = 0% at every step)" in length.caption
    _assert_written(length)


def test_a_learning_curve_draws_an_arm_whose_score_never_moved(tmp_path, monkeypatch):
    from results.report import curves

    out = write_comparison(tmp_path / "cmp", arms=("sao", "grpo"), seeds=(0, 1), steps=8, eval_every=2)
    for run in ("sao-s0", "sao-s1"):  # sao's held-out score stays where it started: a result
        path = out / "runs" / run / "metrics.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        write_jsonl(
            path, [{**r, "eval/arith/avg_at_k": 0.3} if "eval/arith/avg_at_k" in r else r for r in rows]
        )
    drawn = _drawn(monkeypatch, curves)
    figures = learning_curves(load([out]), tmp_path / "figs")
    (i,) = [i for i, f in enumerate(figures) if f.key == "fig3_eval_vs_trajectories_arith"]
    labels = {line.get_label() for line in drawn[i].axes[0].get_lines()}
    assert {"sao (n=2)", "grpo (n=2)"} <= labels


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
    assert keys[:3] == ["fig1_final_scores", "fig2_rollout_timeline", "reward_vs_trajectories"]
    assert set(keys) == {"fig1_final_scores", *(k for ks in FUNCTIONS.values() for k in ks)}
    n = len(figures)
    assert (
        len(list(tmp_path.glob("*.png")))
        == len(list(tmp_path.glob("*.svg")))
        == len(list(tmp_path.glob("*.pdf")))
        == n
    )
    curves = [f for f in figures if f.key.startswith(("fig3", "fig4", "fig5", "length", "reward"))]
    assert all(
        "bootstrap interval of the mean over seeds" in f.caption or "no band" in f.caption for f in curves
    )
    assert not any("min-max" in f.caption for f in figures)
    assert all(f.paper_ref for f in figures if f.key.startswith("fig"))
    assert {f.section for f in figures if f.key.startswith(("fig3", "reward"))} == {"curves"}


def test_an_arm_has_the_same_colour_in_two_reports_whatever_the_other_arms(tmp_path, monkeypatch):
    from results.report import curves

    drawn = _drawn(monkeypatch, curves)
    colours = []
    for name, arms in (("a", ("sao", "grpo", "ppo")), ("b", ("grpo", "grpo+dis"))):
        out = write_comparison(tmp_path / name, arms=arms, seeds=(0,), steps=6, timeline=False)
        drawn.clear()
        learning_curves(load([out]), tmp_path / f"figs-{name}")
        lines = drawn[0].axes[0].get_lines()
        colours.append(
            {line.get_label().split(" (")[0]: line.get_color() for line in lines if "(n=" in line.get_label()}
        )
    assert colours[0]["grpo"] == colours[1]["grpo"] == "#E69F00"
    assert colours[1]["grpo+dis"] != colours[1]["grpo"] and colours[0]["sao"] != colours[0]["ppo"]


def test_the_built_in_arms_have_distinct_colour_blind_safe_styles_and_any_name_a_stable_one():
    from results.report.plotting import FIXED_STYLES, arm_style

    assert len({s.color for s in FIXED_STYLES.values()}) == len(FIXED_STYLES)
    assert len({s.marker for s in FIXED_STYLES.values()}) == len(FIXED_STYLES)
    green, red = ("#2ca02c", "#009E73", "#117733"), ("#d62728", "#D55E00", "#CC6677")
    pair = {arm_style("grpo").color, arm_style("grpo+dis").color}
    assert not (pair & set(green) and pair & set(red))  # the key contrast is never red against green
    assert arm_style("my-plugin:fast") == arm_style("my-plugin:fast")  # a function of the name alone
    assert arm_style("my-plugin:fast").color.startswith("#")


def test_band_by_step_takes_the_mean_and_its_bootstrap_interval_over_seeds_at_each_step():
    m = pd.DataFrame(
        {
            "arm": ["a"] * 4 + ["b"] * 2,
            "run": ["a0", "a0", "a1", "a1", "b0", "b0"],
            "step": [1, 2, 1, 2, 1, 2],
            "x": [1.0, 2.0, 3.0, np.nan, 5.0, 6.0],
        }
    )
    band = band_by_step(m, "x").set_index(["arm", "step"])
    # two seeds 1 and 3: resampled means 1, 2, 3 with chances 1/4, 1/2, 1/4, so the 95% interval is [1, 3]
    assert band.loc[("a", 1)].tolist() == [2.0, 1.0, 3.0, 2]
    assert band.loc[("a", 2)].tolist() == [2.0, 2.0, 2.0, 1]
    assert band.loc[("b", 2), "mean"] == 6.0
    smoothed = band_by_step(m[m["arm"] == "b"], "x", window=2)
    assert smoothed["mean"].tolist() == [5.0, 5.5]


def test_the_bootstrap_band_matches_a_slow_loop_over_the_same_resamples():
    rng = np.random.default_rng(3)
    ys = rng.normal(size=(5, 7))
    mean, low, high = bootstrap_band(ys, n_boot=400, seed=11)
    idx = np.random.default_rng(11).integers(0, 5, size=(400, 5))
    replicates = np.array([[ys[list(r), g].mean() for g in range(7)] for r in idx])
    assert mean == pytest.approx(ys.mean(axis=0))
    assert low == pytest.approx(np.quantile(replicates, 0.025, axis=0))
    assert high == pytest.approx(np.quantile(replicates, 0.975, axis=0))
    # more seeds of the same spread give a narrower band (a min-max band would widen)
    wide = bootstrap_band(rng.normal(size=(4, 1)), seed=0)
    narrow = bootstrap_band(rng.normal(size=(400, 1)), seed=0)
    assert (narrow[2] - narrow[1])[0] < (wide[2] - wide[1])[0]


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
    assert band["mean"].tolist() == pytest.approx([0.0, 1.5, 2.4])  # r0 at 16 is 1.6, r1 at 10 is 2.0
    assert band["ci_low"].tolist() == pytest.approx([0.0, 1.0, 1.6])  # two seeds: the interval spans them
    assert band["ci_high"].tolist() == pytest.approx([0.0, 2.0, 3.2])
    assert (band["n"] == 2).all()


def test_markers_are_spread_over_the_x_range_one_per_bunch_of_points():
    # the union grid of 15 seeds' FLOPs at six evaluation steps bunches: one marker per bunch
    xs = np.array([0, 5.1, 5.2, 5.3, 10.9, 11.0, 11.1, 16.0, 16.5, 21.6, 21.7, 26.9, 27.0])
    assert [xs[i] for i in spaced_indices(xs)] == [0, 5.1, 10.9, 16.0, 21.6, 27.0]
    assert spaced_indices(np.arange(100.0)) == [0, 11, 22, 33, 44, 55, 66, 77, 88, 99]  # even points
    assert spaced_indices(np.array([3.0])) == [0] and spaced_indices(np.array([])) == []


def test_timeline_frame_counts_staleness_from_the_learner_version_at_consumption(tmp_path):
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

    from .synthetic_runs import _timeline

    out = write_comparison(tmp_path / "cmp", arms=("sao", "grpo"), seeds=(0,), steps=12)
    t0 = 1.8e9  # the first arm's steps take three times as long: its window is the longer one
    slow = _timeline(12, 0, t0)
    for line in slow:
        line["consumed_at"] = t0 + 3 * (line["consumed_at"] - t0)
        line["trajs"] = [[t0 + 3 * (t[0] - t0), t0 + 3 * (t[1] - t0), *t[2:]] for t in line["trajs"]]
    write_jsonl(out / "runs" / "sao-s0" / "timeline.jsonl", slow)
    drawn = _drawn(monkeypatch, figures_runs)
    rollout_timeline(load([out]), tmp_path / "figs")
    panels = [ax for ax in drawn[0].axes if ax.texts]  # the colour bar has no step labels
    assert len(panels) == 2
    for ax in panels:
        assert max(text.get_position()[0] for text in ax.texts) <= ax.get_xlim()[1]


def test_the_same_figure_is_written_as_the_same_bytes(tmp_path):
    # a regenerated report leaves its committed figures untouched (no dates, no random SVG ids)
    for out in ("a", "b"):
        fig, (ax,) = new_figure()
        ax.fill_between([1, 2], [2, 3], [4, 5])  # clipped to the axes: an id in the SVG
        save(fig, tmp_path / out, "k", "title", "caption", None)
    for ext in ("png", "svg", "pdf"):
        assert (tmp_path / "a" / f"k.{ext}").read_bytes() == (tmp_path / "b" / f"k.{ext}").read_bytes(), ext
