"""`DockerRuntime` with the Docker client and the swebench harness faked at their boundary
(containers that record exec calls and answer from an in-memory /testbed), its unavailable
messages, and one real run behind the `docker` marker. The real swebench 5 package is exercised in
`test_swebench_real.py`, the container arguments and clean-up in `test_docker_containers.py`."""

import asyncio
import io
import json
import os
import re
import sys
import tarfile
import types

import pytest

from envs.swe.docker_runtime import GIT_APPLY_CMDS, MISSING_EXTRA, RESET_SCRIPT, DockerRuntime
from envs.swe.instance import SWEInstance
from envs.swe.runtime import RuntimeUnavailable
from envs.swe.scaffold import SweEnv
from envs.swe.swebench_adapter import ALREADY_APPLIED_CHECK, RESET_BETWEEN_ATTEMPTS
from envs.swe.workspace_memory import apply_unified_diff, file_diff
from tests.fixtures.swe_demo import demo_instance
from tests.requires import requires

CALC = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"


def make_instance(**kw) -> SWEInstance:
    return demo_instance(file_diff("calc.py", CALC, FIXED), **kw)


class FakeContainer:
    """A running container whose /testbed is a dict; records every exec and archive."""

    def __init__(self, image, logs, name="c"):
        self.image, self.logs, self.name, self.labels = (
            image,
            logs,
            name,
            {},
        )  # logs: script -> (code, output)
        self.base = {"calc.py": CALC, "tests/test_calc.py": "def test_add(): ...\n"}
        self.files = dict(self.base)
        self.execs, self.archives, self.removed = [], [], 0
        self.apply_failures = 0  # how many of the patch commands fail first
        self.already_applied = False  # what `git apply --check --reverse` answers

    def exec_run(self, cmd, workdir=None, user=None):
        assert workdir == "/testbed" and user == "root"
        self.execs.append(cmd)
        if cmd[0] == "timeout":
            return self._result(*self.logs[cmd[-1]])
        if cmd[:2] == ["git", "ls-files"]:
            return self._result(0, "".join(p + "\n" for p in self.files))
        if cmd[:2] == ["cat", "--"]:
            text = self.files.get(cmd[2])
            return self._result(0, text) if text is not None else self._result(1, "cat: No such file")
        if cmd[:2] == ["mkdir", "-p"]:
            return self._result(0, "")
        if cmd[:2] == ["rm", "-f"]:  # the sealed check removes the patch file
            for path in cmd[2:]:
                self.files.pop(path, None)
            return self._result(0, "")
        if cmd[:2] == ["git", "status"]:  # porcelain -z of what differs from the base
            changed = sorted(p for p in {*self.base, *self.files} if self.base.get(p) != self.files.get(p))
            codes = {
                p: " M" if p in self.base and p in self.files else " D" if p in self.base else "??"
                for p in changed
            }
            return self._result(0, "".join(f"{codes[p]} {p}\0" for p in changed))
        if cmd[:2] == ["/bin/bash", "-c"] and cmd[3:4] == ["reset"]:  # RESET_SCRIPT on cmd[4:]
            for path in cmd[4:]:
                if path in self.base:
                    self.files[path] = self.base[path]
                else:
                    self.files.pop(path, None)
            return self._result(0, "")
        if cmd[:2] == ["git", "grep"]:
            hits = [f"{p}:{n}:{ln}" for p, t in self.files.items() for n, ln in enumerate(t.splitlines(), 1)]
            hits = [h for h in hits if cmd[6] in h.split(":", 2)[2]]
            return self._result(0 if hits else 1, "".join(h + "\n" for h in hits))
        script = cmd[2]
        if script == RESET_BETWEEN_ATTEMPTS:
            self.files = dict(self.base)
            return self._result(0, "")
        if script.startswith(ALREADY_APPLIED_CHECK):
            return self._result(0 if self.already_applied else 1, "error: patch does not apply")
        if script.endswith("/tmp/patch.diff"):
            if self.apply_failures:
                self.apply_failures -= 1
                return self._result(1, "error: patch failed")
            try:
                self.files = apply_unified_diff(self.files, self.archives[-1][2].decode())
            except ValueError as exc:
                return self._result(1, str(exc))
            return self._result(0, "Applied patch calc.py cleanly.")
        if script.startswith("git add -A && git -c core.fileMode=false diff --cached HEAD"):
            diff = "".join(file_diff(p, self.base.get(p), self.files.get(p)) for p in sorted(self.files))
            return self._result(0, diff)
        raise AssertionError(f"unexpected exec {cmd}")

    def put_archive(self, path, data):
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            (member,) = tar.getmembers()
            content = tar.extractfile(member).read()
        full = f"{path.rstrip('/')}/{member.name}"
        self.archives.append((path, member.name, content))
        if full.startswith("/testbed/"):
            self.files[full.removeprefix("/testbed/")] = content.decode()
        return True

    def remove(self, force=False):
        assert force
        self.removed += 1

    @staticmethod
    def _result(code, text):
        return types.SimpleNamespace(exit_code=code, output=text.encode())


class FakeClient:
    """`docker.DockerClient` stand-in: `containers.run` starts a FakeContainer."""

    def __init__(self, logs=None):
        self.logs = logs or {}
        self.started = []
        self.containers = types.SimpleNamespace(
            run=self._run, list=lambda all, filters, ignore_removed=False: []
        )

    def _run(self, image, command, detach, working_dir, name, **limits):
        assert command[0] == "sleep" and detach and working_dir == "/testbed" and limits["auto_remove"]
        container = FakeContainer(image, self.logs, name)
        self.started.append(container)
        return container


class FakeHarness:
    """The `SwebenchHarness` surface: parses `id STATUS` lines between the markers."""

    def unsupported(self, instance):
        return None if instance.repo == "demo/calc" else f"swebench has no spec for {instance.repo}"

    def spec(self, instance):
        return types.SimpleNamespace(image=f"sweb.eval.x86_64.{instance.instance_id}:latest")

    def image(self, spec):
        return spec.image

    def eval_script(self, spec):
        return "#!/bin/bash\necho eval\n"

    def test_script(self, spec, test_ids):
        return "run " + " ".join(test_ids)

    def parse(self, spec, log):
        if START not in log or END not in log:
            return {}, False
        body = log.split(START)[1].split(END)[0]
        return dict(re.findall(r"^(\S+) (PASSED|FAILED|ERROR|SKIPPED)$", body, re.MULTILINE)), True

    def report(self, spec, patch, log):
        """`get_eval_report`'s entry, for the demo instance's two tests (the real one: test_swebench_real)."""
        tests, found = self.parse(spec, log)
        if not found:
            return {"resolved": False, "patch_successfully_applied": False}
        status = {
            name: {
                "success": [t for t in ids if tests.get(t) == "PASSED"],
                "failure": [t for t in ids if tests.get(t) != "PASSED"],
            }
            for name, ids in (("FAIL_TO_PASS", [F2P]), ("PASS_TO_PASS", [P2P]))
        }
        resolved = not status["FAIL_TO_PASS"]["failure"] and not status["PASS_TO_PASS"]["failure"]
        return {"resolved": resolved, "patch_successfully_applied": True, "tests_status": status}


def eval_log(*pairs):
    """An evaluation log whose test section reports `pairs` of (id, status)."""
    return f"setup\n+ : '{START}'\n" + "".join(f"{t} {s}\n" for t, s in pairs) + f"+ : '{END}'\n"


F2P, P2P = "tests/test_calc.py::test_add", "tests/test_calc.py::test_neg"


def runtime(logs=None):
    client = FakeClient(logs)
    return DockerRuntime(client=client, harness=FakeHarness(), test_timeout=60), client


def test_workspace_file_operations_diff_and_close():
    rt, client = runtime()

    async def go():
        ws = await rt.open(make_instance())
        files = await ws.list_files()
        text = await ws.read_file("calc.py")
        with pytest.raises(FileNotFoundError, match="no such file: nope.py"):
            await ws.read_file("nope.py")
        with pytest.raises(ValueError, match="outside the repository"):
            await ws.read_file("/etc/passwd")
        await ws.write_file("calc.py", FIXED)
        hits = await ws.search("return", 5)
        diff = await ws.diff()
        await ws.close()
        await ws.close()
        return files, text, hits, diff

    files, text, hits, diff = asyncio.run(go())
    (container,) = client.started
    assert container.image == "sweb.eval.x86_64.demo__calc-1:latest"
    assert files == ["calc.py", "tests/test_calc.py"] and text == CALC
    assert container.archives[-1] == ("/testbed", "calc.py", FIXED.encode())
    assert ["mkdir", "-p", "/testbed"] in container.execs
    assert hits == ["calc.py:2:    return a + b"]
    assert ["git", "grep", "-n", "-I", "-F", "-e", "return", "--"] in container.execs
    assert diff == file_diff("calc.py", CALC, FIXED)
    assert container.removed == 1  # close is idempotent


def test_run_tests_uses_the_harness_script_and_parser():
    rt, client = runtime(
        {"/tmp/run_tests.sh": (1, eval_log((P2P, "PASSED"), (F2P, "FAILED"), ("x::y", "PASSED")))}
    )

    async def go():
        ws = await rt.open(make_instance())
        try:
            return await ws.run_tests([P2P, F2P, "tests/test_calc.py::test_missing"])
        finally:
            await ws.close()

    assert asyncio.run(go()) == {P2P: "PASSED", F2P: "FAILED"}
    (container,) = client.started
    assert container.archives[-1] == (
        "/tmp",
        "run_tests.sh",
        f"run {P2P} {F2P} tests/test_calc.py::test_missing".encode(),
    )
    assert container.execs[-1] == ["timeout", "60", "/bin/bash", "/tmp/run_tests.sh"]


def test_grade_resolved_follows_the_harness_flow():
    rt, client = runtime({"/eval.sh": (0, eval_log((F2P, "PASSED"), (P2P, "PASSED")))})
    grade = asyncio.run(rt.grade(make_instance(), file_diff("calc.py", CALC, FIXED)))
    assert grade.resolved and grade.applied and grade.tests == {F2P: "PASSED", P2P: "PASSED"}
    assert grade.tests_status == {
        "FAIL_TO_PASS": {"success": [F2P], "failure": []},
        "PASS_TO_PASS": {"success": [P2P], "failure": []},
    }
    # issue 40: a resolved patch is graded again by the sealed tests, in a second container;
    # the demo's tests have no assertion (unsealed), so swebench's rule decides alone
    container, sealed = client.started
    assert container.files["calc.py"] == FIXED and container.removed == 1
    assert [a[:2] for a in container.archives] == [("/tmp", "patch.diff"), ("/", "eval.sh")]
    assert container.execs[-1] == ["timeout", "60", "/bin/bash", "/eval.sh"]
    assert (
        sealed.files["calc.py"] == FIXED
        and sealed.removed == 1
        and ["/bin/bash", "/eval.sh"] not in [c[2:] for c in sealed.execs]
    )
    assert "sealed tests not run (tests/test_calc.py::test_add is not sealed" in grade.log


def test_grade_resets_test_files_and_hooks_before_the_eval_script():
    # issue 23: the eval script resets only the test patch's files; a model patch that also
    # edits the tests, adds a conftest.py and a test helper must not bring them into grading
    rt, client = runtime({"/eval.sh": (0, eval_log((F2P, "PASSED"), (P2P, "PASSED")))})
    patch = file_diff("calc.py", CALC, FIXED) + file_diff("tests/test_calc.py", "def test_add(): ...\n", "")
    patch += file_diff("conftest.py", None, "import os\n") + file_diff("tests/helpers.py", None, "x = 1\n")
    grade = asyncio.run(rt.grade(make_instance(), patch))
    container, _ = client.started  # the second: the sealed tests' check (issue 40)
    assert grade.reset == ["conftest.py", "tests/helpers.py", "tests/test_calc.py"]
    assert grade.tamper == ["conftest.py: a file Python or pytest runs unasked"]  # reported, not vetoed
    assert grade.resolved and container.files == {
        "calc.py": FIXED,
        "tests/test_calc.py": "def test_add(): ...\n",
    }
    reset = next(i for i, c in enumerate(container.execs) if c[3:4] == ["reset"])
    assert (
        container.execs[reset][:3] == ["/bin/bash", "-c", RESET_SCRIPT] and reset < len(container.execs) - 1
    )
    assert container.execs[-1] == ["timeout", "60", "/bin/bash", "/eval.sh"]  # the eval script runs after


def test_grade_unresolved_when_a_test_fails_or_is_missing():
    rt, _ = runtime({"/eval.sh": (1, eval_log((F2P, "FAILED"), (P2P, "PASSED")))})
    grade = asyncio.run(rt.grade(make_instance(), ""))  # empty patch: nothing applied
    assert not grade.resolved and grade.applied and grade.tests_status["FAIL_TO_PASS"]["failure"] == [F2P]
    rt, _ = runtime({"/eval.sh": (0, eval_log((F2P, "PASSED")))})
    assert not asyncio.run(rt.grade(make_instance(), "")).resolved  # P2P test never ran


def test_grade_tries_the_patch_fallbacks_then_gives_up():
    rt, client = runtime({"/eval.sh": (0, eval_log((F2P, "PASSED"), (P2P, "PASSED")))})
    original = FakeClient._run

    def failing_run(self, *args, **kwargs):
        container = original(self, *args, **kwargs)
        container.apply_failures = 4
        return container

    client.containers.run = types.MethodType(failing_run, client)
    grade = asyncio.run(rt.grade(make_instance(), file_diff("calc.py", CALC, FIXED)))
    assert not grade.resolved and not grade.applied and grade.log == "error: patch failed"
    (container,) = client.started
    bash = [c[2] for c in container.execs if c[0] == "/bin/bash"]
    tries = [f"{c} /tmp/patch.diff" for c in GIT_APPLY_CMDS]
    assert bash == [
        tries[0],
        RESET_BETWEEN_ATTEMPTS,
        tries[1],
        RESET_BETWEEN_ATTEMPTS,
        tries[2],
        RESET_BETWEEN_ATTEMPTS,
        tries[3],
        f"{ALREADY_APPLIED_CHECK} /tmp/patch.diff",
    ]
    assert container.removed == 1


def test_a_patch_that_reverses_cleanly_counts_as_applied():
    rt, client = runtime({"/eval.sh": (0, eval_log((F2P, "PASSED"), (P2P, "PASSED")))})
    original = FakeClient._run

    def applied_run(self, *args, **kwargs):
        container = original(self, *args, **kwargs)
        container.apply_failures, container.already_applied = 4, True
        return container

    client.containers.run = types.MethodType(applied_run, client)
    grade = asyncio.run(rt.grade(make_instance(), file_diff("calc.py", CALC, FIXED)))
    assert grade.applied and grade.resolved


def test_grade_when_the_tests_did_not_run_or_timed_out():
    rt, _ = runtime({"/eval.sh": (1, "error: test patch did not apply\n")})
    grade = asyncio.run(rt.grade(make_instance(), ""))
    assert (
        not grade.resolved and grade.applied and grade.log.startswith("the evaluation did not run the tests")
    )
    rt, _ = runtime({"/eval.sh": (124, "still running...")})
    grade = asyncio.run(rt.grade(make_instance(), ""))
    assert not grade.resolved and grade.log.startswith("tests timed out (60 s)")


def test_scaffold_episode_on_the_docker_runtime():
    rt, client = runtime({"/eval.sh": (0, eval_log((F2P, "PASSED"), (P2P, "PASSED")))})

    async def go():
        env = SweEnv(make_instance(), rt)
        await env.reset()
        view = await env.step("<tool>view calc.py</tool>")
        await env.step("<tool>replace calc.py 2     return a + b</tool>")
        final = await env.step("<tool>submit</tool>")
        await env.close()
        return view, final

    view, final = asyncio.run(go())
    assert view.observation == "<result>1:def add(a, b):\n2:    return a - b</result>\n"
    assert final.reward == 1.0 and final.info["patch"] == file_diff("calc.py", CALC, FIXED)
    # episode, grading, and (issue 40) the sealed tests' check of a resolved patch
    assert len(client.started) == 3 and all(c.removed == 1 for c in client.started)


def test_max_containers_caps_live_containers():
    rt, client = runtime()
    rt.max_containers = 2

    async def go():
        first = [await rt.open(make_instance()) for _ in range(2)]
        third = asyncio.ensure_future(rt.open(make_instance()))
        await asyncio.sleep(0.05)
        blocked = not third.done()
        await first[0].close()
        opened = await asyncio.wait_for(third, 5)
        await first[1].close()
        await opened.close()
        return blocked

    assert asyncio.run(go()) and len(client.started) == 3


# ---- unavailable ------------------------------------------------------------------------------
def test_missing_extra_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "swebench", None)  # import swebench -> ImportError
    monkeypatch.setitem(sys.modules, "docker", None)
    with pytest.raises(RuntimeUnavailable) as info:
        DockerRuntime().check(make_instance())
    assert str(info.value) == MISSING_EXTRA
    assert "pip install -e '.[swe]'" in MISSING_EXTRA


def test_no_daemon_message(monkeypatch):
    class DockerException(Exception):
        pass

    def from_env(timeout):
        assert timeout == 3  # a short ping, no retry loop

        class Client:
            def ping(self):
                raise DockerException("Error while fetching server API version: connection refused")

        return Client()

    monkeypatch.setitem(sys.modules, "docker", types.SimpleNamespace(from_env=from_env))
    with pytest.raises(RuntimeUnavailable) as info:
        DockerRuntime(harness=FakeHarness()).check(make_instance())
    assert str(info.value) == (
        "--runtime docker needs a running Docker daemon: "
        "Error while fetching server API version: connection refused"
    )


def test_unknown_repository_is_unavailable():
    rt, _ = runtime()
    with pytest.raises(RuntimeUnavailable, match="swebench has no spec for other/repo"):
        rt.check(make_instance(repo="other/repo"))


# ---- a real instance, when a Docker daemon (and the swe extra) is there ------------------------
@pytest.mark.docker
def test_real_instance_gold_patch_resolves():
    """Set BENCH_SWE_INSTANCE to a JSON file holding one official SWE-bench instance."""
    requires("swebench")
    path = os.environ.get("BENCH_SWE_INSTANCE")
    if not path:
        pytest.skip("set BENCH_SWE_INSTANCE=path/to/one_instance.json to run a real instance")
    instance = SWEInstance.from_row(json.loads(open(path).read()))
    rt = DockerRuntime()
    rt.check(instance)
    assert asyncio.run(rt.grade(instance, instance.patch)).resolved
    assert not asyncio.run(rt.grade(instance, "")).resolved
