"""Episodes survive what the model's code leaves in its working copy (issue 34, item 3): code run
through the agent's `run_tests` nests 1,500 directories, turns a source or test file into a FIFO,
locks a directory, makes a symlink loop or a socket; the episode then ends through `submit` or a
turn without a tool call. Every case: the last step returns (done, reward 0), `close` does not
raise, and the working copy is gone; through `run_episode` too, which never raises."""

from __future__ import annotations

import asyncio

import pytest

from bench.engines.base import Completion, SamplingParams
from bench.rollout.episode import run_episode
from envs.swe import synthetic
from envs.swe.local_runtime import LocalRuntime
from envs.swe.scaffold import SweEnv
from envs.swe.swe_mini import load_swe_mini, repo_files

MINI = {i.instance_id: i for i in load_swe_mini()}
SYNTH = synthetic.bug_for_id(synthetic.generated_id("eval0", 2))
INSTANCES = {
    "clamp": MINI["swe-mini__clamp-1"],
    "account": MINI["swe-mini__account-1"],
    "synth": SYNTH.instance,
}

MESS = {
    "1,500 nested directories": (
        "import os\n_fd = os.open('.', os.O_RDONLY)\nfor _ in range(1500):\n    os.mkdir('d', dir_fd=_fd)\n"
        "    _n = os.open('d', os.O_RDONLY, dir_fd=_fd)\n    os.close(_fd)\n    _fd = _n\n"
    ),
    "the module becomes a FIFO": "import os\nos.remove(__file__)\nos.mkfifo(__file__)\n",
    "a FIFO named like a test module": "import os\nos.mkfifo('tests/test_zz.py')\n",
    "a locked directory": "import os\nos.makedirs('locked/inner')\nos.chmod('locked/inner', 0)\nos.chmod('locked', 0)\n",
    "a symlink loop": "import os\nos.symlink('b', 'a')\nos.symlink('a', 'b')\n",
    "a socket": "import socket\n_s = socket.socket(socket.AF_UNIX)\n_s.bind('sock')\n",
}


def module_of(name: str) -> tuple[str, str, str]:
    """(module path, its first line, a test id visible at the base commit)."""
    instance = INSTANCES[name]
    files = SYNTH.files if name == "synth" else repo_files(instance.instance_id)
    path = next(p for p in files if not p.startswith("tests/"))
    visible = instance.pass_to_pass[0] if instance.pass_to_pass else instance.fail_to_pass[0]
    return path, files[path].splitlines()[0], visible


def actions(name: str, mess: str, ending: str) -> list[str]:
    """Put `mess` at the top of the module, run a test (which runs it), end the episode."""
    path, first, visible = module_of(name)
    return [
        f"<tool>replace {path} 1 {MESS[mess]}{first}</tool>",
        f"<tool>run_tests {visible}</tool>",
        "<tool>submit</tool>" if ending == "submit" else "I am done.",
    ]


CASES = [  # two instances suffice for the slow mess (about 5 s of rmdir each)
    (mess, instance)
    for mess in MESS
    for instance in ("clamp", "account", "synth")
    if not (mess.startswith("1,500") and instance == "synth")
]


@pytest.mark.parametrize("ending", ["submit", "no tool call"])
@pytest.mark.parametrize("mess, instance", CASES)
def test_the_last_step_and_close_survive_the_mess(mess, instance, ending):

    async def episode():
        env = SweEnv(INSTANCES[instance], LocalRuntime())
        await env.reset()
        tmp = env.workspace.tmp
        try:
            results = [await env.step(action) for action in actions(instance, mess, ending)]
        finally:
            await env.close()
        return results, tmp

    results, tmp = asyncio.run(episode())
    assert "ok" in results[0].observation and "PASSED" in results[1].observation  # the mess was made
    assert results[-1].done and results[-1].reward == 0.0
    assert "reward/tamper_suspect" in results[-1].info["metrics"]
    assert not tmp.exists()


class _CharTokenizer:
    """One token per character: the worker's completions decode to the scripted actions."""

    bos_token_id = None
    chat_template = None

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(map(chr, ids))


class _ScriptedWorker:
    def __init__(self, actions: list[str]):
        self.actions = list(actions)

    def submit(self, request, callback):
        ids = [ord(c) for c in self.actions.pop(0)]
        callback(
            Completion(request.request_id, request.prompt_ids, ids, [-0.1] * len(ids), [0] * len(ids), "stop")
        )


@pytest.mark.parametrize(
    "mess", ["1,500 nested directories", "the module becomes a FIFO", "a locked directory"]
)
def test_run_episode_returns_a_trajectory_whatever_the_mess(mess):
    env = SweEnv(INSTANCES["clamp"], LocalRuntime())
    worker = _ScriptedWorker(actions("clamp", mess, "no tool call"))
    traj = asyncio.run(
        run_episode(worker, _CharTokenizer(), env, SamplingParams(max_new_tokens=4096), 0, 5, 100_000, "k", 0)
    )
    assert traj.reward == 0.0 and traj.turns == 3 and env.workspace is None
