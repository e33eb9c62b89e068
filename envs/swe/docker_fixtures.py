"""Offline SWE-bench instances: swe-mini repositories as SWE-bench Verified rows and images.

    python -m envs.swe.docker_fixtures build [--out ROWS.jsonl] [--instances ID,...] [--mirror URL]
    python -m envs.swe.docker_fixtures rows --out ROWS.jsonl [--instances ID,...]
    python -m envs.swe.docker_fixtures remove

`build` makes, with no registry (`envs.swe.docker_images`), the base image, then for each
instance (default `DEFAULT_INSTANCES`) an image named as swebench 5 names it
(`swebench/sweb.eval.x86_64.<id with __ -> _1776_>:latest`: `make_image_spec(...).name` with the
namespace `swebench`, the name the Verified rows carry) holding the repository in /testbed at its
`base_commit` (the same commit hash as the local runtime's), and writes the rows: the swe-mini
instance in the Verified 5.x schema, with `image`, `eval_script` (swebench's layout for a
pytest repository: reset the test files, apply the test patch from a heredoc, `pytest -rA` on
the test files between the output markers, reset again), `log_parser` `parse_log_pytest` and
`eval_type` `pass_and_fail`. Images are cached by content hash: a rerun builds nothing.

The rows run everywhere a Verified row runs: `bench run --task swe --set task.dataset=swe-verified
--set task.runtime=docker --set task.data=ROWS.jsonl` and `bench eval --bench swe-verified
--data ROWS.jsonl` (the official harness grades them against these images).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from envs.swe.docker_images import Built, ImageBuildError, base_image, build_base, build_image
from envs.swe.grading import split_patch
from envs.swe.instance import SWEInstance
from envs.swe.local_git import BASE_MESSAGE, GIT_IDENTITY
from envs.swe.swe_mini import load_swe_mini, repo_files

NAMESPACE = "swebench"
"""The image namespace of the rows (that of the published Verified images)."""
DEFAULT_INSTANCES = (
    "swe-mini__account-1",
    "swe-mini__clamp-1",
    "swe-mini__find-1",
    "swe-mini__overlap-1",
    "swe-mini__roman-1",
)
"""A handful: the instances the attack tests use (`tests/fixtures/swe_attacks.py`) and one more."""
LOG_PARSER = "parse_log_pytest"
HEREDOC = "EOF_114329324912"
"""swebench's heredoc delimiter for the test patch in an eval script."""
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"
WORKDIR = "/testbed"
DEFAULT_ROWS = Path("swe-fixtures.instances.jsonl")


class FixtureError(ValueError):
    """Bad input to the fixture builder (an unknown instance id); the message lists the choices."""


def image_name(instance_id: str, namespace: str = NAMESPACE) -> str:
    """swebench 5's name of an instance's image (`make_image_spec(...).name`; the `swe` extra)."""
    try:
        from swebench.image_builder.image_spec import make_image_spec
    except ImportError:
        raise ImageBuildError("needs swebench 5 (the swe extra): scripts/install.sh swe") from None
    return make_image_spec({"instance_id": instance_id}, "FROM scratch", namespace=namespace).name


def eval_script(instance: SWEInstance) -> str:
    """The instance's eval script, laid out as swebench's builder lays out a pytest repository's."""
    base = instance.base_commit
    tests = " ".join(split_patch(instance.test_patch))
    reset = f"git checkout {base} {tests}"
    lines = [
        "#!/bin/bash",
        "set -uxo pipefail",
        f"cd {WORKDIR}",
        f"git config --global --add safe.directory {WORKDIR}",
        f"cd {WORKDIR}",
        "git status",
        "git show",
        f"git -c core.fileMode=false diff {base}",
        reset,
        f"git apply -v - <<'{HEREDOC}'\n{instance.test_patch}\n{HEREDOC}",
        f": '{START}'",
        f"pytest -rA {tests}",
        f": '{END}'",
        reset,
    ]
    return "\n".join(lines) + "\n"


def fixture_row(instance: SWEInstance, namespace: str = NAMESPACE) -> dict[str, Any]:
    """The instance as a SWE-bench Verified row in the swebench 5 schema (module docstring)."""
    row: dict[str, Any] = dict(instance.to_record())
    row.update(
        image=image_name(instance.instance_id, namespace),
        eval_script=eval_script(instance),
        log_parser=LOG_PARSER,
        eval_type="pass_and_fail",
    )
    return row


def dockerfile(instance: SWEInstance) -> str:
    """The instance image: the repository committed in /testbed as the local runtime commits it
    (same files, identity, dates and message, so the same `base_commit`, which the build checks)."""
    identity = " ".join(f"{k}='{v}'" for k, v in GIT_IDENTITY.items())
    git = "git -c init.defaultBranch=main -c core.autocrlf=false"
    steps = [
        f"{git} init -q --template=",
        "mkdir -p .git/info",
        r"printf '__pycache__/\n*.pyc\n.pytest_cache/\n' > .git/info/exclude",
        f"{git} add -A",
        f"{identity} {git} commit -q --no-verify -m '{BASE_MESSAGE}'",
        f'test "$(git rev-parse HEAD)" = {instance.base_commit}',
    ]
    return f"FROM {base_image()}\nCOPY testbed {WORKDIR}\nWORKDIR {WORKDIR}\nRUN {' && '.join(steps)}\n"


def select(ids: list[str] | None = None) -> list[SWEInstance]:
    """The swe-mini instances named (default `DEFAULT_INSTANCES`); FixtureError lists the known ones."""
    known = {inst.instance_id: inst for inst in load_swe_mini()}
    wanted = list(ids or DEFAULT_INSTANCES)
    unknown = [i for i in wanted if i not in known]
    if unknown:
        raise FixtureError(f"unknown swe-mini instance(s) {', '.join(unknown)}; choices: {', '.join(known)}")
    return [known[i] for i in wanted]


def write_rows(path: Path, instances: list[SWEInstance], namespace: str = NAMESPACE) -> Path:
    """Write the rows (JSONL, one per instance) to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(fixture_row(i, namespace)) + "\n" for i in instances))
    return path


def build_images(
    instances: list[SWEInstance], mirror: str | None = None, docker_client: Any = None
) -> list[Built]:
    """The base image, then each instance's image (cached by content hash); what each cost."""
    from envs.swe.docker_images import client

    docker_client = docker_client or client()
    done = [build_base(docker_client, mirror)]
    for inst in instances:
        files = {f"testbed/{path}": text for path, text in repo_files(inst.instance_id).items()}
        done.append(build_image(docker_client, image_name(inst.instance_id), dockerfile(inst), files))
    return done


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m envs.swe.docker_fixtures", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name, text in (("build", "build the images and write the rows"), ("rows", "write the rows only")):
        q = sub.add_parser(name, help=text)
        q.add_argument(
            "--out", type=Path, default=DEFAULT_ROWS, help=f"the rows file (default: {DEFAULT_ROWS})"
        )
        q.add_argument("--instances", default=None, help="comma-separated swe-mini instance ids")
        if name == "build":
            q.add_argument("--mirror", default=None, help="Debian mirror (default: the one apt uses)")
    sub.add_parser("remove", help="remove every image this builder made")
    return p


def main(argv: list[str] | None = None) -> int:
    """The command line of the module docstring; bad input and build failures: one line, exit 2."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "remove":
            from envs.swe.docker_images import client, remove_images

            for name in remove_images(client()):
                print(f"removed {name}")
            return 0
        instances = select(args.instances.split(",") if args.instances else None)
        if args.command == "build":
            start = time.monotonic()
            for built in build_images(instances, args.mirror):
                print(f"{built.name}: " + (f"built in {built.seconds:.1f} s" if built.built else "cached"))
            print(f"images ready in {time.monotonic() - start:.1f} s")
        print(f"wrote {write_rows(args.out, instances)} ({len(instances)} rows)")
    except (FixtureError, ImageBuildError) as exc:
        print(f"docker_fixtures: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
