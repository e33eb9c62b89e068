"""`bench power`: how many seeds, problems and samples a difference needs at a given power.

    bench power PILOT --diff 3 [--arm A --baseline B] [--benchmark NAME] [--problems 200,1000] [--samples 2,4]
    bench power --diff 3 --seed-sd 2 --seed-problem-sd 10 --sample-sd 45 --problem-sd 8 --problems 1000 --samples 2

PILOT is a comparison directory, or a report directory with its `score_matrix.csv` (or, for
references made before it, `tables/per_seed.csv`: seeds only). Standard deviations and the
difference are in points of % (the model: `benchmarks.power`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.errors import UsageError

DIRECT = ("seed_sd", "seed_problem_sd", "sample_sd", "problem_sd")
"""The variance components given directly (as standard deviations in points), instead of a pilot."""


def register(sub) -> None:
    """Add `bench power` to the subcommands."""
    p = sub.add_parser(
        "power", help="seeds, problems and samples a difference needs, from a pilot comparison"
    )
    p.add_argument("pilot", nargs="?", metavar="PILOT", help="a comparison or report directory (see above)")
    p.add_argument(
        "--diff",
        type=float,
        required=True,
        metavar="POINTS",
        help="the difference to detect, in points of %%",
    )
    p.add_argument("--arm", default=None, help="the arm (default: the first of a two-arm pilot)")
    p.add_argument("--baseline", default=None, help="the arm it is compared with")
    p.add_argument("--benchmark", default=None, help="the benchmark (default: the pilot's only one)")
    p.add_argument("--power", type=float, default=0.8, help="the power wanted (default 0.8)")
    p.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="two-sided level (default 0.05; 0.05/m for m primary claims)",
    )
    p.add_argument(
        "--problems", default=None, metavar="N[,N]", help="problem counts to plan for (default: the pilot's)"
    )
    p.add_argument(
        "--samples",
        default=None,
        metavar="K[,K]",
        help="samples per problem to plan for (default: the pilot's)",
    )
    for name, text in (
        ("seed-sd", "between-seed SD of an arm's score (both arms), instead of a pilot"),
        ("seed-sd-baseline", "the baseline's between-seed SD (default: --seed-sd)"),
        ("seed-problem-sd", "SD of the seed x problem interaction"),
        ("sample-sd", "SD of one 0/1 sample, sqrt(p(1-p)) averaged (about 45 near 70%% accuracy)"),
        ("problem-sd", "SD over problems of the arms' expected per-problem difference"),
    ):
        p.add_argument(f"--{name}", type=float, default=None, metavar="POINTS", help=text)
    p.set_defaults(func=run)


def _counts(text: str | None, flag: str) -> list[int] | None:
    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise UsageError(f"{flag} {text!r}: give positive whole numbers separated by commas, e.g. 200,1000")
    return values


def _check(args: argparse.Namespace) -> None:
    """Every input error, before anything is read."""
    if args.diff <= 0:
        raise UsageError(
            f"--diff {args.diff:g}: give the difference to detect as a positive number of points"
        )
    if not 0 < args.power < 1 or not 0 < args.alpha < 1:
        raise UsageError("--power and --alpha must lie strictly between 0 and 1")
    given = [n for n in DIRECT if getattr(args, n) is not None]
    if args.pilot is not None and (given or args.seed_sd_baseline is not None):
        raise UsageError("give a PILOT or the variances (--seed-sd ...), not both")
    if args.pilot is None and len(given) < len(DIRECT):
        missing = ", ".join("--" + n.replace("_", "-") for n in DIRECT if getattr(args, n) is None)
        raise UsageError(f"give a PILOT directory, or every variance: missing {missing}")
    if args.pilot is None and (args.problems is None or args.samples is None):
        raise UsageError("without a PILOT, say the design to plan for: --problems N[,N] --samples K[,K]")
    if args.pilot is not None and not Path(args.pilot).is_dir():
        raise UsageError(f"{args.pilot}: no such directory (a comparison or report directory)")


def run(args: argparse.Namespace) -> int:
    """Handler of `bench power`."""
    _check(args)
    problems, samples = _counts(args.problems, "--problems"), _counts(args.samples, "--samples")
    from benchmarks.power import Design, Variances
    from results.plan import Pilot, PlanError, load_pilot, plan_table, seed_side_plan
    from results.tables import format_table

    diff = args.diff / 100
    if args.pilot is None:
        sd = {n: getattr(args, n) / 100 for n in DIRECT}
        baseline_sd = (args.seed_sd_baseline if args.seed_sd_baseline is not None else args.seed_sd) / 100
        var = Variances(
            sd["seed_sd"] ** 2,
            baseline_sd**2,
            sd["seed_problem_sd"] ** 2,
            sd["sample_sd"] ** 2,
            sd["problem_sd"] ** 2,
        )
        pilot = Pilot(
            "the variances given", "arm", "baseline", "-", Design(2, problems[0], samples[0]), var, (0.0, 0.0)
        )
    else:
        try:
            pilot = load_pilot(Path(args.pilot), args.arm, args.baseline, args.benchmark)
        except PlanError as exc:
            raise UsageError(str(exc)) from None
    d = pilot.design
    print(
        f"pilot: {pilot.source}: {pilot.arm} minus {pilot.baseline} on {pilot.benchmark}"
        + (
            f", {d.seeds} seeds per arm, {d.problems} problems, {d.samples} samples each"
            if args.pilot
            else ""
        )
    )
    if pilot.variances is None:
        seeds, at = seed_side_plan(pilot, diff, args.alpha, args.power)
        print(
            f"seed-mean SDs (points): {100 * pilot.seed_mean_vars[0] ** 0.5:.2f}, {100 * pilot.seed_mean_vars[1] ** 0.5:.2f}; "
            f"MDE at the pilot's {d.seeds} seeds: {100 * at:.2f} points"
        )
        print(
            f"a difference of {args.diff:g} points at {args.power:.0%} power (alpha {args.alpha:g}, seed-level t): "
            f"{seeds if seeds else '> 1000'} seeds per arm at {d.problems} problems x {d.samples} samples; other "
            f"designs and the problem side need the cells ({pilot.source} has per-seed means only)"
        )
        return 0
    v = pilot.variances
    print(
        f"variance components (SD, points): seeds {100 * v.seed_a**0.5:.2f} ({pilot.arm}), "
        f"{100 * v.seed_b**0.5:.2f} ({pilot.baseline}); seed x problem {100 * v.seed_problem**0.5:.1f}; "
        f"one sample {100 * v.sample**0.5:.1f}; problem x arm {100 * v.problem**0.5:.1f}"
    )
    table = plan_table(pilot, diff, problems or [d.problems], samples or [d.samples], args.alpha, args.power)
    print(
        f"a difference of {args.diff:g} points at {args.power:.0%} power (alpha {args.alpha:g}, "
        "both the seed-level and the bootstrap's interval):"
    )
    print(format_table(table.to_dict("records"), list(table.columns)))
    return 0
