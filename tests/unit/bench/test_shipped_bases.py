"""The shipped tiny base checkpoints: each one's recipe key is the current recipe's (else the
test names the command that regenerates it), and `--model tiny` uses it without pretraining."""

from __future__ import annotations

import json

import pytest

from bench.models.cache import SHIPPED_DIR, SHIPPED_MANIFEST, base_checkpoint_path, ensure_base_checkpoint

SHIPPED = sorted(p.parent.name for p in SHIPPED_DIR.glob(f"*/{SHIPPED_MANIFEST}"))


def test_every_embedded_task_ships_a_base():
    assert SHIPPED == ["agent", "arith", "drift", "swe"]


@pytest.mark.parametrize("task", SHIPPED)
def test_a_shipped_base_matches_its_task_s_current_recipe(task):
    manifest = json.loads((SHIPPED_DIR / task / SHIPPED_MANIFEST).read_text())
    current = base_checkpoint_path(task, {}, 0).name
    assert manifest["key"] == current, (
        f"the {task} recipe changed ({manifest['key']} shipped, {current} now): regenerate the shipped base with "
        f"`python scripts/ship_base.py {task}` and commit it"
    )
    assert (
        0 <= manifest["held_out"]["avg_at_k"] <= 1 and manifest["command"] == f"bench pretrain --task {task}"
    )


@pytest.mark.parametrize("task", SHIPPED)
def test_model_tiny_uses_the_shipped_base_without_pretraining(task, tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))  # an empty cache

    def no_pretraining(*args, **kwargs):
        raise AssertionError("pretrained although a base is shipped")

    monkeypatch.setattr("bench.models.pretrain.pretrain", no_pretraining)
    path = ensure_base_checkpoint(task, progress=False)
    assert path == SHIPPED_DIR / task and not any(tmp_path.iterdir())
    from bench.models.loading import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(str(path))
    assert sum(p.numel() for p in model.parameters()) > 0 and tokenizer.eos_token_id is not None


def test_other_arguments_or_seeds_are_not_the_shipped_base():
    assert ensure_base_checkpoint.__module__ == "bench.models.cache"
    from bench.models.cache import shipped_base

    if "arith" in SHIPPED:
        assert shipped_base("arith", {"max_operands": 2}, 0) is None
        assert shipped_base("arith", {}, 1) is None


def test_how_answers_are_graded_or_asked_is_not_part_of_the_base():
    """`grading` and `system_prompt` change the reward and the prompt, not the demonstrations: such
    a run starts from the shipped arith base, not from a new pretraining (the key once took
    `grading` in)."""
    from bench.models.cache import base_checkpoint_path, shipped_base

    for asked in ({"grading": "last-number"}, {"system_prompt": "Be brief."}):
        assert base_checkpoint_path("arith", asked) == base_checkpoint_path("arith")
        if "arith" in SHIPPED:
            assert shipped_base("arith", asked) == shipped_base("arith") is not None


def test_asking_in_another_form_is_another_base_and_the_default_form_the_shipped_one():
    """`prompt_format` changes the demonstrations' prompts: a question-form base is its own, while
    the default (added later) leaves the shipped base's key as it was."""
    from bench.models.cache import base_checkpoint_path

    equation = base_checkpoint_path("arith", {"prompt_format": "equation"})
    assert equation == base_checkpoint_path("arith")
    assert base_checkpoint_path("arith", {"prompt_format": "question"}) != equation
