"""`bench compare` and `bench sweep` derive their options from their specs' fields: every option
is documented, with its default; the same command line makes the same experiment as the
hand-written options of before did (its fingerprint, so an existing directory resumes)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from bench.cli import build_parser
from bench.commands import compare, sweep
from sweeps.comparison import ComparisonSpec, EvalPlan
from sweeps.launch import LaunchOptions
from sweeps.sweep import SweepSpec


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


@pytest.mark.parametrize(
    "command, classes",
    [("compare", (ComparisonSpec, EvalPlan, LaunchOptions)), ("sweep", (SweepSpec, LaunchOptions))],
)
def test_every_option_is_documented_with_its_default(command, classes):
    options = {a.dest: a for a in _subparser(command)._actions if a.option_strings and a.dest != "help"}
    assert all(a.help for a in options.values())
    for cls in classes:
        for f in dataclasses.fields(cls):
            if "flag" not in f.metadata:
                continue
            assert f.metadata["flag"] in options[f.name].option_strings
            default = f.default if f.default is not dataclasses.MISSING else None
            shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
            if shown not in (None, "", ()):
                assert options[f.name].help.endswith(f"(default: {shown})"), options[f.name].help
    assert "(default: async)" in options["mode"].help


@pytest.mark.parametrize(
    "argv, fingerprint",
    [
        (
            [
                "compare",
                "--algos",
                "sao,grpo+dis",
                "--budget",
                "trajectories=640",
                "--seeds",
                "2",
                "--eval-k",
                "2",
            ]
            + ["--set", "trajectories_per_step=32", "--mode", "sync"],
            "b87562b0bc621519",
        ),
        (
            ["compare", "--algos", "ppo:vapo", "--budget", "minutes=1.5", "--seeds", "0,3"]
            + ["--eval-bench", "arith,gsm8k", "--eval-every", "5", "--select", "best-on=arith-val"],
            "d2a63f6e53275c32",
        ),
        (
            ["sweep", "--algo", "grpo", "--budget", "trajectories=640", "--trials", "6", "--seeds", "2"]
            + ["--pruner", "hyperband", "--eval-every", "4"],
            "659910fc1f69",
        ),
        (
            ["sweep", "--algos", "sao,grpo", "--budget", "tokens=20000", "--objective", "reward/final"]
            + ["--sampler", "random", "--set", "max_new_tokens=32"],
            "ed990d9e5f69",
        ),
    ],
)
def test_a_command_line_makes_the_same_experiment_as_before(argv, fingerprint):
    """The fingerprints were computed by the hand-written options of commit 2988a4b."""
    args = build_parser().parse_args(argv)
    module = compare if argv[0] == "compare" else sweep
    assert module.build_spec(args).fingerprint() == fingerprint
