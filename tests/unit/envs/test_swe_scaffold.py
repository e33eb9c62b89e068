"""The SWE agent scaffold (`SweEnv`), in-memory workspaces, synthetic bugs and demonstrations,
`SweTask` arguments, and (when swe-mini and the local runtime exist) one end-to-end episode."""

import asyncio
import json
import random
import re

import pytest

from envs.swe import synthetic
from envs.swe.code_families import FAMILIES
from envs.swe.instance import SWEInstance
from envs.swe.mutations import mutations
from envs.swe.runtime import PatchGrade, Runtime
from envs.swe.scaffold import SYSTEM_PROMPT, SweEnv, number_lines, replace_line, truncate
from envs.swe.workspace_memory import InMemoryRuntime, InMemoryWorkspace, apply_unified_diff, file_diff
from tests.fixtures.swe_demo import DEMO_ID, demo_instance

CALC = "def add(a, b):\n    return a - b\n\n\ndef neg(x):\n    return -x\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
FIXED = CALC.replace("a - b", "a + b")


def make_instance(**kw) -> SWEInstance:
    return demo_instance(file_diff("calc.py", CALC, FIXED), **kw)


class FakeRuntime(Runtime):
    """In-memory workspaces whose `run_tests` returns canned results; records grade calls."""

    name = "fake"

    def __init__(self, files=None, test_results=None, resolved_if=None):
        self.files = files or {"calc.py": CALC, "tests/test_calc.py": TESTS}
        self.test_results = test_results or {}
        self.resolved_if = resolved_if or (lambda patch: "+    return a + b" in patch)
        self.graded, self.opened = [], []

    def check(self, instance):
        pass

    async def open(self, instance):
        runtime = self

        class Workspace(InMemoryWorkspace):
            async def run_tests(self, test_ids):
                return {t: runtime.test_results[t] for t in test_ids if t in runtime.test_results}

        workspace = Workspace(instance, self.files)
        self.opened.append(workspace)
        return workspace

    async def grade(self, instance, patch):
        self.graded.append(patch)
        return PatchGrade(resolved=self.resolved_if(patch), applied=True)


def play(env, actions):
    """reset, then each action; returns (initial messages, [StepResult])."""

    async def go():
        messages = await env.reset()
        results = []
        for action in actions:
            results.append(await env.step(action))
            if results[-1].done:
                break
        await env.close()
        return messages, results

    return asyncio.run(go())


def observe(action, env=None):
    """The observation text of one action on a fresh episode (without the <result> wrapper)."""
    _, [result] = play(env or SweEnv(make_instance(), FakeRuntime()), [action])
    assert not result.done and result.observation.startswith("<result>")
    return result.observation.removeprefix("<result>").removesuffix("</result>\n")


# ---- helpers ------------------------------------------------------------------------------------
def test_number_lines_replace_line_truncate():
    assert number_lines("a\nb\nc\n") == "1:a\n2:b\n3:c"
    assert number_lines("a\nb\nc\n", 2, 9) == "2:b\n3:c"
    assert replace_line("a\nb\nc\n", 2, "  B") == "a\n  B\nc\n"
    assert replace_line("a\nb", 1, "x\ny") == "x\ny\nb"  # no final newline stays without one
    with pytest.raises(ValueError, match="line 4 out of range; the file has lines 1-3"):
        replace_line("a\nb\nc\n", 4, "x")
    assert truncate("abcdef", 10) == "abcdef"
    assert truncate("abcdefghij", 4) == "abcd\n...[6 more chars; view a range A-B]"


# ---- tools ------------------------------------------------------------------------------------
def test_prompt_is_short_and_lists_sources_first():
    messages, _ = play(SweEnv(make_instance(), FakeRuntime()), [])
    assert messages == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {
            "role": "user",
            "content": "Files: calc.py tests/test_calc.py\nIssue: add(2, 3) returns -1; it should return 5.\n",
        },
    ]
    assert sum(len(m["content"]) for m in messages) < 200


def test_view_whole_file_range_and_errors():
    assert observe("<tool>view calc.py</tool>") == (
        "1:def add(a, b):\n2:    return a - b\n3:\n4:\n5:def neg(x):\n6:    return -x"
    )
    assert observe("<tool>view calc.py 5-6</tool>") == "5:def neg(x):\n6:    return -x"
    assert observe("<tool>view calc.py 6-60</tool>") == "6:    return -x"
    assert observe("<tool>view calc.py 7-9</tool>") == "no lines 7-9; the file has 6"
    assert observe("<tool>view calc.py 3-1</tool>") == "error: bad range '3-1'; use A-B with 1 <= A <= B"
    assert observe("<tool>view nope.py</tool>") == "error: no such file: nope.py"
    assert (
        observe("<tool>view ../etc/passwd</tool>") == "error: path '../etc/passwd' is outside the repository"
    )
    assert observe("<tool>view</tool>") == "error: usage: view PATH [A-B]"


def test_search_fixed_string_and_cap():
    assert observe("<tool>search return</tool>") == "calc.py:2:    return a - b\ncalc.py:6:    return -x"
    assert observe("<tool>search a - b</tool>") == "calc.py:2:    return a - b"
    assert observe("<tool>search add(</tool>") == (
        "calc.py:1:def add(a, b):\ntests/test_calc.py:4:def test_add():\n"
        "tests/test_calc.py:5:    assert add(2, 3) == 5"
    )
    assert observe("<tool>search zzz</tool>") == "no matches"
    many = FakeRuntime(files={"f.py": "x\n" * 30})
    out = observe("<tool>search x</tool>", SweEnv(make_instance(), many))
    assert out.splitlines()[-1] == "...[more than 20 matches]" and len(out.splitlines()) == 21


def test_replace_keeps_other_lines_and_indentation():
    runtime = FakeRuntime()
    env = SweEnv(make_instance(), runtime)
    _, results = play(
        env, ["<tool>replace calc.py 2     return a + b</tool>", "<tool>view calc.py 1-2</tool>"]
    )
    assert results[0].observation == "<result>ok</result>\n"
    assert results[1].observation == "<result>1:def add(a, b):\n2:    return a + b</result>\n"
    assert runtime.opened[0].files["calc.py"] == FIXED


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("<tool>replace calc.py 9 x</tool>", "error: line 9 out of range; the file has lines 1-6"),
        ("<tool>replace calc.py 0 x</tool>", "error: line 0 out of range; the file has lines 1-6"),
        ("<tool>replace calc.py two x</tool>", "error: usage: replace PATH N LINE"),
        ("<tool>replace calc.py</tool>", "error: usage: replace PATH N LINE"),
        ("<tool>replace missing.py 1 x</tool>", "error: no such file: missing.py"),
    ],
)
def test_replace_errors(action, expected):
    assert observe(action) == expected


def test_run_tests_default_explicit_and_unsupported():
    results = {"tests/test_calc.py::test_neg": "PASSED", "tests/test_calc.py::test_add": "FAILED"}
    env = lambda: SweEnv(make_instance(), FakeRuntime(test_results=results))  # noqa: E731
    assert observe("<tool>run_tests</tool>", env()) == "tests/test_calc.py::test_neg PASSED"
    assert observe("<tool>run_tests tests/test_calc.py::test_add t::x</tool>", env()) == (
        "tests/test_calc.py::test_add FAILED\nt::x NOT RUN"
    )
    no_p2p = SweEnv(make_instance(pass_to_pass=()), FakeRuntime())
    assert observe("<tool>run_tests</tool>", no_p2p).startswith("no tests given")
    memory = InMemoryRuntime()
    memory.add(DEMO_ID, {"calc.py": CALC}, {"calc.py": FIXED})
    assert observe("<tool>run_tests</tool>", SweEnv(make_instance(), memory)) == (
        "error: this workspace cannot run tests (in-memory, demonstrations only)"
    )


def test_unknown_and_malformed_calls_are_observations():
    env = SweEnv(make_instance(), FakeRuntime())
    _, results = play(env, ["<tool>rm -rf /</tool>", "<tool>view calc.py", "<tool>1x</tool>"])
    assert results[0].observation == (
        "<result>error: unknown tool 'rm'; available: replace, run_tests, search, submit, view</result>\n"
    )
    assert results[1].observation == "<result>error: tool call not closed with </tool></result>\n"
    assert results[2].observation.startswith("<result>error: tool call must start with a tool name")
    assert results[2].info["malformed_calls"] == 2 and results[2].info["unknown_tools"] == 1


def test_observations_are_capped():
    env = SweEnv(make_instance(), FakeRuntime(), max_observation_chars=20)
    assert (
        observe("<tool>view calc.py</tool>", env)
        == "1:def add(a, b):\n2: \n...[51 more chars; view a range A-B]"
    )


# ---- submit and grading -------------------------------------------------------------------------
def test_submit_grades_the_diff_and_closes_the_workspace():
    runtime = FakeRuntime()
    env = SweEnv(make_instance(), runtime)
    _, results = play(
        env, ["<tool>replace calc.py 2     return a + b</tool>", "thinking... <tool>submit</tool>"]
    )
    final = results[-1]
    assert final.done and final.reward == 1.0
    assert final.info["resolved"] is True and final.info["applied"] is True
    assert final.info["patch"] == runtime.graded[0] == file_diff("calc.py", CALC, FIXED)
    assert runtime.opened[0].closed and env.workspace is None
    with pytest.raises(RuntimeError, match="already done"):
        asyncio.run(env.step("<tool>submit</tool>"))


def test_wrong_fix_and_final_answer_without_tool_call():
    runtime = FakeRuntime()
    _, results = play(
        SweEnv(make_instance(), runtime), ["<tool>replace calc.py 2     return b - a</tool>", "done"]
    )
    assert results[-1].done and results[-1].reward == 0.0 and results[-1].info["resolved"] is False
    assert "+    return b - a" in runtime.graded[0]
    _, results = play(SweEnv(make_instance(), runtime), ["I give up."])  # empty patch
    assert results[0].reward == 0.0 and runtime.graded[1] == ""


def test_grade_failure_ends_the_episode_with_the_reason():
    class Broken(FakeRuntime):
        async def grade(self, instance, patch):
            raise RuntimeError("container vanished")

    _, [result] = play(SweEnv(make_instance(), Broken()), ["<tool>submit</tool>"])
    assert result.done and result.reward == 0.0 and result.info["env_error"] == "grade: container vanished"


def test_tool_call_limit_and_reset_reopens():
    runtime = FakeRuntime()
    env = SweEnv(make_instance(), runtime, max_tool_calls=2)
    _, results = play(env, ["<tool>view calc.py</tool>"] * 3)
    assert results[-1].done and results[-1].reward == 0.0 and "more than 2" in results[-1].info["stopped"]
    play(env, [])
    assert len(runtime.opened) == 2 and all(w.closed for w in runtime.opened)


def test_many_concurrent_episodes_keep_their_own_workspace():
    runtime = FakeRuntime()

    async def episode(i):
        env = SweEnv(make_instance(), runtime)
        await env.reset()
        await env.step(f"<tool>replace calc.py 2     return {i}</tool>")
        await asyncio.sleep(0)
        result = await env.step("<tool>submit</tool>")
        await env.close()
        return result.info["patch"]

    async def all_of_them():
        return await asyncio.gather(*(episode(i) for i in range(64)))

    patches = asyncio.run(all_of_them())
    assert all(f"+    return {i}\n" in patch for i, patch in enumerate(patches))
    assert all(w.closed for w in runtime.opened) and len(runtime.opened) == 64


# ---- in-memory diffs ----------------------------------------------------------------------------
def test_file_diff_is_git_format_and_round_trips():
    assert file_diff("calc.py", "a\nb\n", "a\nc\n") == (
        "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
    )
    assert file_diff("x.py", "same\n", "same\n") == ""
    files = {"a.py": "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "b.py": "x"}
    new = {"a.py": "1\n2\nthree\n4\n5\n6\n7\n8\nnine\n", "b.py": "y", "c.py": "new\n"}
    patch = "".join(file_diff(p, files.get(p), new.get(p)) for p in sorted(new))
    assert "\\ No newline at end of file" in patch and "--- /dev/null" in patch
    assert apply_unified_diff(files, patch) == new
    with pytest.raises(ValueError, match="a.py: patch does not apply at line 3"):
        apply_unified_diff({**files, "a.py": "1\n2\nX\n4\n5\n6\n7\n8\n9\n"}, patch)


def test_in_memory_runtime_grades_by_solution_text():
    runtime = InMemoryRuntime()
    runtime.add(DEMO_ID, {"calc.py": CALC}, {"calc.py": FIXED})
    inst = make_instance()
    assert asyncio.run(runtime.grade(inst, file_diff("calc.py", CALC, FIXED))).resolved
    assert not asyncio.run(
        runtime.grade(inst, file_diff("calc.py", CALC, CALC.replace("a - b", "b + a")))
    ).resolved
    bad = asyncio.run(runtime.grade(inst, file_diff("calc.py", "other\n", "x\n")))
    assert not bad.applied and "does not apply" in bad.log


# ---- synthetic bugs and demonstrations ----------------------------------------------------------
def test_mutations_hand_computed():
    assert mutations("    return a + b", ("a", "b")) == [
        "    return a - b",
        "    return a * b",
        "    return b + b",
        "    return a + a",
    ]
    # kind order: operators, constants (each 1 +-1), names (none to swap), off-by-one (drop the
    # "+ 1"; nothing to append after digits); no structure edits apply
    assert mutations("    for i in range(1, n + 1):", ("n",)) == [
        "    for i in range(1, n - 1):",
        "    for i in range(1, n * 1):",
        "    for i in range(2, n + 1):",
        "    for i in range(0, n + 1):",
        "    for i in range(1, n + 2):",
        "    for i in range(1, n + 0):",
        "    for i in range(1, n):",
    ]
    assert mutations("    return xs[len(xs)]", ("xs",)) == [
        "    return xs[len(xs - 1)]",
        "    return xs[len(xs + 1)]",
        "    return xs[len(xs) - 1]",
        "    return xs[len(xs) + 1]",
    ]
    assert "    return s.strip()" in mutations("    return not s.strip()", ("s",))
    assert "    return f(b, a)" in mutations("    return f(a, b)", ("a", "b"))


def test_mutations_never_introduce_powers():
    # "x ** x ** x" would make the in-process check compute a gigantic integer (an endless hang)
    for family in FAMILIES:
        for line in family.body:
            for mutant in mutations(line, family.params):
                assert "**" not in mutant or "**" in line, (line, mutant)


def _check(source: str, bug) -> bool:
    """Whether `source` passes the bug's cases (harness-generated code, not model output)."""
    namespace = {}
    exec(source, namespace)
    try:
        return all(namespace[name](*args) == expected for name, args, expected in bug.cases)
    except Exception:
        return False


def test_synthetic_bugs_are_real_and_deterministic():
    bugs = [synthetic.make_bug(random.Random(7), f"b{i}") for i in range(3)]
    again = [synthetic.make_bug(random.Random(7), f"b{i}") for i in range(3)]
    assert [b.files for b in bugs] == [b.files for b in again]
    rng = random.Random(11)
    for i in range(60):
        bug = synthetic.make_bug(rng, f"b{i}")
        module = bug.files[bug.path]
        lines = module.splitlines()
        assert lines[bug.line_no - 1] != bug.fixed_line  # the bug is on the recorded line
        fixed = "\n".join(lines[: bug.line_no - 1] + [bug.fixed_line] + lines[bug.line_no :]) + "\n"
        wrong = "\n".join(lines[: bug.line_no - 1] + [bug.wrong_line] + lines[bug.line_no :]) + "\n"
        assert fixed == bug.fixed_source and _check(fixed, bug)
        assert not _check(module, bug) and not _check(wrong, bug)
        name, args, _ = bug.cases[0]  # the issue quotes the first case
        assert bug.instance.problem_statement.startswith(f"{name}({', '.join(map(repr, args))}) ")
        assert apply_unified_diff(bug.files, bug.instance.patch)[bug.path] == bug.fixed_source
        assert set(bug.files) == {bug.path, f"tests/test_{bug.path[:-3]}.py"}
        assert len(bug.instance.problem_statement) <= 200


def test_buggy_module_raises_where_the_issue_says_so():
    rng = random.Random(3)
    bugs = [synthetic.make_bug(rng, f"b{i}") for i in range(300)]
    raising = [b for b in bugs if " raises " in b.instance.problem_statement]
    assert raising  # IndexError-style bugs exist
    for bug in raising[:10]:
        error = bug.instance.problem_statement.split(" raises ")[1].split(";")[0]
        namespace = {}
        exec(bug.files[bug.path], namespace)
        name, args, _ = bug.cases[0]
        with pytest.raises(Exception) as info:
            namespace[name](*args)
        assert type(info.value).__name__ == error


def test_demonstrations_fit_the_tiny_context_and_have_the_documented_noise():
    from bench.models.chat import render_transcript
    from bench.models.tokenizer import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    pairs = synthetic.demonstrations(random.Random(0), 300)
    rewards = [reward for _, reward in pairs]
    assert 0.12 <= 1 - sum(rewards) / len(rewards) <= 0.28  # WRONG_FIX_RATE = 0.2 of 300
    for messages, _ in pairs:
        prompt, response, mask = render_transcript(tokenizer, messages)
        assert len(prompt) + len(response) <= 1024 and len(prompt) < 350
        assert [m["role"] for m in messages] == [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
        ]
        assert (
            messages[2]["content"].startswith("<tool>view ")
            and messages[-1]["content"] == "<tool>submit</tool>"
        )
        assert messages[5]["content"] == "<result>ok</result>\n"
        assert sum(mask) == sum(len(m["content"]) for m in messages if m["role"] == "assistant") + 1  # + eos
    assert synthetic.demonstrations(random.Random(0), 5) == pairs[:5]


def test_synthetic_function_names_avoid_swe_mini():
    from envs.swe import swe_mini as mini

    names = set()
    for inst in mini.load_swe_mini():
        for text in mini.repo_files(inst.instance_id).values():
            names |= set(re.findall(r"def (\w+)", text))
    assert not names & {n for family in FAMILIES for n in family.names}


# ---- the task -----------------------------------------------------------------------------------
def test_task_rejects_bad_arguments(tmp_path):
    from envs import registry as task_registry
    from envs.registry import UnknownTaskError
    from envs.swe.task import SweTask

    with pytest.raises(
        ValueError, match="dataset: invalid value 'swe-big'; valid choices: swe-mini, swe-synth, swe-verified"
    ):
        SweTask(dataset="swe-big")
    with pytest.raises(ValueError, match="runtime: invalid value 'k8s'; valid choices: local, docker"):
        SweTask(runtime="k8s")
    with pytest.raises(ValueError, match="data: swe-verified needs task_args.data=PATH"):
        SweTask(dataset="swe-verified")
    with pytest.raises(ValueError, match="swe-verified needs runtime=docker"):
        SweTask(dataset="swe-verified", runtime="local", data="x.json")
    with pytest.raises(ValueError, match="data: no such file"):
        SweTask(dataset="swe-verified", runtime="docker", data=str(tmp_path / "missing.jsonl"))
    with pytest.raises(ValueError, match="wrong_fix_rate"):
        SweTask(wrong_fix_rate=2.0)
    with pytest.raises(UnknownTaskError, match="dataset: invalid value"):
        task_registry.make("swe", dataset="nope")


def test_task_with_a_data_file_and_a_fake_runtime(tmp_path, monkeypatch):
    from envs.swe import task as task_module

    rows = [make_instance(instance_id=f"demo-{i}").to_record() for i in range(3)]
    path = tmp_path / "instances.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(task_module, "make_runtime", lambda name: FakeRuntime())
    task = task_module.SweTask(dataset="swe-verified", data=str(path))
    assert task.runtime_name == "docker" and [i.instance_id for i in task.instances] == [
        "demo-0",
        "demo-1",
        "demo-2",
    ]
    problem = task.sample_problem(random.Random(0))
    assert problem.prompt == rows[0]["problem_statement"] and problem.meta == rows[int(problem.key[-1])]
    assert [p.key for p in task.eval_problems(2, seed=1)] == [p.key for p in task.eval_problems(2, seed=1)]
    assert len(task.eval_problems(10)) == 3
    env = task.make_env(problem)
    _, [result] = play(env, ["<tool>replace calc.py 2     return a + b</tool>"])
    assert result.observation == "<result>ok</result>\n"
    assert task.stop == ("</tool>",) and task.default_runtime == "local"


def test_task_turns_an_unavailable_runtime_into_a_value_error(tmp_path, monkeypatch):
    from envs.swe import task as task_module
    from envs.swe.runtime import RuntimeUnavailable

    class Unavailable(FakeRuntime):
        def check(self, instance):
            raise RuntimeUnavailable("--runtime docker needs a running Docker daemon: refused")

    path = tmp_path / "instances.json"
    path.write_text(json.dumps([make_instance().to_record()]))
    monkeypatch.setattr(task_module, "make_runtime", lambda name: Unavailable())
    with pytest.raises(ValueError, match="needs a running Docker daemon: refused"):
        task_module.SweTask(dataset="swe-verified", data=str(path))


# ---- end to end with the local runtime (when the other half of the SWE env is present) ----------
def _gold_edit(instance, files):
    """(path, line number, new text) of a one-line gold patch."""
    after = apply_unified_diff(files, instance.patch)
    (path,) = [p for p in files if files[p] != after[p]]
    old, new = files[path].splitlines(), after[path].splitlines()
    (line,) = [i for i in range(len(old)) if old[i] != new[i]]
    return path, line + 1, new[line]


@pytest.mark.parametrize("wrong", [False, True])
def test_end_to_end_on_swe_mini_with_the_local_runtime(wrong):
    from envs.swe import local_runtime as local
    from envs.swe import swe_mini as mini

    instance = next(i for i in mini.load_swe_mini() if i.instance_id == "swe-mini__average-1")
    path, number, text = _gold_edit(instance, mini.repo_files(instance.instance_id))
    if wrong:
        text = text.replace("/", "*")
    env = SweEnv(instance, local.LocalRuntime())
    actions = [
        f"<tool>view {path}</tool>",
        f"<tool>replace {path} {number} {text}</tool>",
        "<tool>submit</tool>",
    ]
    messages, results = play(env, actions)
    assert sum(len(m["content"]) for m in messages) < 350
    assert results[-1].done and results[-1].reward == (0.0 if wrong else 1.0)
    assert results[-1].info["resolved"] is (not wrong) and results[-1].info["applied"] is True
