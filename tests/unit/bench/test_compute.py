"""A step's model FLOPs (`bench.train.compute`), by hand on a shape small enough to count."""

from __future__ import annotations

from types import SimpleNamespace

from algorithms.base import CriticSettings
from bench.models.shapes import DecoderShape
from bench.train.compute import StepFlops, episode_flops, learner_flops, step_flops

# one layer, hidden 2, one head of dim 2, MLP width 3, vocabulary 5, no biases:
#   body matmul params per token: q, k, v, o 2x2 each (16) + gate, up, down 2x3 each (18) = 34
#   LM head 5x2 = 10; value head 2x1 = 2; attention per (query, key) pair: 1 layer x 4 x 1 x 2 = 8
SHAPE = DecoderShape(
    layers=1, hidden=2, heads=1, kv_heads=1, head_dim=2, intermediate=3, vocab=5, tied_embeddings=False
)
LENGTHS = [3, 5]  # two sequences, 8 tokens, 9 + 25 = 34 (query, key) pairs
FORWARD = 2 * (34 + 10) * 8 + 8 * 34  # 704 + 272 = 976
TRAIN = 3 * FORWARD  # forward + a backward of twice its FLOPs: 2928
VALUE_TRAIN = 3 * (2 * (34 + 2) * 8 + 8 * 34)  # 3 x 848 = 2544
FROZEN_VALUE_TRAIN = VALUE_TRAIN - 2 * 16 * 8  # the attention projections' weight gradients: 2288


def test_a_policy_update_is_a_forward_and_a_backward_of_every_sequence():
    flops = learner_flops(SHAPE, LENGTHS, needs=frozenset(), critic=None, minibatches=1, policy_updated=True)
    assert flops == StepFlops(policy=TRAIN) and TRAIN == 2928


def test_no_grad_passes_only_where_the_learner_runs_them():
    # old_logp with one minibatch comes from the update's own forward: no extra pass
    one = learner_flops(
        SHAPE, LENGTHS, needs=frozenset({"old_logp"}), critic=None, minibatches=1, policy_updated=True
    )
    assert one.no_grad == 0
    two = learner_flops(
        SHAPE, LENGTHS, needs=frozenset({"old_logp"}), critic=None, minibatches=2, policy_updated=True
    )
    assert two == StepFlops(policy=TRAIN, no_grad=FORWARD)
    both = learner_flops(
        SHAPE,
        LENGTHS,
        needs=frozenset({"old_logp", "ref_logp"}),
        critic=None,
        minibatches=4,
        policy_updated=True,
    )
    assert both.no_grad == 2 * 976


def test_the_critic_counts_k_updates_and_frozen_attention_saves_weight_gradients():
    full = learner_flops(
        SHAPE,
        LENGTHS,
        needs=frozenset(),
        critic=CriticSettings(updates_per_step=1),
        minibatches=1,
        policy_updated=True,
    )
    assert full == StepFlops(policy=TRAIN, critic=2544)
    sao = CriticSettings(updates_per_step=2, freeze_attention=True)
    frozen = learner_flops(SHAPE, LENGTHS, needs=frozenset(), critic=sao, minibatches=1, policy_updated=True)
    assert frozen.critic == 2 * FROZEN_VALUE_TRAIN == 4576
    # a critic-warmup step: the critic trains, the policy does not
    warmup = learner_flops(
        SHAPE, LENGTHS, needs=frozenset({"ref_logp"}), critic=sao, minibatches=1, policy_updated=False
    )
    assert warmup == StepFlops(critic=4576)


def test_generation_counts_each_engine_request():
    # prompt 3, 2 new tokens: prefill of 3 positions (9 pairs) with the LM head on the last one,
    # then one decode at position 3 (4 keys) with its head row:
    #   body 68 x (3 + 2 - 1) + head 20 x 2 + 8 x (9 + 4) = 272 + 40 + 104 = 416
    # a second turn of the same episode: prompt 6 (the first turn and an observation), 1 token:
    #   body 68 x 6 + head 20 + 8 x 36 = 408 + 20 + 288 = 716
    episode = SimpleNamespace(requests=[(3, 2), (6, 1)])
    other = SimpleNamespace(requests=[(3, 0)])  # nothing generated: no forward
    assert episode_flops(SHAPE, [episode, other]) == 416 + 716
    assert episode_flops(SHAPE, []) == 0


def test_a_step_adds_generation_of_everything_taken_to_the_learner_on_what_was_trained():
    def traj(prompt, response):
        return SimpleNamespace(
            prompt_ids=[0] * prompt, response_ids=[0] * response, requests=[(prompt, response)]
        )

    trained = [traj(1, 2), traj(2, 3)]  # lengths 3 and 5
    dropped = traj(3, 2)  # generated, then discarded as stale: its generation counts
    learner = SimpleNamespace(algo=SimpleNamespace(needs=frozenset(), critic=None), minibatches=1)
    flops = step_flops(SHAPE, learner, trained, [*trained, dropped], policy_updated=True)
    assert flops.policy == TRAIN and flops.generation == episode_flops(SHAPE, [*trained, dropped])
    assert flops.total == flops.generation + TRAIN
    metrics = flops.as_metrics()
    parts = ("budget/step_generation_flops", "budget/step_policy_flops", "budget/step_critic_flops")
    assert metrics["budget/step_flops"] == sum(metrics[k] for k in parts)
    assert step_flops(None, learner, trained, trained, policy_updated=True) is None
