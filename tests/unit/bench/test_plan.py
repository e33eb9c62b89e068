"""`bench plan`: the parts, the verdict and the JSON through the CLI entry point; the algorithm
decides the critic and the reference; bad input is one line and exit 2."""

from __future__ import annotations

import json

import pytest

from bench.cli import main
from bench.models.memory import GIB


def plan(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_grpo_holds_no_critic_and_a_reference_only_with_a_kl_term(capsys):
    code, out, _ = plan(capsys, "--model", "qwen3-0.6b", "--algo", "grpo", "--json")
    result = json.loads(out)
    assert code == 0 and result["computed"] and result["fits"]
    assert "critic" not in result["parts"] and "reference" not in result["parts"]
    state = sum(result["parts"][k]["bytes"] for k in ("weights", "grads", "optimizer"))
    assert state == 16 * 596_049_920 == 16 * result["parameters"]
    _, out, _ = plan(capsys, "--model", "qwen3-0.6b", "--algo", "grpo", "--set", "algo.beta=0.04", "--json")
    assert json.loads(out)["parts"]["reference"]["bytes"] == 4 * 596_049_920  # fp32, one GPU


def test_sao_trains_a_frozen_attention_critic_and_the_table_reads(capsys):
    code, out, _ = plan(capsys, "--model", "qwen3-4b", "--algo", "sao")
    assert code == 0
    assert "attention frozen" in out and "does NOT fit in 80 GiB per GPU" in out  # fp32 on one GPU
    _, out, _ = plan(capsys, "--model", "qwen3-4b", "--algo", "sao", "--learner-gpus", "8", "--json")
    result = json.loads(out)
    assert result["fits"] and result["parts"]["weights"]["bytes"] == 4 * 4_022_468_096 // 8
    _, out, _ = plan(
        capsys, "--model", "qwen3-4b", "--algo", "sao", "--preset", "full-parameter-critic", "--json"
    )
    assert "all trainable" in json.loads(out)["parts"]["critic"]["how"]


def test_an_engine_share_too_small_for_its_weights_does_not_fit(capsys):
    args = ("--model", "qwen3-8b", "--algo", "grpo", "--learner-gpus", "8", "--json")
    _, out, _ = plan(capsys, *args, "--engine-memory-utilization", "0.1", "--gpu-memory", "80")
    result = json.loads(out)
    assert (
        result["total_bytes"] < 80 * GIB and not result["engine_weights_fit_its_share"] and not result["fits"]
    )


def test_tiny_and_a_local_directory(capsys, tmp_path):
    code, out, _ = plan(capsys, "--json")  # tiny, sao
    assert code == 0 and json.loads(out)["parameters"] < 2_000_000
    (tmp_path / "config.json").write_text(
        json.dumps(
            {"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 128}
            | {"num_hidden_layers": 2, "num_attention_heads": 4, "tie_word_embeddings": True}
        )
    )
    code, out, _ = plan(capsys, "--model", str(tmp_path), "--json")
    assert (
        code == 0 and json.loads(out)["parameters"] == 100 * 64 + 2 * (4 * 64 * 64 + 3 * 64 * 128 + 128) + 64
    )


def test_the_docs_table_has_every_row(capsys):
    code, out, _ = plan(capsys, "--table")
    rows = [line for line in out.splitlines() if line.startswith("| qwen3")]
    assert code == 0 and len(rows) == 4 * 2 * 2 * 2


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--model", "qwen3-5b"],
            "not a known shape and no config.json there; valid: tiny, smollm2, qwen3-0.6b",
        ),
        (["--learner-gpus", "0"], "--learner-gpus must be a positive number, got 0"),
        (["--gpu-memory", "nan"], "--gpu-memory must be a positive number"),
        (["--learner-chunk-tokens", "-1"], "--learner-chunk-tokens must be >= 0"),
        (["--engine-memory-utilization", "1.5"], "--engine-memory-utilization must be in [0, 1)"),
        (["--algo", "grpp"], "unknown algorithm 'grpp'; did you mean 'grpo'?"),
        (["--algo", "grpo", "--set", "algo.betta=1"], "algo.betta: unknown field of grpo"),
        (["--set", "steps=3"], "--set: bench plan takes only algo.FIELD=VALUE"),
        (["--algo", "sao", "--preset", "nope"], "sao config:"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, args, message):
    code, out, err = plan(capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith("bench: error: ") and message in err and err.count("\n") == 1
