"""The model layer: tokenizer, packing, per-token log-probs, the critic, loading."""

from __future__ import annotations

import random
import string
import time

import pytest
import torch
from transformers import AutoTokenizer

from bench.errors import ModelLoadError
from bench.models.critic import ValueModel, freeze_attention
from bench.models.loading import load_model_and_tokenizer
from bench.models.logprobs import response_logprobs
from bench.models.packing import PackedBatch, pack
from bench.models.tiny import new_tiny_model, tiny_config
from bench.models.tokenizer import build_tiny_tokenizer

PRINTABLE = "".join(chr(c) for c in range(32, 127)) + "\n"


@pytest.fixture(scope="module")
def tiny():
    """A random tiny model and its tokenizer (shared: tests must not modify the weights)."""
    return new_tiny_model(seed=0)


def _examples(n: int = 6, seed: int = 0) -> tuple[list[list[int]], list[list[int]]]:
    """Prompts (bos first) and responses of assorted lengths, including an empty response."""
    rng = random.Random(seed)
    prompts = [[1] + [rng.randrange(4, 100) for _ in range(rng.randrange(0, 9))] for _ in range(n)]
    responses = [[rng.randrange(0, 100) for _ in range(rng.randrange(1, 12))] for _ in range(n)]
    responses[-1] = []
    return prompts, responses


# ---- tokenizer ------------------------------------------------------------------------------
def test_tokenizer_vocabulary_and_round_trip():
    tok = build_tiny_tokenizer()
    assert len(tok) == 100
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2, 3)
    assert tok.encode(" ", add_special_tokens=False) == [4]
    assert tok.encode("\n", add_special_tokens=False) == [99]
    rng = random.Random(0)
    samples = [PRINTABLE, "", "  two  spaces ,  . ''", "a\n\n b\n"]
    samples += ["".join(rng.choice(PRINTABLE) for _ in range(rng.randrange(1, 200))) for _ in range(50)]
    for s in samples:
        ids = tok.encode(s, add_special_tokens=False)
        assert len(ids) == len(s)  # one token per character
        assert tok.decode(ids) == s
    assert tok.encode("x\t", add_special_tokens=False) == [tok.convert_tokens_to_ids("x"), 3]  # tab -> <unk>
    assert tok("ab")["input_ids"][0] != tok.bos_token_id  # bos is the caller's job


def test_tokenizer_save_and_load_offline(tmp_path):
    build_tiny_tokenizer().save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    s = string.printable.replace("\t", "").replace("\r", "").replace("\x0b", "").replace("\x0c", "")
    assert loaded.decode(loaded.encode(s, add_special_tokens=False)) == s
    assert (loaded.pad_token_id, loaded.bos_token_id, loaded.eos_token_id) == (0, 1, 2)


# ---- packing --------------------------------------------------------------------------------
def test_pack_hand_example():
    b = pack([[1, 5, 6, 7], [1, 9]], [[10, 11], [12, 13, 14]], pad_id=0)
    assert (b.prompt_len, b.response_len) == (4, 3)
    assert b.input_ids_B_L.tolist() == [[1, 5, 6, 7, 10, 11, 0], [0, 0, 1, 9, 12, 13, 14]]
    assert b.attention_mask_B_L.tolist() == [[1, 1, 1, 1, 1, 1, 0], [0, 0, 1, 1, 1, 1, 1]]
    assert b.position_ids_B_L.tolist() == [[0, 1, 2, 3, 4, 5, 5], [0, 0, 0, 1, 2, 3, 4]]
    assert b.response_mask_B_T.tolist() == [[1, 1, 0], [1, 1, 1]]


# ---- log-probs ------------------------------------------------------------------------------
def _slow_logprobs(model, prompt, response, temperature):
    """Reference: one unpadded sequence at a time, log-softmax over its own logits."""
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float() / temperature
    logp = torch.log_softmax(logits, -1)
    rows = logp[len(prompt) - 1 : len(prompt) - 1 + len(response)]
    token_logp = rows.gather(-1, torch.tensor(response)[:, None]).squeeze(-1) if response else torch.zeros(0)
    entropy = -(rows.exp() * rows).sum(-1)
    return token_logp, entropy


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_response_logprobs_matches_slow_loop(tiny, temperature):
    model, tok = tiny
    prompts, responses = _examples()
    batch = pack(prompts, responses, tok.pad_token_id)
    with torch.no_grad():
        logp_B_T, entropy_B_T = response_logprobs(model, batch, temperature=temperature, with_entropy=True)
    assert logp_B_T.shape == entropy_B_T.shape == (len(prompts), batch.response_len)
    for b, (p, r) in enumerate(zip(prompts, responses)):
        ref_logp, ref_entropy = _slow_logprobs(model, p, r, temperature)
        torch.testing.assert_close(logp_B_T[b, : len(r)], ref_logp, atol=1e-5, rtol=0)
        torch.testing.assert_close(entropy_B_T[b, : len(r)], ref_entropy, atol=1e-5, rtol=0)
        assert torch.all(logp_B_T[b, len(r) :] == 0) and torch.all(entropy_B_T[b, len(r) :] == 0)


def test_response_logprobs_is_differentiable(tiny):
    model, tok = tiny
    prompts, responses = _examples(3)
    logp_B_T, entropy_B_T = response_logprobs(model, pack(prompts, responses, 0), with_entropy=False)
    assert entropy_B_T is None
    logp_B_T.sum().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    model.zero_grad(set_to_none=True)


# ---- the critic -----------------------------------------------------------------------------
def test_value_model_alignment_and_round_trip(tiny, tmp_path):
    model, tok = tiny
    critic = ValueModel.from_policy(model)
    prompts, responses = _examples(seed=1)
    batch = pack(prompts, responses, tok.pad_token_id)
    with torch.no_grad():
        assert torch.all(critic(batch) == 0)  # zero-initialised head
        torch.nn.init.normal_(critic.value_head.weight)
        critic.value_head.bias.fill_(0.5)
        values_B_T = critic.forward_values(batch)
        for b, (p, r) in enumerate(zip(prompts, responses)):
            hidden = critic.backbone(input_ids=torch.tensor([p + r])).last_hidden_state[0]
            ref = critic.value_head(hidden).squeeze(-1)[
                len(p) - 1 : len(p) - 1 + len(r)
            ]  # state before token t
            torch.testing.assert_close(values_B_T[b, : len(r)], ref, atol=1e-5, rtol=0)
            assert torch.all(values_B_T[b, len(r) :] == 0)
    assert critic.backbone is not model.model  # a copy: training it leaves the policy alone
    critic.save_pretrained(tmp_path / "critic")
    loaded = ValueModel.load(tmp_path / "critic")
    with torch.no_grad():
        torch.testing.assert_close(loaded(batch), values_B_T, atol=1e-6, rtol=0)


def test_freeze_attention_freezes_exactly_attention(tiny):
    critic = ValueModel.from_policy(tiny[0])
    n = freeze_attention(critic)
    frozen = {name for name, p in critic.named_parameters() if not p.requires_grad}
    expected = {name for name, _ in critic.named_parameters() if ".self_attn." in name}
    assert frozen == expected and expected
    assert n == sum(p.numel() for name, p in critic.named_parameters() if name in expected)
    assert critic.backbone.layers[0].post_attention_layernorm.weight.requires_grad
    assert all(p.requires_grad for p in tiny[0].parameters())  # the policy is untouched


# ---- configuration and loading ---------------------------------------------------------------
def test_tiny_config_and_seeding():
    cfg = tiny_config(100)
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (
        128,
        4,
        4,
        2,
    )
    assert (cfg.intermediate_size, cfg.max_position_embeddings, cfg.tie_word_embeddings) == (384, 1024, True)
    a, _ = new_tiny_model(3)
    b, _ = new_tiny_model(3)
    c, _ = new_tiny_model(4)
    assert 0.5e6 < sum(p.numel() for p in a.parameters()) < 1.5e6
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)


def test_load_local_directory(tiny, tmp_path):
    model, tok = tiny
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, loaded_tok = load_model_and_tokenizer(str(tmp_path))
    batch = pack([[1, 5, 6]], [[7, 8]], 0)
    with torch.no_grad():
        torch.testing.assert_close(response_logprobs(loaded, batch)[0], response_logprobs(model, batch)[0])
    assert loaded_tok.decode(loaded_tok.encode("hi\n", add_special_tokens=False)) == "hi\n"


def test_offline_hub_id_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(ModelLoadError) as info:
        load_model_and_tokenizer("some-org/definitely-not-cached-model")
    assert time.perf_counter() - start < 5
    msg = str(info.value)
    assert "\n" not in msg and "some-org/definitely-not-cached-model" in msg
    assert "offline" in msg and "local directory" in msg
    assert isinstance(info.value, ValueError)


def test_missing_local_directory_is_a_load_error(tmp_path):
    with pytest.raises(ModelLoadError, match="not found"):
        load_model_and_tokenizer(str(tmp_path / "nope"))


def test_packed_batch_to_keeps_fields():
    b = pack([[1, 2]], [[3]], 0).to("cpu")
    assert isinstance(b, PackedBatch) and b.prompt_len == 2 and b.response_len == 1
