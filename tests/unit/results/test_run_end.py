"""The end-of-run table of `bench run`: reward over the first and last 10% of steps, evaluation
scores, counts and time from summary.json, and the next commands."""

from __future__ import annotations

from results.run_end import end_of_run_rows, eval_scores, format_end_of_run, reward_windows

METRICS = [{"step": 0, "eval/arith/avg_at_k": 0.2}] + [
    {"step": s, "reward/mean": s / 20, "rollout/stale_dropped": 1.0 if s == 3 else 0.0} for s in range(1, 21)
]
METRICS[-1]["eval/arith/avg_at_k"] = 0.6
SUMMARY = {
    "steps": 20,
    "wall_s": 10.0,
    "stopped_by": "trajectories",
    "nonfinite_skipped": 2,
    "consumption": {
        "trajectories": 160,
        "generated_trajectories": 168,
        "generated_tokens": 4000,
        "elapsed_s": 9.5,
    },
}


def test_reward_windows_cover_the_first_and_last_tenth():
    (first, v_first), (last, v_last) = reward_windows(METRICS)
    assert first == "reward/mean, first 10% (steps 1-2)" and v_first == (0.05 + 0.10) / 2
    assert last == "reward/mean, last 10% (steps 19-20)" and v_last == (0.95 + 1.0) / 2
    assert reward_windows([]) == []


def test_rows_and_eval_scores():
    assert eval_scores(METRICS) == {"arith": [(0, 0.2), (20, 0.6)]}
    rows = {r["what"]: r["value"] for r in end_of_run_rows(SUMMARY, METRICS)}
    assert rows["stopped by"] == "trajectories" and rows["steps"] == "20"
    assert rows["eval/arith avg@k"] == "0.200 (step 0) -> 0.600 (step 20)"
    assert rows["trajectories trained on"] == "160 (generated 168)"
    assert rows["wall time"] == "10.0 s" and rows["steps/s"] == "2.00"
    assert rows["stale trajectories dropped"] == "1" and rows["non-finite updates skipped"] == "2"


def test_a_resumed_run_shows_its_training_time_over_resumes():
    summary = {**SUMMARY, "wall_s": 3.0}
    rows = {r["what"]: r["value"] for r in end_of_run_rows(summary, METRICS)}
    assert rows["wall time"] == "3.0 s (9.5 s of training over its resumes)" and rows["steps/s"] == "2.11"


def test_the_text_ends_with_the_next_commands():
    text = format_end_of_run("runs/x", SUMMARY, METRICS, {"algo": "sao", "task": "arith"}, ["arith"])
    lines = text.splitlines()
    assert lines[0] == "run finished: runs/x" and lines[1].startswith("what") and "next:" in lines
    nxt = lines[lines.index("next:") + 1 :]
    assert nxt[0].startswith("  bench eval --model runs/x --bench arith ") and "#" in nxt[0]
    assert nxt[1].startswith("  bench report runs/x ")
    assert nxt[2].startswith(
        "  bench compare --algos sao,grpo --task arith --budget trajectories=160 --seeds 3"
    )
