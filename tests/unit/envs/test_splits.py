"""The partition of a problem space by content (`envs.splits`): positions are salted sha256
values in [0, 1), buckets follow the shares, and rejection draws stay in their bucket."""

from __future__ import annotations

import hashlib
import random
from collections import Counter

import pytest

from envs.splits import ContentSplit, Split, hash_position, held_out_split


def test_a_position_is_the_first_8_bytes_of_the_salted_sha256():
    digest = hashlib.sha256(b"salt\x007+5").digest()
    assert hash_position("salt", "7+5") == int.from_bytes(digest[:8], "big") / 2**64
    assert hash_position("salt", "7+5") != hash_position("other", "7+5")


def test_buckets_follow_the_shares_and_depend_on_content_only():
    split = ContentSplit("s", test=0.2, validation=0.1)
    counts = Counter(split.of(str(i)) for i in range(20_000))
    assert (
        abs(counts[Split.TEST] / 20_000 - 0.2) < 0.01 and abs(counts[Split.VALIDATION] / 20_000 - 0.1) < 0.01
    )
    assert split.of("abc") is split.of("abc")
    x = hash_position("s", "abc")
    expected = Split.TEST if x < 0.2 else Split.VALIDATION if x < 0.3 else Split.TRAIN
    assert split.of("abc") is expected


def test_draw_in_rejects_until_the_bucket_and_gives_up_on_an_empty_one():
    split = ContentSplit("s", test=0.2, validation=0.1)
    rng = random.Random(0)
    drawn = [split.draw_in(Split.TEST, lambda: rng.randrange(10**6), str) for _ in range(200)]
    assert {split.of(str(x)) for x in drawn} == {Split.TEST}
    only_train = next(str(i) for i in range(100) if split.of(str(i)) is Split.TRAIN)
    with pytest.raises(RuntimeError, match="fell outside the test bucket of s"):
        split.draw_in(Split.TEST, lambda: only_train, str)


def test_bad_shares_and_splits_are_refused():
    for test, validation in ((0.0, 0.1), (0.6, 0.4), (0.2, -0.1)):
        with pytest.raises(ValueError, match="split shares"):
            ContentSplit("s", test=test, validation=validation)
    assert held_out_split("validation") is Split.VALIDATION and held_out_split(Split.TEST) is Split.TEST
    with pytest.raises(ValueError, match="unknown held-out split 'val'; choose one of test, validation"):
        held_out_split("val")
