"""`bench eval --model` of a run directory, or of one of its checkpoints (as `bench compare`
evaluates a run's selected checkpoint), asks as the run's rollouts were asked: its system prompt,
chat-template options and sampling (`bench.eval.checkpoints`); a plain model directory gets the
benchmark's."""

from __future__ import annotations

import json

from bench.eval.checkpoints import resolve_model, run_sampling, run_system_prompt, run_template_options


def _run(tmp_path, **config):
    run = tmp_path / "run"
    policy = run / "checkpoints" / "step_000002" / "policy"
    policy.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(config))
    return run, policy.parent


def test_a_checkpoint_of_a_run_is_evaluated_with_the_run_s_settings(tmp_path):
    run, checkpoint = _run(
        tmp_path,
        temperature=0.7,
        top_p=1.0,
        max_new_tokens=128,
        enable_thinking=False,
        task_args={"system_prompt": "Be brief."},
    )
    source, run_dir = resolve_model(str(checkpoint))
    assert source == str(checkpoint / "policy") and run_dir == run
    assert run_sampling(run_dir) == {"temperature": 0.7, "top_p": 1.0, "max_new_tokens": 128}
    assert run_system_prompt(run_dir) == "Be brief." and run_template_options(run_dir) == {
        "enable_thinking": False
    }


def test_a_run_that_left_the_length_to_its_task_leaves_it_to_the_benchmark(tmp_path):
    run, _ = _run(tmp_path, temperature=1.0, top_p=1.0, max_new_tokens=None)
    assert run_sampling(run) == {"temperature": 1.0, "top_p": 1.0}  # max_new_tokens: the benchmark's


def test_a_model_directory_outside_a_run_has_no_run_settings(tmp_path):
    policy = tmp_path / "exported" / "policy"
    policy.mkdir(parents=True)
    source, run_dir = resolve_model(str(policy.parent))
    assert source == str(policy) and run_dir is None
    assert run_sampling(run_dir) == {} and run_system_prompt(run_dir) is None
