"""`bench algos`: list the registered algorithms, explain one (`bench algos NAME`), or check that
a plugin conforms to the contract (`bench algos --check [NAME]`)."""

from __future__ import annotations

import argparse
import json
import sys

from bench.commands import add_plugin_option, load_plugins


def register(sub) -> None:
    """Add `bench algos` to the subcommands."""
    p = sub.add_parser(
        "algos",
        help="list registered algorithms, explain one (NAME), or check a plugin (--check)",
        description="Without NAME: the registered algorithms. With NAME: its summary, paper, config fields "
        "(types, defaults, help), presets and what each changes, what it needs per preset, group size, critic "
        "settings and where it comes from. --check: a conformance check of NAME (or of every algorithm).",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="the algorithm to explain or check")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument(
        "--check",
        action="store_true",
        help="run the plugin conformance check on NAME (every algorithm without NAME): random batches with "
        "padding, observation tokens and NaN in masked positions; one line per failure; exit 1 on any",
    )
    add_plugin_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Handler of `bench algos`."""
    from algorithms import registry

    load_plugins(args)
    if args.name is not None:
        registry.check(args.name)
    if args.check:
        return _check(registry, [args.name] if args.name else registry.names(), args.json)
    if args.name is not None:
        info = registry.describe(args.name)
        print(json.dumps(info, indent=2, default=str) if args.json else format_algorithm(info))
        return 0
    return _list(registry, args.json)


def _list(registry, as_json: bool) -> int:
    """Every algorithm that loads, as a table or JSON; then one line on stderr for each plugin
    that does not (the others are listed all the same, and the exit code stays 0)."""
    from results.tables import print_table

    rows, broken = [], []
    for name in registry.names():
        try:
            rows.append(registry.describe(name))
        except registry.RegistryError as exc:
            broken.append(str(exc))
    broken += registry.refused()
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
        _report_broken(broken)
        return 0
    for r in rows:
        r["critic"] = "yes" if r["critic"] else "no"
        r["presets"] = ",".join(r["presets"]) or "-"
    print_table(rows, ["name", "rollouts_per_prompt", "critic", "presets", "source", "summary"])
    print("\n`bench algos NAME` explains one; `bench algos --check NAME` checks a plugin.")
    _report_broken(broken)
    return 0


def _report_broken(lines: list[str]) -> None:
    """One `bench: warning: ...` line on stderr per plugin that cannot be used."""
    for line in lines:
        print(f"bench: warning: {line}", file=sys.stderr)


def _check(registry, names: list[str], as_json: bool) -> int:
    """Run `algorithms.conformance.check_algorithm` on each name; exit 1 when any fails (a
    plugin that cannot be loaded fails with its error as the one line)."""
    from algorithms.conformance import check_algorithm

    results = {}
    for name in names:
        try:
            results[name] = check_algorithm(registry.get(name), name)
        except registry.RegistryError as exc:
            results[name] = [str(exc)]
    if as_json:
        print(
            json.dumps(
                {name: {"ok": not failures, "failures": failures} for name, failures in results.items()}
            )
        )
    else:
        for name, failures in results.items():
            for line in failures:
                print(f"FAIL {line}")
            if not failures:
                presets = ", ".join(["default", *registry.get(name).presets])
                print(f"ok   {name}: conforms ({presets})")
    failed = [name for name, failures in results.items() if failures]
    if failed and not as_json:
        print(
            f"bench algos --check: {len(failed)} of {len(names)} failed: {', '.join(failed)}", file=sys.stderr
        )
    return 1 if failed else 0


def _value(value) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def format_algorithm(info: dict) -> str:
    """`bench algos NAME` as text: a header, the config fields and the presets as tables."""
    from results.tables import format_table

    default = info["by_preset"]["default"]
    critic = default["critic"]
    critic_text = "none" if critic is None else ", ".join(f"{k}={v}" for k, v in critic.items())
    lines = [
        f"{info['name']}: {info['summary']}",
        f"paper:    {info['paper'] or '-'}",
        f"source:   {info['source']} ({info['class']})",
        f"rollouts per prompt: {info['rollouts_per_prompt']}",
        f"critic:   {critic_text}",
        f"needs:    {', '.join(default['needs']) or 'nothing optional'}",
    ]
    if info["renamed_fields"]:
        renamed = ", ".join(f"{old} -> {new}" for old, new in info["renamed_fields"].items())
        lines.append(f"renamed:  {renamed} (old names are read as the new, with a warning)")
    lines += [
        "",
        "config fields (--set algo.FIELD=VALUE, or [algo] in --config FILE.toml):",
    ]
    fields = [{**f, "default": _value(f["default"])} for f in info["fields"]]
    lines += ["  " + line for line in format_table(fields, ["name", "type", "default", "help"]).splitlines()]
    rows = []
    for label, d in info["by_preset"].items():
        changes = ", ".join(f"{k}={_value(v)}" for k, v in d["changes"].items()) or "-"
        c = d["critic"]
        rows.append(
            {
                "preset": label,
                "changes": changes,
                "needs": ", ".join(d["needs"]) or "-",
                "rollouts_per_prompt": d["rollouts_per_prompt"],
                "inactive at minibatches=1": ", ".join(d["inactive"]) or "-",
                "critic": "none"
                if c is None
                else f"K={c['updates_per_step']}, warmup={c['warmup_steps']}, "
                f"frozen attention={c['freeze_attention']}",
            }
        )
    sometimes = [f for f in info["fields"] if f["acts_when"] != "always"]
    if sometimes:
        lines += ["", "fields that do not always act (sweeps search them only where they can):"]
        lines += [f"  {f['name']}: {f['acts_when']}" for f in sometimes]
    lines += ["", "presets (--preset NAME; 'default' = no preset):"]
    columns = ["preset", "changes", "needs", "rollouts_per_prompt", "critic", "inactive at minibatches=1"]
    lines += ["  " + line for line in format_table(rows, columns).splitlines()]
    lines += ["", f"check a plugin: bench algos --check {info['name']}"]
    return "\n".join(lines)
