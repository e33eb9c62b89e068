"""Chat templates and thinking (bench/models/chat.py, envs/math/graders.strip_thinking): template
options such as Qwen3's `enable_thinking` reach every rendering, thinking is never graded, and
its tokens are counted (the tiny character tokenizer: one token per character)."""

from __future__ import annotations

import pytest

from bench.models.chat import render_prompt, require_template, set_template_options, thinking_tokens
from bench.models.tokenizer import build_tiny_tokenizer
from envs.math.graders import extract_final_answer, grade_integer, strip_thinking

# A Qwen3-like template: `enable_thinking=false` closes an empty thought in the generation prompt.
TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}"
    "{% endif %}"
)


@pytest.mark.parametrize(
    "completion, answer",
    [
        ("<think>maybe \\boxed{1}</think> so \\boxed{2}", "2"),  # the box inside the thought is not read
        ("<think>still thinking \\boxed{1}", None),  # never closed: no answer
        ("opened by the prompt</think>Answer: 3", "3"),
        ("<think>a</think>x<think>b \\boxed{9}</think>Answer: 4", "4"),
        ("no thinking \\boxed{5}", "5"),
    ],
)
def test_answers_are_read_after_the_thinking(completion, answer):
    assert extract_final_answer(completion) == answer


def test_a_boxed_answer_inside_thinking_scores_nothing():
    assert not grade_integer("<think>\\boxed{7}", "7").correct
    assert grade_integer("<think>hmm</think>\\boxed{7}", "7").correct
    assert strip_thinking("plain") == "plain"


@pytest.mark.parametrize(
    "text, count",
    [
        ("<think>ab</think>c", len("<think>ab</think>")),
        ("<think>abc", len("<think>abc")),  # cut off mid-thought: all of it
        ("ab</think>c", len("ab</think>")),  # the <think> was in the prompt, not generated
        ("<think>a</think>x<think>b</think>", 2 * len("<think>a</think>")),
        ("no thought", 0),
    ],
)
def test_thinking_tokens_are_counted(text, count):
    assert thinking_tokens(build_tiny_tokenizer(), text) == count


def test_template_options_reach_the_rendered_prompt():
    tokenizer = build_tiny_tokenizer()
    tokenizer.chat_template = TEMPLATE
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
    default = tokenizer.decode(render_prompt(tokenizer, messages))
    assert default == "<system>S\n<user>Q\n<assistant>"
    set_template_options(tokenizer, enable_thinking=False)
    assert tokenizer.decode(render_prompt(tokenizer, messages)) == default + "<think>\n\n</think>\n\n"
    set_template_options(tokenizer, enable_thinking=None)  # None: the template's default again
    assert tokenizer.decode(render_prompt(tokenizer, messages)) == default


def test_a_model_without_a_template_refuses_what_needs_one():
    tokenizer = build_tiny_tokenizer()
    require_template(tokenizer, "tiny", [])  # nothing asked: fine
    with pytest.raises(ValueError) as info:
        require_template(tokenizer, "tiny", ["enable_thinking"])
    message = str(info.value)
    assert "\n" not in message and "model 'tiny' has no chat template, which enable_thinking" in message
    assert "drop enable_thinking" in message


def test_a_runs_checkpoints_are_evaluated_with_its_template_options(tmp_path):
    import json

    from bench.eval.checkpoints import run_template_options

    (tmp_path / "config.json").write_text(json.dumps({"enable_thinking": False}))
    assert run_template_options(tmp_path) == {"enable_thinking": False}
    assert run_template_options(None) == {} and run_template_options(tmp_path / "nope") == {}
