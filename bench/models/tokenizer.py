"""The embedded tiny model's tokenizer: one token per character, built locally (no hub).

Vocabulary (100 ids): `<pad>`=0, `<bos>`=1, `<eos>`=2, `<unk>`=3, then the 95 printable ASCII
characters (space .. `~`) and `\\n`. Any other character encodes to `<unk>`.

How it is built with the `tokenizers` library: a BPE model whose vocabulary is the characters
and which has *no merges*, so every string splits into single characters; no pre-tokenizer and
no normalizer (whitespace is an ordinary token), and a `Fuse` decoder that concatenates tokens
without inserting spaces. Hence `decode(encode(s)) == s` for printable ASCII plus newlines.
The one exception: the literal strings `<pad>`, `<bos>`, `<eos>`, `<unk>` in text are matched
as their special tokens (they still decode back to the same text unless special tokens are
skipped).

bos is *not* added by `encode`: callers (`bench.models.chat.render_prompt`) add it themselves.
"""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
CHARACTERS = tuple(chr(c) for c in range(32, 127)) + ("\n",)
MODEL_MAX_LENGTH = 1024  # the tiny model's max_position_embeddings


def build_tiny_tokenizer() -> PreTrainedTokenizerFast:
    """The character-level tokenizer of the tiny model (see the module docstring)."""
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + CHARACTERS)}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    backend.decoder = decoders.Fuse()  # concatenate: the default decoder joins with spaces
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        # transformers' clean-up would turn " ." into "." and break the round trip
        clean_up_tokenization_spaces=False,
        model_max_length=MODEL_MAX_LENGTH,
    )
