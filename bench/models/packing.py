"""Packing (prompt, response) rows into padded batches, and length buckets of rows.

Shape suffixes: `_B` one row per sequence, `_L` one column per position of the packed
sequence (prompt + response), `_T` one column per response token.

Packed layout (`pack`): prompts are LEFT-padded to the longest prompt P and responses
RIGHT-padded to the longest response T, so every row's prompt ends at column P-1 and its
response starts at column P. Then the logits at columns P-1 .. P+T-2 predict the T response
tokens for every row at once (`bench.models.logprobs.response_logprobs`) and the critic reads
its values from the same columns (`bench.models.critic.ValueModel.forward_values`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F


@dataclass
class PackedBatch:
    """Prompts left-padded to `prompt_len` (P), responses right-padded to `response_len` (T)."""

    input_ids_B_L: torch.Tensor  # [B, P+T] long
    attention_mask_B_L: torch.Tensor  # [B, P+T] long, 1 = real token
    position_ids_B_L: torch.Tensor  # [B, P+T] long, cumsum(mask)-1 clamped at 0
    response_mask_B_T: torch.Tensor  # [B, T] float32, 1 = real response token
    prompt_len: int
    response_len: int

    def to(self, device: torch.device | str) -> PackedBatch:
        """The same batch on `device`."""
        return PackedBatch(
            self.input_ids_B_L.to(device),
            self.attention_mask_B_L.to(device),
            self.position_ids_B_L.to(device),
            self.response_mask_B_T.to(device),
            self.prompt_len,
            self.response_len,
        )


def pack(prompts: list[list[int]], responses: list[list[int]], pad_id: int) -> PackedBatch:
    """Pack (prompt, response) token lists into one left/right-padded batch (module docstring)."""
    if len(prompts) != len(responses):
        raise ValueError(f"pack: {len(prompts)} prompts but {len(responses)} responses")
    if any(len(p) == 0 for p in prompts):
        raise ValueError("pack: every prompt needs at least one token (the bos token)")
    B = len(prompts)
    P = max((len(p) for p in prompts), default=0)
    T = max((len(r) for r in responses), default=0)
    input_ids_B_L = torch.full((B, P + T), pad_id, dtype=torch.long)
    attention_mask_B_L = torch.zeros((B, P + T), dtype=torch.long)
    response_mask_B_T = torch.zeros((B, T), dtype=torch.float32)
    for b, (prompt, response) in enumerate(zip(prompts, responses)):
        start, end = P - len(prompt), P + len(response)
        input_ids_B_L[b, start:P] = torch.tensor(prompt, dtype=torch.long)
        input_ids_B_L[b, P:end] = torch.tensor(response, dtype=torch.long)
        attention_mask_B_L[b, start:end] = 1
        response_mask_B_T[b, : len(response)] = 1.0
    # positions count real tokens only, so a left-padded prompt starts at position 0
    position_ids_B_L = (attention_mask_B_L.cumsum(-1) - 1).clamp(min=0)
    return PackedBatch(input_ids_B_L, attention_mask_B_L, position_ids_B_L, response_mask_B_T, P, T)


# Per-bucket cost of one more forward/backward call, in padded tokens: ~5 ms of call overhead
# against ~50 us per token of a tiny-model step on a CPU core. It keeps the partition from
# splitting a batch into many small calls when the padding it saves is worth less.
BUCKET_OVERHEAD_TOKENS = 128


def length_buckets(
    lengths: list[int], overhead_tokens: int = BUCKET_OVERHEAD_TOKENS, max_tokens: int | None = None
) -> list[list[int]]:
    """Partition row indices into buckets of similar length with the least padded compute.

    Rows are sorted by length; a bucket of n rows whose longest row has L tokens costs n * L
    padded tokens plus `overhead_tokens`. Dynamic programming over the sorted rows finds the
    partition of least total cost (exact, O(B^2) vectorised; of equal-cost partitions the one
    with the longest last bucket). With `max_tokens`, no bucket holds more than that many
    padded tokens unless it is a single row (a memory bound). With heavy-tailed lengths (arith,
    multi-turn episodes) one long row no longer pads the whole batch to its length. The
    learner's batches and the engine's prompt prefill are both cut this way.
    """
    if not lengths:
        return []
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    sorted_len = torch.tensor([lengths[i] for i in order], dtype=torch.float64)
    n = len(order)
    best = torch.zeros(n + 1, dtype=torch.float64)  # best[j]: least cost of the first j rows
    cut = [0] * (n + 1)  # cut[j]: where the last bucket of the best partition of j rows starts
    starts = torch.arange(n, dtype=torch.float64)
    for j in range(1, n + 1):
        # last bucket = sorted rows i..j-1, padded to sorted_len[j-1]
        padded = (j - starts[:j]) * sorted_len[j - 1]
        cost = best[:j] + padded + overhead_tokens
        if max_tokens is not None:
            too_big = padded > max_tokens
            too_big[j - 1] = False  # a single row is always a bucket of its own
            cost = cost.masked_fill(too_big, float("inf"))
        i = int(torch.argmin(cost))
        best[j], cut[j] = cost[i], i
    buckets, j = [], n
    while j > 0:
        buckets.append(order[cut[j] : j])
        j = cut[j]
    return buckets[::-1]


def split_to(groups: list[list[int]], count: int) -> list[list[int]]:
    """`groups` of row indices split until there are `count` of them: the group with the most
    rows is cut in two halves (its order kept), again and again. Forwards per group then stitch
    to the same results; only the padding and the number of calls change."""
    groups = [list(g) for g in groups]
    while len(groups) < count:
        i = max(range(len(groups)), key=lambda n: len(groups[n]))
        if len(groups[i]) < 2:
            raise ValueError(f"split_to: cannot make {count} groups of {sum(map(len, groups))} rows")
        half = len(groups[i]) // 2
        groups[i : i + 1] = [groups[i][:half], groups[i][half:]]
    return groups


@dataclass
class BucketedBatch:
    """One batch as length buckets, each packed on its own, so a forward pays for each bucket's
    own padding instead of the longest row's. `map` runs a per-bucket function and stitches the
    [b, T_bucket] results back into [B, T] rows in the batch's order (zero on padding), so callers
    (losses, advantages) see exactly the tensors one packed batch would give."""

    prompts: list[list[int]]
    responses: list[list[int]]
    pad_id: int
    bucketed: bool  # false: one bucket, the plain packed batch
    response_len: int  # T of `map` results (columns past a row's response are zero)
    buckets: list[tuple[torch.Tensor, PackedBatch]]  # (row indices in the batch, those rows packed)
    # data-parallel ranks run the same number of forwards (each is a collective under FSDP2):
    # `agree(n)` is the largest n of any rank, and a rank with fewer buckets or chunks splits some
    agree: Callable[[int], int] | None = None

    @classmethod
    def build(
        cls,
        prompts: list[list[int]],
        responses: list[list[int]],
        pad_id: int,
        bucketed: bool = True,
        response_len: int | None = None,
        agree: Callable[[int], int] | None = None,
    ) -> BucketedBatch:
        """Pack (prompt, response) rows into length buckets (one bucket when `bucketed` is false);
        `map` results are [B, response_len] (default: the longest response); `agree`: see the field."""
        lengths = [len(p) + len(r) for p, r in zip(prompts, responses, strict=True)]
        groups = length_buckets(lengths) if bucketed else [list(range(len(lengths)))]
        if agree is not None:
            groups = split_to(groups, agree(len(groups)))
        buckets = [
            (torch.tensor(rows), pack([prompts[i] for i in rows], [responses[i] for i in rows], pad_id))
            for rows in groups
        ]
        if response_len is None:
            response_len = max((len(r) for r in responses), default=0)
        return cls(prompts, responses, pad_id, bucketed, response_len, buckets, agree)

    @property
    def batch_size(self) -> int:
        """B, the number of rows."""
        return len(self.prompts)

    def map(self, fn: Any) -> Any:
        """`fn(PackedBatch)` -> a [b, T_bucket] tensor or a tuple of them (None entries pass
        through); returns the same structure stitched to [B, T] in batch order."""
        return self._stitch([fn(packed) for _, packed in self.buckets], [rows for rows, _ in self.buckets])

    def _stitch(self, outs: list[Any], groups: list[torch.Tensor]) -> Any:
        """Results of disjoint groups of rows (`groups[i]` the batch rows of `outs[i]`, each a
        [b, T_i] tensor or a tuple of them; None entries pass through), padded to [b, T] and put
        back in batch order."""
        single = not isinstance(outs[0], tuple)
        order = torch.cat(groups)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(len(order))
        T = self.response_len
        stitched = []
        for parts in zip(*[(o,) if single else o for o in outs], strict=True):
            if parts[0] is None:
                stitched.append(None)
                continue
            padded = [F.pad(t, (0, T - t.shape[1])) for t in parts]
            stitched.append(torch.cat(padded)[inverse.to(padded[0].device)])
        return stitched[0] if single else tuple(stitched)

    def token_chunks(self, max_tokens: int) -> list[torch.Tensor]:
        """Row indices cut into chunks of at most `max_tokens` padded tokens (rows taken shortest
        first, a chunk costing its row count times its longest row; a row longer than the budget
        is a chunk of its own). One chunk, all rows in order, when the batch fits."""
        lengths = [len(p) + len(r) for p, r in zip(self.prompts, self.responses, strict=True)]
        chunks: list[list[int]] = [[]]
        if len(lengths) * max(lengths, default=0) <= max_tokens:
            chunks = [list(range(len(lengths)))]
        else:
            for i in sorted(range(len(lengths)), key=lambda n: lengths[n]):
                if chunks[-1] and (len(chunks[-1]) + 1) * lengths[i] > max_tokens:
                    chunks.append([])
                chunks[-1].append(i)
        if self.agree is not None:
            chunks = split_to(chunks, self.agree(len(chunks)))
        return [torch.tensor(c) for c in chunks]

    def map_chunks(self, chunks: list[torch.Tensor], fn: Any) -> Any:
        """`map(fn)` run one chunk of rows at a time (`token_chunks`), stitched back to [B, T] in
        batch order: the same results, with the activation memory of one chunk."""
        if len(chunks) == 1:
            return self.map(fn)
        return self._stitch([self.select(rows).map(fn) for rows in chunks], chunks)

    def select(self, rows: torch.Tensor) -> BucketedBatch:
        """The sub-batch of `rows` (a minibatch), bucketed on its own, results still [b, T]."""
        picked = rows.tolist()
        return BucketedBatch.build(
            [self.prompts[i] for i in picked],
            [self.responses[i] for i in picked],
            self.pad_id,
            self.bucketed,
            self.response_len,
            self.agree,
        )
