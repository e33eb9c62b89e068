"""Turning env messages into token ids: the chat template where the tokenizer has one,
plain concatenation for the embedded tiny model (which has none)."""

from __future__ import annotations

from typing import Any


def render_prompt(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of the initial context, ending where the model's first turn starts."""
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # BatchEncoding in newer transformers
            ids = ids["input_ids"]
        return list(ids)
    text = "".join(m["content"] for m in messages)
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    return bos + tokenizer.encode(text, add_special_tokens=False)


def render_observation(tokenizer: Any, observation: str) -> list[int]:
    """Token ids of an environment observation appended after a model turn."""
    return tokenizer.encode(observation, add_special_tokens=False)


def render_demonstration(tokenizer: Any, messages: list[dict[str, str]], completion: str) -> tuple[list[int], list[int]]:
    """(prompt ids, completion ids ending in eos) of a supervised warm-start example."""
    prompt = render_prompt(tokenizer, messages)
    completion_ids = tokenizer.encode(completion, add_special_tokens=False) + [tokenizer.eos_token_id]
    return prompt, completion_ids
