"""Turning env messages into token ids, the same way for rollouts and for demonstrations.

Tokenizers with a chat template render through it; the embedded tiny model (no template)
sees plain concatenated text. Multi-turn episodes are built incrementally: the initial
context (`render_prompt`), then each model turn's sampled ids, then each observation's ids
(`render_observation`), so the learner trains on exactly the tokens the engine produced.
`render_transcript` builds supervised warm-start examples from whole conversations with the
same two functions, so pretraining and RL see identical token streams.

Template options (`set_template_options`, e.g. Qwen3's `enable_thinking`) travel with the
tokenizer, so every rendering of a run (rollouts, observations, evaluation) uses the same ones.
A run that needs a template (thinking switched, a system prompt) on a model without one is
refused before it starts (`require_template`). Thinking tokens are generated, kept and trained
on like any others; `thinking_tokens` counts them for the length statistics.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from envs.math.graders import THINK_CLOSE, THINK_OPEN

Message = dict[str, str]
_ACTION_MARK = "\x00ACTION\x00"  # stands for the model's turn when measuring template pieces
_OPTIONS = "bench_template_kwargs"  # the tokenizer attribute holding the template options


def _has_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def set_template_options(tokenizer: Any, **options: Any) -> None:
    """Keyword arguments every `apply_chat_template` of this tokenizer gets (e.g.
    `enable_thinking=False`); options set to None are left to the template's default."""
    setattr(tokenizer, _OPTIONS, {k: v for k, v in options.items() if v is not None})
    _observation_frame.cache_clear()


def require_template(tokenizer: Any, model: str, needs: list[str]) -> None:
    """A one-line ValueError when the run sets what only a chat template can render (`needs`,
    e.g. ["enable_thinking"]) and the tokenizer of `model` has none."""
    if needs and not _has_template(tokenizer):
        raise ValueError(
            f"model {model!r} has no chat template, which {' and '.join(needs)} need(s); use an instruct "
            "model (its tokenizer_config.json has a chat_template) or drop " + ", ".join(needs)
        )


def _template_text(tokenizer: Any, messages: list[Message], generation_prompt: bool) -> str:
    options = getattr(tokenizer, _OPTIONS, {})
    return tokenizer.apply_chat_template(
        messages, add_generation_prompt=generation_prompt, tokenize=False, **options
    )


def thinking_tokens(tokenizer: Any, text: str) -> int:
    """Tokens of the thinking in a decoded model turn, tags included, counted by encoding it again:
    every `<think>...</think>` span (to the end when one is never closed), and the text up to a
    `</think>` that comes first (the template put the `<think>` in the prompt); 0 without them."""
    spans = []
    head, closed, rest = text.partition(THINK_CLOSE)
    if closed and THINK_OPEN not in head:  # opened in the prompt: the turn starts mid-thought
        spans.append(head + closed)
        text = rest
    for part in text.split(THINK_OPEN)[1:]:
        thought, closed, _ = part.partition(THINK_CLOSE)
        spans.append(THINK_OPEN + thought + closed)
    return sum(len(tokenizer.encode(span, add_special_tokens=False)) for span in spans)


def render_prompt(tokenizer: Any, messages: list[Message]) -> list[int]:
    """Token ids of the initial context, ending where the model's first turn starts."""
    if _has_template(tokenizer):
        text = _template_text(tokenizer, messages, generation_prompt=True)
        return tokenizer.encode(text, add_special_tokens=False)
    text = "".join(m["content"] for m in messages)
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    return bos + tokenizer.encode(text, add_special_tokens=False)


@lru_cache(maxsize=64)
def _observation_frame(tokenizer: Any, role: str) -> tuple[str, str, str]:
    """(turn closing, message prefix, message suffix + next generation prompt) of the chat
    template around an observation of `role`, measured by rendering a probe conversation.

    Templates that reject the role (strict user/assistant alternation) fall back to "user".
    """
    probe = [{"role": "user", "content": "q"}, {"role": "assistant", "content": _ACTION_MARK}]
    before = _template_text(tokenizer, probe, generation_prompt=False)
    closing = before[before.rindex(_ACTION_MARK) + len(_ACTION_MARK) :]
    for r in (role, "user"):
        try:
            after = _template_text(
                tokenizer, [*probe, {"role": r, "content": _ACTION_MARK}], generation_prompt=True
            )
            break
        except Exception:  # jinja raises for roles a template does not allow
            continue
    else:
        raise ValueError(f"the chat template accepts neither role {role!r} nor 'user' for observations")
    if not after.startswith(before):
        raise ValueError(
            "the chat template re-renders earlier turns when a message is added; "
            "multi-turn rollouts need a prefix-stable template"
        )
    head, _, tail = after[len(before) :].partition(_ACTION_MARK)
    return closing, head, tail


def render_observation(
    tokenizer: Any, observation: str, role: str = "user", action_ids: list[int] | None = None
) -> list[int]:
    """Token ids to append after a model turn (`action_ids`) for an env observation.

    Without a chat template: the observation text itself. With one: the end of the model's
    turn (unless the turn already ended with eos), the observation as a `role` message, and
    the prompt for the model's next turn.
    """
    if not _has_template(tokenizer):
        return tokenizer.encode(observation, add_special_tokens=False)
    closing, head, tail = _observation_frame(tokenizer, role)
    eos = tokenizer.eos_token
    if action_ids and eos and action_ids[-1] == tokenizer.eos_token_id and closing.startswith(eos):
        closing = closing[len(eos) :]
    return tokenizer.encode(closing + head + observation + tail, add_special_tokens=False)


def render_transcript(tokenizer: Any, messages: list[Message]) -> tuple[list[int], list[int], list[int]]:
    """(prompt ids, response ids, action mask) of a whole conversation, for warm-start.

    Messages before the first assistant turn form the prompt; assistant turns are actions
    (mask 1), every other message after them is an observation (mask 0). The last message
    must be the assistant's final turn, which gets the eos token.
    """
    first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), None)
    if first is None or messages[-1]["role"] != "assistant":
        raise ValueError("a transcript needs at least one assistant turn and must end with one")
    prompt = render_prompt(tokenizer, messages[:first])
    response: list[int] = []
    mask: list[int] = []
    last_action: list[int] = []
    for i, message in enumerate(messages[first:], start=first):
        if message["role"] == "assistant":
            ids = tokenizer.encode(message["content"], add_special_tokens=False)
            if i == len(messages) - 1:
                ids = ids + [tokenizer.eos_token_id]
            last_action = ids
            response += ids
            mask += [1] * len(ids)
        else:
            ids = render_observation(tokenizer, message["content"], message["role"], last_action)
            response += ids
            mask += [0] * len(ids)
    return prompt, response, mask
