"""`envs.swe.docker_fixtures` and `envs.swe.docker_images` without a Docker daemon (issue 40): the
rows are SWE-bench Verified rows swebench 5 reads, the image's commit steps reproduce the
instance's base commit, the eval script run outside Docker is graded by swebench exactly as a
resolved (gold) or unresolved (empty) patch, the mirror comes from apt's sources, the image cache
is keyed by content, and bad input is one line. The images on a real daemon:
test_docker_daemon.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import types
from pathlib import Path
from unittest import mock

import pytest

from tests.requires import requires

requires("swebench", minversion="5")

from swebench.harness.grading import get_eval_report  # noqa: E402
from swebench.harness.log_parsers import PARSER_REGISTRY  # noqa: E402
from swebench.harness.utils import make_test_spec  # noqa: E402
from swebench.image_builder.image_spec import make_image_spec  # noqa: E402

from envs.swe import docker_fixtures, docker_images  # noqa: E402
from envs.swe.docker_images import FIXTURE_LABEL, apt_mirror, build_image, cached, content_hash  # noqa: E402
from envs.swe.instance import SWE_V5_COLUMNS, SWEInstance  # noqa: E402
from envs.swe.swe_mini import repo_files  # noqa: E402
from envs.swe.swebench_adapter import SwebenchHarness  # noqa: E402
from envs.swe.workspace_memory import apply_unified_diff  # noqa: E402

INSTANCES = docker_fixtures.select()


def test_rows_are_verified_rows_swebench_5_runs():
    for inst in INSTANCES:
        row = docker_fixtures.fixture_row(inst)
        assert all(row[c] for c in SWE_V5_COLUMNS) and row["log_parser"] in PARSER_REGISTRY
        spec = make_test_spec(row)
        assert spec.image == make_image_spec(row, "FROM scratch", namespace="swebench").name
        assert spec.image == f"swebench/sweb.eval.x86_64.{inst.instance_id.replace('__', '_1776_')}:latest"
        assert json.loads(row["FAIL_TO_PASS"]) == list(inst.fail_to_pass) and row["patch"] == inst.patch


def test_the_agents_test_command_is_the_eval_scripts_without_the_test_patch():
    inst = SWEInstance.from_row(docker_fixtures.fixture_row(INSTANCES[0]))
    harness = SwebenchHarness()
    script = harness.test_script(harness.spec(inst), list(inst.pass_to_pass))
    assert "git apply" not in script and "EOF_114329324912" not in script
    assert "pytest -rA tests/test_account.py\n" in script and "cd /testbed\n" in script


def commit_like_the_image(root: Path, inst) -> str:
    """The Dockerfile's RUN steps, run by bash in `root` holding the repository's files: HEAD."""
    for path, text in repo_files(inst.instance_id).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    run = re.search(r"^RUN (.*)$", docker_fixtures.dockerfile(inst), re.M).group(1)
    env = {"PATH": os.environ["PATH"], "HOME": str(root.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["bash", "-c", run], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # its own check: HEAD is the base commit
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True
    ).stdout.strip()


@pytest.mark.parametrize("inst", INSTANCES, ids=lambda i: i.instance_id)
def test_the_image_commit_is_the_base_commit_and_the_eval_script_grades_gold_and_empty(inst, tmp_path):
    root = tmp_path / "testbed"
    root.mkdir()
    assert commit_like_the_image(root, inst) == inst.base_commit
    row = docker_fixtures.fixture_row(inst)
    spec = make_test_spec(row)
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(root)}  # the image's .pth
    verdicts = {}
    for name, patch in (("gold", inst.patch), ("empty", "")):
        files = (
            apply_unified_diff(repo_files(inst.instance_id), patch) if patch else repo_files(inst.instance_id)
        )
        for path, text in files.items():
            (root / path).write_text(text)
        script = spec.eval_script.replace("/testbed", str(root))
        log = subprocess.run(
            ["bash", "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ).stdout  # one stream, as the harness's exec_run reads it (the markers are set -x's, on stderr)
        (tmp_path / f"{name}.log").write_text(log)
        prediction = {
            "instance_id": inst.instance_id,
            "model_name_or_path": "m",
            "model_patch": patch or None,
        }
        report = get_eval_report(spec, prediction, str(tmp_path / f"{name}.log"), include_tests_status=True)
        verdicts[name] = report[inst.instance_id]["resolved"]
        subprocess.run(["git", "checkout", "-q", "--", "."], cwd=root, check=True)
    assert verdicts == {"gold": True, "empty": False}


def test_the_mirror_is_the_one_apt_uses(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    assert apt_mirror(tmp_path) == docker_images.DEFAULT_MIRROR
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n# http://snapshot.debian.org/x\nURIs: http://security.debian.org/debian-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n"
    )
    assert apt_mirror(tmp_path) == "http://mirror.example/debian"
    (tmp_path / "sources.list").write_text("deb [arch=amd64] http://one.example/debian bookworm main\n")
    assert apt_mirror(tmp_path) == "http://one.example/debian"


class Images:
    """`client.images` with one image per name, its labels given."""

    def __init__(self, labels: dict[str, dict]):
        self.labels, self.built = labels, []

    def get(self, name):
        import docker

        if name not in self.labels:
            raise docker.errors.ImageNotFound(name)
        return types.SimpleNamespace(labels=self.labels[name])

    def build(self, **kwargs):
        self.built.append(kwargs)
        self.labels[kwargs["tag"]] = kwargs["labels"]


def test_an_image_is_rebuilt_only_when_what_it_is_made_of_changed():
    inst = INSTANCES[0]
    name, dockerfile = docker_fixtures.image_name(inst.instance_id), docker_fixtures.dockerfile(inst)
    files = {f"testbed/{p}": t for p, t in repo_files(inst.instance_id).items()}
    client = types.SimpleNamespace(images=Images({}))
    assert build_image(client, name, dockerfile, files).built
    (call,) = client.images.built
    assert call["network_mode"] == "none" and call["pull"] is False and call["tag"] == name
    assert not build_image(client, name, dockerfile, files).built and len(client.images.built) == 1
    edited = {**files, "testbed/account.py": files["testbed/account.py"] + "# edited\n"}
    assert build_image(client, name, dockerfile, edited).built  # another content, another label
    assert cached(client, name, content_hash(docker_images.BASE_RECIPE, dockerfile, edited))
    assert not cached(client, name, "0" * 16) and FIXTURE_LABEL in client.images.labels[name]


def test_bad_input_is_one_line_with_the_choices(tmp_path, capsys):
    assert (
        docker_fixtures.main(["rows", "--out", str(tmp_path / "r.jsonl"), "--instances", "swe-mini__nope-1"])
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "docker_fixtures: error: unknown swe-mini instance(s) swe-mini__nope-1"
    )
    assert "choices: swe-mini__account-1," in err[0] and not (tmp_path / "r.jsonl").exists()
    assert docker_fixtures.main(["rows", "--out", str(tmp_path / "r.jsonl")]) == 0
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == len(docker_fixtures.DEFAULT_INSTANCES)


def test_without_root_or_debootstrap_the_build_says_what_is_missing(tmp_path):
    with mock.patch.object(docker_images.shutil, "which", return_value=None):
        with pytest.raises(docker_images.ImageBuildError, match="needs debootstrap: apt-get install"):
            docker_images._debootstrap(tmp_path, "http://m")
    with (
        mock.patch.object(docker_images.shutil, "which", return_value="/usr/sbin/debootstrap"),
        mock.patch.object(docker_images.os, "geteuid", return_value=1000),
        pytest.raises(docker_images.ImageBuildError, match="debootstrap needs root"),
    ):
        docker_images._debootstrap(tmp_path, "http://m")
