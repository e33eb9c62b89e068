"""`bench perf` sections on one model: the rollout engine (`engine`) and the learner (`learner`).

Both take the model under test (`--model DIR` or the random tiny model) and leave it unchanged:
each side works on its own deep copy.
"""

from __future__ import annotations

import copy
from typing import Any

from bench.perf import comparison, interleaved, timed

# prompts of mixed lengths (2 to 46 tokens with the tiny character tokenizer), cycled
PROMPT_TEXTS = (
    "hi",
    "What is 2+2?",
    "x",
    "The quick brown fox\njumps",
    "a b c d e f g",
    "??",
    "Q: 17*3\nA:",
    "long " * 9,
)


def bench_prompts(tokenizer: Any, n: int) -> list[list[int]]:
    """`n` prompts of mixed lengths as token ids (bos first when the tokenizer has one)."""
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    prompts = []
    for i in range(n):
        ids = bos + tokenizer.encode(PROMPT_TEXTS[i % len(PROMPT_TEXTS)], add_special_tokens=False)
        prompts.append(ids or [tokenizer.eos_token_id or 0])
    return prompts


def _pad_id(tokenizer: Any) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0


def engine_section(model: Any, tokenizer: Any, repeats: int, quick: bool) -> dict[str, Any]:
    """TorchEngine vs transformers `generate`: tokens/s on the same prompts, exactly N new tokens each."""
    import torch

    from bench.engines.base import GenerationRequest, SamplingParams
    from bench.engines.torch_engine import TorchEngine

    B, N = (8, 16) if quick else (32, 64)
    prompts = bench_prompts(tokenizer, B)
    engine = TorchEngine(copy.deepcopy(model), tokenizer, max_batch_size=B)
    engine.eos_ids = set()  # eos is an ordinary token here, so every request runs to N tokens
    sampling = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=N)
    pad, P = _pad_id(tokenizer), max(map(len, prompts))
    ids_B_P = torch.full((B, P), pad, dtype=torch.long)
    mask_B_P = torch.zeros((B, P), dtype=torch.long)
    for b, p in enumerate(prompts):  # left padding, as generate() expects for a decoder-only model
        ids_B_P[b, P - len(p) :] = torch.tensor(p)
        mask_B_P[b, P - len(p) :] = 1
    calls = {"ours": 0, "peer": 0}

    def ours() -> float:
        calls["ours"] += 1
        requests = [
            GenerationRequest(f"r{i}", p, sampling, seed=1000 * calls["ours"] + i)
            for i, p in enumerate(prompts)
        ]
        seconds, completions = timed(lambda: engine.generate(requests))
        if any(len(c.token_ids) != N for c in completions):
            raise RuntimeError("engine: a completion ended before max_new_tokens")
        return B * N / seconds

    def peer() -> float:
        calls["peer"] += 1
        torch.manual_seed(calls["peer"])
        with torch.inference_mode():
            seconds, out = timed(
                lambda: model.generate(
                    input_ids=ids_B_P,
                    attention_mask=mask_B_P,
                    do_sample=True,
                    temperature=1.0,
                    top_p=1.0,
                    top_k=0,
                    max_new_tokens=N,
                    min_new_tokens=N,
                    pad_token_id=pad,
                )
            )
        if out.shape[1] != P + N:
            raise RuntimeError(f"generate: expected {P + N} columns, got {out.shape[1]}")
        return B * N / seconds

    runs_ours, runs_peer = interleaved(ours, peer, repeats)
    return comparison(
        "tokens_per_s",
        runs_ours,
        runs_peer,
        peer="transformers model.generate (HF cache, sdpa)",
        ratio="ours / peer (tokens/s)",
        target=1.5,
        setup={
            "prompts": B,
            "new_tokens_per_prompt": N,
            "prompt_lengths": sorted({len(p) for p in prompts}),
            "engine_slots": B,
            "engine_threads": engine.num_threads or torch.get_num_threads(),
            "peer_threads": torch.get_num_threads(),
            "sampling": "temperature 1.0, top_p 1.0, no top-k",
        },
        notes=[
            "tokens/s = prompts x new tokens / wall seconds of one whole batch, prefill included",
            "eos cannot end a request on either side, so both produce exactly new_tokens_per_prompt tokens: "
            "the engine's eos set is emptied (eos stays an ordinary, samplable token); generate() gets "
            "min_new_tokens = max_new_tokens (its MinNewTokens processor masks the eos logit)",
            "generate() gets top_k=0 because its default top_k=50 would truncate the distribution: both sample "
            "from the full softmax at temperature 1",
            "same prompts; generate() left-pads them to the longest, the engine prefills them in length buckets",
        ],
    )


def learner_section(model: Any, tokenizer: Any, repeats: int, quick: bool) -> dict[str, Any]:
    """One GRPO update through `Learner.train_step` vs a bare PyTorch update on the same batch."""
    import torch

    from algorithms import registry
    from bench.train.learner import Learner, build_batch

    B, T, P, G = (16, 16, 8, 8) if quick else (64, 64, 16, 8)
    lr = 1e-5
    trajectories, rewards = _random_group_batch(tokenizer, B, T, P, G)
    batch = build_batch(trajectories, _pad_id(tokenizer), T)
    grpo = registry.get("grpo")
    learner = Learner(
        grpo(grpo.Config(group_size=G)),
        copy.deepcopy(model).train(),
        policy_lr=lr,
        critic_lr=lr,
        grad_clip=1.0,
        minibatches=1,
        temperature=1.0,
        nan_patience=3,
    )

    def ours() -> float:
        seconds, _ = timed(lambda: learner.train_step(batch))
        return B * T / seconds

    bare_update = _bare_policy_update(model, trajectories, rewards, _pad_id(tokenizer), T, lr)

    def peer() -> float:
        seconds, _ = timed(bare_update)
        return B * T / seconds

    runs_ours, runs_peer = interleaved(ours, peer, repeats)
    return comparison(
        "response_tokens_per_s",
        runs_ours,
        runs_peer,
        peer="bare PyTorch update (forward, log-probs, backward, AdamW)",
        ratio="ours / peer (tokens/s)",
        setup={
            "sequences": B,
            "prompt_tokens": P,
            "response_tokens": T,
            "group_size": G,
            "algorithm": "grpo (defaults)",
            "optimizer": f"AdamW lr {lr}, grad clip 1.0",
            "threads": torch.get_num_threads(),
        },
        notes=[
            "tokens/s = sequences x response tokens / wall seconds of one Learner.train_step (advantages, GRPO's "
            "no-grad old-policy forward, forward with entropy, backward, clip, AdamW step, metrics)",
            "the peer is the least an update must do: one forward (logits of the response window only), "
            "log-probs, a policy-gradient loss, backward, clip, AdamW step; no target, it shows the overhead",
        ],
    )


def _random_group_batch(tokenizer: Any, B: int, T: int, P: int, G: int) -> tuple[list[Any], list[float]]:
    """B trajectories of random non-special tokens (prompts P, responses T) in groups of G, and
    their random rewards (seeded: the same batch every time)."""
    import torch

    from bench.rollout.episode import Trajectory

    gen = torch.Generator().manual_seed(0)
    special = set(tokenizer.all_special_ids)
    vocab = torch.tensor([i for i in range(len(tokenizer)) if i not in special])

    def tokens(n: int) -> list[int]:
        return vocab[torch.randint(len(vocab), (n,), generator=gen)].tolist()

    rewards = torch.rand(B, generator=gen).tolist()
    trajectories = [
        Trajectory(
            prompt_key=f"p{b // G}",
            group_id=b // G,
            prompt_ids=tokens(P),
            response_ids=tokens(T),
            action_mask=[1] * T,
            rollout_logp=[0.0] * T,
            versions=[0] * T,
            reward=rewards[b],
        )
        for b in range(B)
    ]
    return trajectories, rewards


def _bare_policy_update(
    model: Any, trajectories: list[Any], rewards: list[float], pad_id: int, T: int, lr: float
):
    """The least a policy update must do, on a copy of `model`: one forward (logits of the
    response window only), log-probs, a policy-gradient loss, backward, clip, AdamW step."""
    import torch

    from bench.models.packing import pack

    bare = copy.deepcopy(model).train()
    opt = torch.optim.AdamW(bare.parameters(), lr=lr, weight_decay=0.0)
    packed = pack([t.prompt_ids for t in trajectories], [t.response_ids for t in trajectories], pad_id)
    targets_B_T = packed.input_ids_B_L[:, packed.prompt_len :]
    mask_B_T = packed.response_mask_B_T
    adv_B = torch.tensor(rewards) - torch.tensor(rewards).mean()

    def bare_update() -> None:
        logits = bare(
            input_ids=packed.input_ids_B_L,
            attention_mask=packed.attention_mask_B_L,
            position_ids=packed.position_ids_B_L,
            use_cache=False,
            logits_to_keep=T + 1,
        ).logits
        logp_B_T = logits[:, :-1].float().log_softmax(-1).gather(-1, targets_B_T[..., None]).squeeze(-1)
        loss = -(logp_B_T * adv_B[:, None] * mask_B_T).sum() / mask_B_T.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(bare.parameters(), 1.0)
        opt.step()

    return bare_update


def length_buckets_section(model: Any, tokenizer: Any, repeats: int, quick: bool) -> dict[str, Any]:
    """One SAO learner step (critic values, K critic updates, policy update) on a batch with
    arith's heavy-tailed lengths: forwards per length bucket vs one batch padded to the longest."""
    import torch

    from algorithms import registry
    from bench.train.learner import Learner, build_batch

    B = 16 if quick else 64
    trajectories = _arith_batch(tokenizer, B)
    T = max(len(t.response_ids) for t in trajectories)
    sao = registry.get("sao")

    def learner() -> Learner:
        return Learner(
            sao(sao.Config(critic_warmup_steps=0)),
            copy.deepcopy(model).train(),
            policy_lr=1e-5,
            critic_lr=1e-5,
            grad_clip=1.0,
            minibatches=1,
            temperature=1.0,
            nan_patience=3,
        )

    bucketed, padded = (
        build_batch(trajectories, _pad_id(tokenizer), T),
        build_batch(trajectories, _pad_id(tokenizer), T, length_buckets=False),
    )
    ours_learner, peer_learner = learner(), learner()
    runs_ours, runs_peer = interleaved(
        lambda: timed(lambda: ours_learner.train_step(bucketed))[0],
        lambda: timed(lambda: peer_learner.train_step(padded))[0],
        repeats,
    )
    lengths = sorted(len(t.prompt_ids) + len(t.response_ids) for t in trajectories)
    return comparison(
        "seconds_per_learner_step",
        runs_ours,
        runs_peer,
        peer="the same Learner.train_step on one batch padded to its longest row (length_buckets=false)",
        ratio="peer / ours (speedup)",
        higher_is_better=True,
        setup={
            "algorithm": "sao (critic warmup 0, K=2 critic updates)",
            "sequences": B,
            "total_lengths": {"min": lengths[0], "median": lengths[len(lengths) // 2], "max": lengths[-1]},
            "buckets": [len(rows) for rows, _ in bucketed.rows.buckets],
            "padded_tokens": {
                "bucketed": sum(p.input_ids_B_L.numel() for _, p in bucketed.rows.buckets),
                "one_batch": sum(p.input_ids_B_L.numel() for _, p in padded.rows.buckets),
            },
            "threads": torch.get_num_threads(),
        },
        notes=[
            "rows: arith problems (the task's own sampler, seed 0) with their exact worked solutions",
            "both sides compute the same losses and gradients (tests/unit/test_length_buckets.py)",
        ],
    )


def _arith_batch(tokenizer: Any, B: int) -> list[Any]:
    """B arith problems (the task's own sampler, seed 0) with their exact worked solutions as
    responses and coin-flip rewards: arith's heavy-tailed lengths."""
    import random

    from bench.rollout.episode import Trajectory
    from envs.arith import ArithTask, worked_solution

    task, rng = ArithTask(), random.Random(0)
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    trajectories = []
    for b in range(B):
        problem = task.sample_problem(rng)
        completion = worked_solution(problem.meta["operands"], problem.meta["ops"])
        response = tokenizer.encode(completion, add_special_tokens=False)
        trajectories.append(
            Trajectory(
                prompt_key=problem.key,
                group_id=b,
                prompt_ids=bos + tokenizer.encode(problem.prompt, add_special_tokens=False),
                response_ids=response,
                action_mask=[1] * len(response),
                rollout_logp=[0.0] * len(response),
                versions=[0] * len(response),
                reward=float(rng.random() < 0.5),
            )
        )
    return trajectories
